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
	var b strings.Builder
	b.WriteString(docgen.Header("internal/metrics (Collectors)"))
	b.WriteString("# Metrics\n\n")
	b.WriteString("The operator's own metrics, served on the manager's metrics endpoint\n")
	b.WriteString("beside controller-runtime's (`controller_runtime_*`, `workqueue_*`,\n")
	b.WriteString("`rest_client_*`). How to scrape them and the shipped alerts:\n")
	b.WriteString("[operating.md](../operating.md). Which Tasks get the `taskoperator_task_*`\n")
	b.WriteString("series: `--task-metrics` ([flags.md](flags.md)). The gauges are computed\n")
	b.WriteString("from the operator's cache at each scrape, and only the leading replica\n")
	b.WriteString("exports the per-Task and per-queue ones.\n\n")
	b.WriteString(docgen.Table([]string{"metric", "type", "labels", "what it counts"}, rows))
	docgen.Golden(t, "../../docs/reference/metrics.md", b.String())
}
