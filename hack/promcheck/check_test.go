package promcheck

import (
	"os"
	"path/filepath"
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
