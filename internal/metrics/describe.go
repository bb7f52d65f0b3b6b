package metrics

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Info describes one of the operator's own metrics.
type Info struct {
	Name, Help string
	// Type is counter, histogram or gauge (the gauges computed from the
	// cache at scrape time).
	Type   string
	Labels []string
}

// descFields reads a Desc's String(), the only way client_golang shows a
// description's name, help and labels.
var descFields = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"),(?: unit: "[^"]*",)? constLabels: \{[^}]*\}, variableLabels: \{([^}]*)\}\}$`)

// Describe lists the metrics of Collectors, in their order: what
// hack/metricnames checks the shipped alert rules against and the
// metrics reference page is generated from.
func Describe() ([]Info, error) {
	var out []Info
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
				return nil, fmt.Errorf("cannot read %s", d)
			}
			name, err := strconv.Unquote(m[1])
			if err != nil {
				return nil, err
			}
			help, err := strconv.Unquote(m[2])
			if err != nil {
				return nil, err
			}
			var labels []string
			if m[3] != "" {
				labels = strings.Split(m[3], ",")
			}
			out = append(out, Info{Name: name, Help: help, Type: typ, Labels: labels})
		}
	}
	return out, nil
}
