//go:build reliability

package reliability

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// Scenario 8, idle after the scenarios before it (go test runs the files
// in name order), over what they left: the crash storm's finished Tasks
// among others. Far-future cron Tasks and finished one-shot Tasks
// are added; a fresh operator (no leader election, so no lease writes)
// makes its first pass over everything, and once its write counter has
// stood still for 15 s, its writes are counted over a window: the target is
// zero. The operator's own counter (rest_client_requests_total, methods
// POST/PUT/PATCH/DELETE) is cross-checked with the API server's
// apiserver_request_total for tasks, tasks/status, jobs and events.
func TestS08IdleWrites(t *testing.T) {
	nCron, nOne := pick(20, 10), pick(10, 5)
	window := pick(60*time.Second, 15*time.Second)
	still := pick(15*time.Second, 8*time.Second)
	ns := s.newNamespace(t, "rel-idle", false)
	var tasks []*v1alpha1.Task
	for i := 0; i < nCron; i++ {
		// Midnight on 1 January: not due for a long time (unless the suite
		// runs across New Year).
		tasks = append(tasks, testutil.NewTask(ns, fmt.Sprintf("cron-%03d", i), testutil.Schedule("0 0 1 1 *")))
	}
	for i := 0; i < nOne; i++ {
		tasks = append(tasks, testutil.NewTask(ns, fmt.Sprintf("once-%03d", i)))
	}
	createAll(t, tasks)
	op := s.startOperator(t, "op", true)
	started := time.Now()
	waitForTasks(t, 2*time.Minute, "the idle namespace's Tasks to be Scheduled or Succeeded", ns, op, len(tasks), func(task *v1alpha1.Task) bool {
		return task.Status.Phase == v1alpha1.PhaseScheduled || task.Status.Phase == v1alpha1.PhaseSucceeded
	})
	// Settle: the first pass over every Task of the cluster (and anything
	// the earlier scenarios left in motion) is over when the counter
	// stands still for 15 s.
	var last clientCounts
	lastChange := time.Now()
	harness.Eventually(t, 3*time.Minute, "the operator's writes to stand still", note(op), func(context.Context) (bool, string) {
		c, err := operatorRequests(op.MetricsURL())
		if err != nil {
			return false, err.Error()
		}
		if c.writes != last.writes {
			last, lastChange = c, time.Now()
		}
		return time.Since(lastChange) >= still, fmt.Sprintf("%.0f writes so far, last change %s ago", c.writes, harness.Secs(time.Since(lastChange)))
	})
	settled := time.Since(started)
	startup := last

	ctx := ctxFor(t, 30*time.Second)
	var all v1alpha1.TaskList
	if err := s.c.List(ctx, &all); err != nil {
		t.Fatal(err)
	}
	var jobs batchv1.JobList
	if err := s.c.List(ctx, &jobs, client.MatchingLabels{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}); err != nil {
		t.Fatal(err)
	}
	c0, err := operatorRequests(op.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	a0, err := apiserverWrites(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(window)
	c1, err := operatorRequests(op.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	a1, err := apiserverWrites(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	d := c1.minus(c0)
	api := diffWrites(a0, a1, "tasks", "tasks/status", "jobs")
	perMin := d.writes * float64(time.Minute) / float64(window)
	if d.writes != 0 {
		t.Errorf("the idle operator wrote %.0f times in %s (%s; codes %s), want 0", d.writes, harness.Secs(window), fmtCounts(d.byMethod), fmtCounts(d.byCode))
	}
	apiTotal := 0.0
	for _, v := range api {
		apiTotal += v
	}
	if apiTotal != 0 {
		t.Errorf("the API server counted %.0f writes to tasks, tasks/status and jobs in the idle window: %s", apiTotal, fmtCounts(api))
	}
	// A restart over the same Tasks: its first pass over finished Tasks.
	if err := op.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := op.Start(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	var cur clientCounts
	lastWrites, lastChange := -1.0, time.Now()
	harness.Eventually(t, 3*time.Minute, "the restarted operator's writes to stand still", note(op), func(context.Context) (bool, string) {
		c, err := operatorRequests(op.MetricsURL())
		if err != nil {
			return false, err.Error()
		}
		cur = c
		if c.writes != lastWrites {
			lastWrites, lastChange = c.writes, time.Now()
		}
		return time.Since(lastChange) >= still, fmt.Sprintf("%.0f writes so far", c.writes)
	})
	last = cur
	figure(t, "a restart over the same Tasks: %.0f writes (%s) and %.0f requests in all until it stood still %s later", last.writes, fmtCounts(writesOnly(last.byMethod)), last.requests, harness.Secs(time.Since(restarted)))
	figure(t, "idle over %d Tasks (%d cron not due, the rest finished) and %d Jobs in the cluster: a fresh operator settled %s after start having written %.0f times (its first pass); then %.1f writes/min over %s (operator's rest_client_requests_total: %s; %.0f requests in all), API server writes to tasks, tasks/status, jobs: %.0f",
		len(all.Items), countCron(all.Items), len(jobs.Items), harness.Secs(settled), startup.writes, perMin, harness.Secs(window), fmtCounts(d.byMethod), d.requests, apiTotal)
}

func countCron(tasks []v1alpha1.Task) int {
	n := 0
	for _, t := range tasks {
		if t.Spec.Schedule != nil {
			n++
		}
	}
	return n
}

func writesOnly(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if writeMethods[k] {
			out[k] = v
		}
	}
	return out
}
