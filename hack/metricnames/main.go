// Command metricnames prints the names of the metrics task-operator itself
// exports, one per line: what hack/promcheck checks the shipped alert
// rules and dashboard against (config/prometheus).
package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/taskops/task-operator/internal/metrics"
)

func main() {
	infos, err := metrics.Describe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "metricnames:", err)
		os.Exit(1)
	}
	var names []string
	for _, m := range infos {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	for _, n := range slices.Compact(names) {
		fmt.Println(n)
	}
}
