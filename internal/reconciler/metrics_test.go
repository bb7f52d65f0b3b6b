package reconciler_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

// scrape reads the metrics the way Prometheus does, from the handler the
// manager's metrics endpoint serves.
func scrape(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(ctrlmetrics.Registry, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	return string(body)
}

func TestTheOperatorsMetricsAreScraped(t *testing.T) {
	ns := newNamespace(t)
	ok := createTask(t, ns, "metered")
	job := waitJobs(t, ok, 1)[0]
	must(t, testutil.CompleteJob(ctx, k8s, &job, fakeClock.Now()))
	waitTask(t, ok, "phase Succeeded", phaseIs(v1alpha1.PhaseSucceeded))

	retried := createTask(t, ns, "metered-retry", testutil.MaxRetry(1))
	job = waitJobs(t, retried, 1)[0]
	must(t, testutil.FailJob(ctx, k8s, &job, fakeClock.Now(), "BackoffLimitExceeded", "x"))
	waitTask(t, retried, "phase Retrying", phaseIs(v1alpha1.PhaseRetrying))

	cron, _ := scheduledTask(t, ns, "metered-cron")
	slotJob(t, cron, toSlot(t, cron))

	scraped(t, "the metrics", []string{
		`taskoperator_runs_total{result="Succeeded",type="shell"}`,
		`taskoperator_attempts_total{outcome="started",type="shell"}`,
		`taskoperator_attempts_total{outcome="failed",type="shell"}`,
		`taskoperator_retries_scheduled_total{type="shell"}`,
		`taskoperator_run_duration_seconds_count{result="Succeeded",type="shell"}`,
		`taskoperator_schedule_start_delay_seconds_bucket{le="0.005"}`,
		`taskoperator_schedule_start_delay_seconds_count`,
		`taskoperator_tasks{phase="Succeeded"}`,
		`taskoperator_tasks{phase="Retrying"}`,
		`controller_runtime_reconcile_total{controller="task"`,
	})
}

// scraped waits until the operator's metrics hold every line of want and
// none of absent.
func scraped(t *testing.T, what string, want []string, absent ...string) {
	t.Helper()
	eventually(t, what, func() (bool, string) {
		text := scrape(t)
		for _, w := range want {
			if !strings.Contains(text, w) {
				return false, "missing " + w
			}
		}
		for _, a := range absent {
			if strings.Contains(text, a) {
				return false, "present: " + a
			}
		}
		return true, ""
	})
}
