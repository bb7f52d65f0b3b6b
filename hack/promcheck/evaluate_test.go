package promcheck

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/promqltest"
)

// The shipped alerts evaluate as meant, not only parse: each expression,
// as written in alerts.yaml, runs in Prometheus' own PromQL engine (the
// promqltest format `promtool test rules` builds on) against series
// shaped like the operator's, and fires for the series it should, with
// the labels an Alertmanager route needs (the Task's namespace), and not
// for the others. (`for:` durations are Prometheus' rule manager's; what
// is checked here is the condition.)
func TestTheShippedAlertsFireWhenTheyShouldAndOnlyThen(t *testing.T) {
	alerts, err := Alerts(filepath.Join(configDir, "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		alert, load, by string
		at              map[string][]string // eval time -> the label sets that fire
	}{
		{
			alert: "TaskFailed", by: "namespace, task",
			load: `taskoperator_task_last_run_success{namespace="team-a",task="nightly"} 1 1 0 0
  taskoperator_task_last_run_success{namespace="team-b",task="report"} 0 1 1 1`,
			at: map[string][]string{"0m": {`{namespace="team-b", task="report"}`}, "3m": {`{namespace="team-a", task="nightly"}`}},
		},
		{
			alert: "CronTaskNotSucceeding", by: "namespace, task",
			// nightly last succeeded at 0 s; report keeps succeeding.
			load: `taskoperator_task_last_success_timestamp_seconds{namespace="team-a",task="nightly"} 0x20
  taskoperator_task_last_success_timestamp_seconds{namespace="team-b",task="report"} 0+60x20
  taskoperator_task_schedule_period_seconds{namespace="team-a",task="nightly"} 60x20
  taskoperator_task_schedule_period_seconds{namespace="team-b",task="report"} 60x20`,
			at: map[string][]string{"2m": nil, "10m": {`{namespace="team-a", task="nightly"}`}},
		},
		{
			alert: "TaskFailureStreak", by: "namespace, task",
			load: `taskoperator_task_consecutive_failures{namespace="team-a",task="nightly"} 1 2 3 0`,
			at:   map[string][]string{"1m": nil, "2m": {`{namespace="team-a", task="nightly"}`}, "3m": nil},
		},
		{
			alert: "TaskQueueBacklog", by: "namespace, queue",
			load: `taskoperator_queue_oldest_queued_timestamp_seconds{namespace="team-a",queue="gpu"} 0x30
  taskoperator_queue_oldest_queued_timestamp_seconds{namespace="team-b",queue="cpu"} 0+60x30`,
			at: map[string][]string{"10m": nil, "20m": {`{namespace="team-a", queue="gpu"}`}},
		},
		{
			alert: "TaskNotificationsFailing", by: "result",
			load: `taskoperator_notifications_total{result="failed"} 0x5 1x5
  taskoperator_notifications_total{result="sent"} 0+1x10`,
			at: map[string][]string{"4m": nil, "8m": {`{result="failed"}`}},
		},
	}
	tested := map[string]bool{}
	for _, c := range cases {
		expr, ok := alerts[c.alert]
		if !ok {
			t.Errorf("alerts.yaml has no alert %s", c.alert)
			continue
		}
		tested[c.alert] = true
		var script strings.Builder
		fmt.Fprintf(&script, "load 1m\n  %s\n", c.load)
		for at, firing := range c.at {
			fmt.Fprintf(&script, "\neval instant at %s group by (%s) (%s)\n", at, c.by, strings.Join(strings.Fields(expr), " "))
			for _, labels := range firing {
				fmt.Fprintf(&script, "  %s 1\n", labels)
			}
		}
		t.Run(c.alert, func(t *testing.T) {
			promqltest.RunTest(t, script.String(), promqltest.NewTestEngine(t, false, 5*time.Minute, 100000))
		})
	}
	for name := range alerts {
		if !tested[name] {
			t.Errorf("alert %s has no evaluation case", name)
		}
	}
}
