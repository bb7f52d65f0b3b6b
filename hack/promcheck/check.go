// Package promcheck checks the observability task-operator ships
// (config/prometheus): the alert rules are valid Prometheus rules (the
// validation `promtool check rules` does, from Prometheus' own rulefmt and
// PromQL parser), the PrometheusRule carries the same rules, and every
// query of the rules and of the Grafana dashboard names only metrics the
// operator exports. It is a module of its own so the operator does not
// depend on Prometheus' server code.
package promcheck

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

var promql = parser.NewParser(parser.Options{})

// Rules validates a Prometheus rule file and returns its expressions.
func Rules(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseRules(b)
}

func parseRules(b []byte) ([]string, error) {
	groups, errs := rulefmt.Parse(b, false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		msgs := make([]string, 0, len(errs))
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		return nil, fmt.Errorf("%s", strings.Join(msgs, "; "))
	}
	var exprs []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			exprs = append(exprs, r.Expr)
		}
	}
	if len(exprs) == 0 {
		return nil, fmt.Errorf("no rules")
	}
	return exprs, nil
}

// PrometheusRule validates the spec of a PrometheusRule as a rule file and
// returns its expressions.
func PrometheusRule(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var obj struct {
		Kind string    `yaml:"kind"`
		Spec yaml.Node `yaml:"spec"`
	}
	if err := yaml.Unmarshal(b, &obj); err != nil {
		return nil, err
	}
	if obj.Kind != "PrometheusRule" {
		return nil, fmt.Errorf("kind %q, want PrometheusRule", obj.Kind)
	}
	spec, err := yaml.Marshal(&obj.Spec)
	if err != nil {
		return nil, err
	}
	return parseRules(spec)
}

// DashboardQueries returns every "expr" of a Grafana dashboard.
func DashboardQueries(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if s, ok := c.(string); ok && k == "expr" {
					exprs = append(exprs, s)
				}
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(doc)
	sort.Strings(exprs)
	return exprs, nil
}

// Metrics parses a query and returns the metric names it selects; Grafana
// variables ($namespace, $__range, ...) must be inside label values, where
// PromQL reads them as text.
func Metrics(expr string) ([]string, error) {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			names = append(names, vs.Name)
		}
		return nil
	})
	return names, nil
}

// Unknown returns the metric names of exprs that are not exported: not in
// exported, nor a histogram's _bucket, _sum or _count series of one.
func Unknown(exprs []string, exported map[string]bool) ([]string, error) {
	var out []string
	for _, e := range exprs {
		names, err := Metrics(e)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", e, err)
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%q selects no metric", e)
		}
		for _, n := range names {
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				base = strings.TrimSuffix(base, suffix)
			}
			if !exported[n] && !exported[base] {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// SameRules reports whether two lists of expressions are the same rules.
func SameRules(a, b []string) bool { return reflect.DeepEqual(a, b) }

// Alerts returns the alert rules of a rule file by name, their
// expressions as written.
func Alerts(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	groups, errs := rulefmt.Parse(b, false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		return nil, errs[0]
	}
	out := map[string]string{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				out[r.Alert] = r.Expr
			}
		}
	}
	return out, nil
}
