package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// APIServerMetrics scrapes the API server's own /metrics through c (a
// clientset's REST client) and parses it.
func APIServerMetrics(ctx context.Context, c rest.Interface) (Metrics, error) {
	raw, err := c.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scraping the API server's /metrics: %w", err)
	}
	return ParseMetrics(bytes.NewReader(raw))
}

// Sample is one sample of a Prometheus scrape: a histogram or summary
// gives its _sum and _count (and _bucket / quantile) samples, as the text
// format prints them.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Metrics is a parsed scrape.
type Metrics []Sample

// ParseMetrics reads the Prometheus text exposition format
// (github.com/prometheus/common/expfmt).
func ParseMetrics(r io.Reader) (Metrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	// A final newline is what the format ends with; a text cut from a test
	// may lack it, and one more blank line is harmless.
	families, err := parser.TextToMetricFamilies(io.MultiReader(r, strings.NewReader("\n")))
	if err != nil {
		return nil, err
	}
	var out Metrics
	for name, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out = append(out, samplesOf(name, f.GetType(), m, labels)...)
		}
	}
	return out, nil
}

func samplesOf(name string, typ dto.MetricType, m *dto.Metric, labels map[string]string) []Sample {
	with := func(k, v string) map[string]string {
		l := make(map[string]string, len(labels)+1)
		for a, b := range labels {
			l[a] = b
		}
		l[k] = v
		return l
	}
	switch typ {
	case dto.MetricType_COUNTER:
		return []Sample{{name, labels, m.GetCounter().GetValue()}}
	case dto.MetricType_GAUGE:
		return []Sample{{name, labels, m.GetGauge().GetValue()}}
	case dto.MetricType_SUMMARY:
		s := m.GetSummary()
		out := []Sample{{name + "_sum", labels, s.GetSampleSum()}, {name + "_count", labels, float64(s.GetSampleCount())}}
		for _, q := range s.GetQuantile() {
			out = append(out, Sample{name, with("quantile", strconv.FormatFloat(q.GetQuantile(), 'g', -1, 64)), q.GetValue()})
		}
		return out
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		h := m.GetHistogram()
		out := []Sample{{name + "_sum", labels, h.GetSampleSum()}, {name + "_count", labels, float64(h.GetSampleCount())}}
		for _, b := range h.GetBucket() {
			out = append(out, Sample{name + "_bucket", with("le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)), float64(b.GetCumulativeCount())})
		}
		return out
	}
	return []Sample{{name, labels, m.GetUntyped().GetValue()}}
}

// Sum adds the values of the samples called name whose labels pass keep
// (nil: all).
func (m Metrics) Sum(name string, keep func(map[string]string) bool) float64 {
	var total float64
	for _, s := range m {
		if s.Name == name && (keep == nil || keep(s.Labels)) {
			total += s.Value
		}
	}
	return total
}

// Value is the first sample called name, NaN when there is none.
func (m Metrics) Value(name string) float64 {
	for _, s := range m {
		if s.Name == name {
			return s.Value
		}
	}
	return math.NaN()
}

// Samples are the samples called name.
func (m Metrics) Samples(name string) []Sample {
	var out []Sample
	for _, s := range m {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}
