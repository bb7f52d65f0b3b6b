package metrics

import (
	"strings"
	"testing"

	"github.com/taskops/task-operator/internal/docgen"
)

// TestMetricsReference: docs/reference/metrics.md lists every metric of
// Collectors, with its type, labels and help (make docs writes it).
func TestMetricsReference(t *testing.T) {
	infos, err := Describe()
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	for _, m := range infos {
		var labels []string
		for _, l := range m.Labels {
			labels = append(labels, docgen.Code(l))
		}
		rows = append(rows, []string{docgen.Code(m.Name), m.Type, strings.Join(labels, ", "), m.Help})
	}
	docgen.Golden(t, "../../docs/reference/metrics.md", docgen.OneTablePage("internal/metrics (Collectors)", "Metrics",
		"The operator's own metrics, served on the manager's metrics endpoint\n"+
			"beside controller-runtime's (`controller_runtime_*`, `workqueue_*`,\n"+
			"`rest_client_*`). How to scrape them and the shipped alerts:\n"+
			"[operating.md](../operating.md). Which Tasks get the `taskoperator_task_*`\n"+
			"series: `--task-metrics` ([flags.md](flags.md)). The gauges are computed\n"+
			"from the operator's cache at each scrape, and only the leading replica\n"+
			"exports the per-Task and per-queue ones.\n",
		[]string{"metric", "type", "labels", "what it counts"}, rows))
}
