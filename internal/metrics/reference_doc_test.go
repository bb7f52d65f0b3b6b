package metrics

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/taskops/task-operator/internal/docgen"
)

var descFields = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"),(?: unit: "[^"]*",)? constLabels: \{[^}]*\}, variableLabels: \{([^}]*)\}\}$`)

// TestMetricsReference: docs/reference/metrics.md lists every metric of
// Collectors, with its type, labels and help (make docs writes it).
func TestMetricsReference(t *testing.T) {
	var rows [][]string
	for _, c := range Collectors(nil, nil, PerTaskAll) {
		typ := "gauge"
		switch c.(type) {
		case *prometheus.CounterVec, prometheus.Counter:
			typ = "counter"
		case *prometheus.HistogramVec, prometheus.Histogram:
			typ = "histogram"
		}
		ch := make(chan *prometheus.Desc, 64)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			m := descFields.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read %s", d)
			}
			name, err := strconv.Unquote(m[1])
			if err != nil {
				t.Fatal(err)
			}
			help, err := strconv.Unquote(m[2])
			if err != nil {
				t.Fatal(err)
			}
			var labels []string
			for _, l := range strings.Split(m[3], ",") {
				if l != "" {
					labels = append(labels, docgen.Code(l))
				}
			}
			rows = append(rows, []string{docgen.Code(name), typ, strings.Join(labels, ", "), help})
		}
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
