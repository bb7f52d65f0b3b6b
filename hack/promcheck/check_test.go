package promcheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// configDir is the shipped config/prometheus.
var configDir = filepath.Join("..", "..", "config", "prometheus")

// exported reads the operator's metric names, printed by
// hack/metricnames into $METRIC_NAMES (make check-prometheus).
func exported(t *testing.T) map[string]bool {
	t.Helper()
	path := os.Getenv("METRIC_NAMES")
	if path == "" {
		t.Fatal("METRIC_NAMES is not set: run `make check-prometheus`")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, n := range strings.Fields(string(b)) {
		names[n] = true
	}
	if !names["taskoperator_task_last_run_success"] {
		t.Fatalf("%s does not list the operator's metrics", path)
	}
	return names
}

func TestTheShippedAlertRulesAreValidAndNameOnlyExportedMetrics(t *testing.T) {
	exprs, err := Rules(filepath.Join(configDir, "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	unknown, err := Unknown(exprs, exported(t))
	if err != nil || len(unknown) > 0 {
		t.Fatalf("unknown metrics %v, %v", unknown, err)
	}
	inCRD, err := PrometheusRule(filepath.Join(configDir, "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !SameRules(exprs, inCRD) {
		t.Fatalf("prometheusrule.yaml and alerts.yaml differ:\n%v\n%v", inCRD, exprs)
	}
}

func TestTheShippedDashboardQueriesNameOnlyExportedMetrics(t *testing.T) {
	exprs, err := DashboardQueries(filepath.Join(configDir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(exprs) < 10 {
		t.Fatalf("%d queries", len(exprs))
	}
	unknown, err := Unknown(exprs, exported(t))
	if err != nil || len(unknown) > 0 {
		t.Fatalf("unknown metrics %v, %v", unknown, err)
	}
	for _, want := range []string{"taskoperator_runs_total", "taskoperator_queue_queued", "taskoperator_task_last_success_timestamp_seconds", "taskoperator_schedule_start_delay_seconds_bucket"} {
		if !strings.Contains(strings.Join(exprs, "\n"), want) {
			t.Errorf("no panel queries %s", want)
		}
	}
}

// The checks can fail: a broken rule, a metric the operator does not
// export, and a query that does not parse are each caught.
func TestTheChecksCatchABrokenRuleAnUnknownMetricAndABadQuery(t *testing.T) {
	if _, err := parseRules([]byte("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: 'rate(x[5m]'\n")); err == nil {
		t.Error("a rule that does not parse passed")
	}
	if _, err := parseRules([]byte("groups:\n- name: g\n  rules:\n  - alert: A\n    record: b\n    expr: up\n")); err == nil {
		t.Error("a rule that is both alert and record passed")
	}
	unknown, err := Unknown([]string{`taskoperator_task_last_run_succes == 0`}, exported(t))
	if err != nil || len(unknown) != 1 {
		t.Errorf("a misspelt metric: %v, %v", unknown, err)
	}
	if _, err := Unknown([]string{`sum(`}, exported(t)); err == nil {
		t.Error("a query that does not parse passed")
	}
}

// Every alert links its runbook: a runbook_url into docs/troubleshooting.md
// whose heading exists.
func TestEveryAlertHasARunbookThatExists(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(configDir, "..", "..", "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			// GitHub's anchor: lower case, spaces to dashes, no punctuation.
			a := strings.ToLower(strings.ReplaceAll(h, " ", "-"))
			anchors[strings.Map(func(r rune) rune {
				if r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
					return r
				}
				return -1
			}, a)] = true
		}
	}
	for _, file := range []string{"alerts.yaml", "prometheusrule.yaml"} {
		raw, err := os.ReadFile(filepath.Join(configDir, file))
		if err != nil {
			t.Fatal(err)
		}
		alerts := strings.Count(string(raw), "- alert: ")
		urls := regexp.MustCompile(`runbook_url: "https://github.com/taskops/task-operator/blob/main/docs/troubleshooting.md#([a-z0-9_-]+)"`).FindAllStringSubmatch(string(raw), -1)
		if len(urls) != alerts {
			t.Errorf("%s: %d alerts, %d runbook_url annotations", file, alerts, len(urls))
		}
		for _, u := range urls {
			if !anchors[u[1]] {
				t.Errorf("%s: runbook_url #%s names no heading of docs/troubleshooting.md", file, u[1])
			}
		}
	}
}
