// Command metricnames prints the names of the metrics task-operator itself
// exports, one per line: what hack/promcheck checks the shipped alert
// rules and dashboard against (config/prometheus).
package main

import (
	"fmt"
	"regexp"
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/taskops/task-operator/internal/metrics"
)

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func main() {
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		for _, c := range metrics.Collectors(nil, nil, metrics.PerTaskAll) {
			c.Describe(ch)
		}
		close(ch)
	}()
	seen := map[string]bool{}
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			seen[m[1]] = true
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Println(n)
	}
}
