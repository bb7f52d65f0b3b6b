//go:build multikueue

package multikueue

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// A Task's attempt runs on a worker: the manager's Job is MultiKueue's
// (spec.managedBy) and gets no pod here, one worker holds the copy, and
// the Task succeeds with that worker named in its attempt record and how
// to read the output there.
func TestAnAttemptRunsOnAWorkerAndTheTaskNamesIt(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "mk-run")
	queues(t, ns, 4, 2, 2)
	create(t, env.c, dispatchedTask(ns, "hello", 3))
	on := runningOn(t, ns, "hello")
	done := waitTask(t, ns, "hello", "Succeeded", 2*time.Minute, phase(v1alpha1.PhaseSucceeded))

	jobs := managerJobs(t, ns, "hello")
	if len(jobs) != 1 || ptr.Deref(jobs[0].Spec.ManagedBy, "") != v1alpha1.MultiKueueManagedBy {
		t.Fatalf("the manager's Jobs: %d, managedBy %v", len(jobs), jobs[0].Spec.ManagedBy)
	}
	if pods, err := harness.PodsOf(context.Background(), env.c, ns, "hello"); err != nil || len(pods) != 0 {
		t.Fatalf("pods on the manager: %d, %v; want none", len(pods), err)
	}
	if done.Status.Attempts != 1 || len(done.Status.AttemptRecords) != 1 {
		t.Fatalf("attempts %d, records %+v", done.Status.Attempts, done.Status.AttemptRecords)
	}
	rec := done.Status.AttemptRecords[0]
	t.Logf("ran on %s; attempt record: cluster %q, message %q", on, rec.Cluster, rec.Message)
	if rec.Cluster != on || !strings.Contains(rec.Message, "kubectl --context "+on+" -n "+ns+" logs job/"+rec.JobName) {
		t.Fatalf("attempt record: cluster %q message %q; want %s and how to read its logs there", rec.Cluster, rec.Message, on)
	}
	if strings.Contains(strings.ToLower(rec.Message), "no output") {
		t.Fatalf("the record says %q", rec.Message)
	}
	if rec.ExitCode == nil || *rec.ExitCode != 0 {
		t.Fatalf("exitCode %v; want 0 (the mirrored Complete condition)", rec.ExitCode)
	}
}

// Where Kueue's Job webhook is installed (as in any Kueue install), a Task
// with only the Kueue queue label, in a queue that dispatches through
// MultiKueue, is dispatched too: the webhook sets spec.managedBy on its
// Job at creation, and the operator treats the Job by that field.
func TestKueuesWebhookDispatchesATaskWithOnlyTheQueueLabel(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "mk-webhook")
	queues(t, ns, 4, 2, 2)
	create(t, env.c, dispatchedTask(ns, "plain", 3, func(t *v1alpha1.Task) { delete(t.Labels, v1alpha1.LabelDispatch) }))
	on := runningOn(t, ns, "plain")
	done := waitTask(t, ns, "plain", "Succeeded", 2*time.Minute, phase(v1alpha1.PhaseSucceeded))
	jobs := managerJobs(t, ns, "plain")
	if len(jobs) != 1 || ptr.Deref(jobs[0].Spec.ManagedBy, "") != v1alpha1.MultiKueueManagedBy {
		t.Fatalf("the manager's Jobs: %d, managedBy %v; want one, set by Kueue's webhook", len(jobs), jobs[0].Spec.ManagedBy)
	}
	if rec := done.Status.AttemptRecords[0]; rec.Cluster != on {
		t.Fatalf("attempt record names %q, ran on %s", rec.Cluster, on)
	}
}

// A failing attempt fails on its worker (the shell's exit 3 there, as the
// mirrored Job status reports it) and is retried as a new Job, dispatched
// afresh: with the first attempt's worker left no room during the backoff,
// the retry runs on the other worker, and lastError names that one. An
// exit code listed in spec.nonRetryableExitCodes ends the run at once
// (NotRetryable), from the pod failure policy's outcome on the worker.
func TestAFailingAttemptIsRetriedAndTheRetryIsDispatchedAgain(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "mk-retry")
	queues(t, ns, 4, 1, 1)
	create(t, env.c, dispatchedTask(ns, "flaky", 1, testutil.Retries(1, 15, 15, 1), testutil.PodAnnotations(harness.SimExitCode, "3")))
	first := runningOn(t, ns, "flaky")
	waitTask(t, ns, "flaky", "its first attempt failed", time.Minute, func(t *v1alpha1.Task) bool {
		return len(t.Status.AttemptRecords) > 0 && t.Status.AttemptRecords[len(t.Status.AttemptRecords)-1].Result == v1alpha1.AttemptResultFailed
	})
	closeWorker(t, workerNamed(t, first), ns) // within the 15 s backoff

	failed := waitTask(t, ns, "flaky", "Failed after 2 attempts", 2*time.Minute, phase(v1alpha1.PhaseFailed))
	if failed.Status.Attempts != 2 || len(failed.Status.AttemptRecords) != 2 {
		t.Fatalf("attempts %d, records %d; want 2", failed.Status.Attempts, len(failed.Status.AttemptRecords))
	}
	for _, rec := range failed.Status.AttemptRecords {
		// The exit code comes back in the mirrored Failed condition,
		// written by the pod failure policy's retryable rule on the worker.
		if rec.Result != v1alpha1.AttemptResultFailed || rec.Reason != v1alpha1.AttemptPodFailed || ptr.Deref(rec.ExitCode, -1) != 3 {
			t.Errorf("attempt %d: result %s reason %s exitCode %d; want Failed PodFailed 3", rec.Attempt, rec.Result, rec.Reason, ptr.Deref(rec.ExitCode, -1))
		}
	}
	retry, firstRec := failed.Status.AttemptRecords[0], failed.Status.AttemptRecords[1]
	t.Logf("attempt 1 on %s, attempt 2 on %s; lastError %q", firstRec.Cluster, retry.Cluster, failed.Status.LastError)
	if firstRec.Cluster != first || retry.Cluster != otherThan(first) {
		t.Fatalf("attempt 1 on %q, attempt 2 on %q; want %s then %s", firstRec.Cluster, retry.Cluster, first, otherThan(first))
	}
	if !strings.Contains(failed.Status.LastError, "ran on worker cluster "+retry.Cluster) || !strings.Contains(failed.Status.LastError, "kubectl --context "+retry.Cluster) {
		t.Fatalf("lastError %q does not name %s and how to read its logs", failed.Status.LastError, retry.Cluster)
	}

	create(t, env.c, dispatchedTask(ns, "fatal", 1, testutil.Retries(2, 1, 1, 1), testutil.PodAnnotations(harness.SimExitCode, "3"),
		func(t *v1alpha1.Task) { t.Spec.NonRetryableExitCodes = []int32{3} }))
	fatal := waitTask(t, ns, "fatal", "Failed at once", 2*time.Minute, phase(v1alpha1.PhaseFailed))
	if fatal.Status.Attempts != 1 || fatal.Status.AttemptRecords[0].Reason != v1alpha1.AttemptNotRetryable ||
		ptr.Deref(fatal.Status.AttemptRecords[0].ExitCode, -1) != 3 {
		t.Fatalf("fatal: attempts %d, records %+v; want one NotRetryable with exitCode 3", fatal.Status.Attempts, fatal.Status.AttemptRecords)
	}
}

// An attempt whose pod never starts on its worker (an image that cannot be
// pulled there) fails StartTimeout, judged from the mirrored counts, with
// the worker named; its copy is removed. The attempt is not "no pod was
// created" for lack of pods on the manager.
func TestAnAttemptThatCannotStartOnItsWorkerIsStartTimeout(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "mk-start")
	queues(t, ns, 4, 2, 2)
	create(t, env.c, dispatchedTask(ns, "stuck", 1, testutil.StartTimeout(10), testutil.PodAnnotations(harness.SimStart, "never")))
	on := runningOn(t, ns, "stuck")
	failed := waitTask(t, ns, "stuck", "Failed", 2*time.Minute, phase(v1alpha1.PhaseFailed))
	rec := failed.Status.AttemptRecords[0]
	t.Logf("lastError %q", failed.Status.LastError)
	if rec.Reason != v1alpha1.AttemptStartTimeout || !strings.Contains(failed.Status.LastError, "did not all start within 10s on worker cluster "+on) {
		t.Fatalf("attempt %+v, lastError %q; want StartTimeout on %s", rec, failed.Status.LastError, on)
	}
	harness.Eventually(t, time.Minute, "the copy on "+on+" removed", nil, func(context.Context) (bool, string) {
		c := copies(ns, "stuck")
		return len(c) == 0, fmt.Sprintf("copies on %v", keys(c))
	})
}

// A cron Task's runs are dispatched like any attempt: two slots of an
// @every 10s schedule each run on a worker and succeed.
func TestACronTasksRunsAreDispatched(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "mk-cron")
	queues(t, ns, 4, 2, 2)
	create(t, env.c, dispatchedTask(ns, "every", 1, testutil.Schedule("@every 10s")))
	// A succeeded run's history message is "succeeded on attempt 1: ran
	// on worker cluster ...".
	waitTask(t, ns, "every", "two runs succeeded on a worker", 2*time.Minute, func(t *v1alpha1.Task) bool {
		n := 0
		for _, h := range t.Status.History {
			if h.Result == v1alpha1.RunResultSucceeded && strings.Contains(h.Message, "ran on worker cluster worker-") {
				n++
			}
		}
		return n >= 2
	})
}

// With one worker full (a ClusterQueue of one CPU there, taken by a
// running attempt) the next attempt is dispatched to the other worker.
func TestWithOneWorkerFullTheAttemptGoesToTheOther(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "mk-full")
	queues(t, ns, 4, 1, 1)
	first := startLong(t, ns, "first")
	second := startLong(t, ns, "second")
	t.Logf("first on %s, second on %s", first, second)
	if first == second {
		t.Fatalf("both attempts on %s, whose queue has room for one", first)
	}
	for _, name := range []string{"first", "second"} {
		cancelTask(t, ns, name)
	}
}

// Cancelling a Task whose attempt runs on a worker ends it as Cancelled,
// deactivates its Workload on the manager, and removes the worker's copy.
func TestCancelRemovesTheWorkersCopy(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "mk-cancel")
	queues(t, ns, 4, 2, 2)
	on := startLong(t, ns, "long")
	cancelTask(t, ns, "long")
	done := waitTask(t, ns, "long", "Cancelled", time.Minute, func(t *v1alpha1.Task) bool {
		return harness.Cond(t, v1alpha1.ConditionReady).Reason == string(v1alpha1.ReasonCancelled)
	})
	harness.Eventually(t, time.Minute, "the copy on "+on+" removed", nil, func(context.Context) (bool, string) {
		c := copies(ns, "long")
		return len(c) == 0, fmt.Sprintf("copies on %v", keys(c))
	})
	jobs := managerJobs(t, ns, "long")
	if len(jobs) != 1 {
		t.Fatalf("%d Jobs on the manager", len(jobs))
	}
	if active, _, _ := unstructured.NestedBool(workloadOf(t, &jobs[0]).Object, "spec", "active"); active {
		t.Fatal("the cancelled attempt's Workload is still active")
	}
	if rec := done.Status.AttemptRecords[0]; rec.Result != v1alpha1.AttemptResultStopped || rec.Reason != v1alpha1.AttemptCancelled {
		t.Fatalf("attempt record %+v", rec)
	}
}

// The manager's ClusterQueue of 2 CPUs caps the Task's attempts across
// both workers (each with room for 2): five one-CPU Tasks all succeed, and
// at no Job event did more than 2 copies run on the workers together, nor
// more than 2 of the manager's Jobs run.
func TestTheManagersQueueCapsAttemptsAcrossBothWorkers(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "mk-cap")
	queues(t, ns, 2, 2, 2)
	var workerClients []*worker
	workerClients = append(workerClients, env.workers...)
	onWorkers := harness.RecordJobsAcross(t, ns, workerClients[0].c, workerClients[1].c)
	onManager := harness.RecordJobs(t, env.c, ns)
	for i := range 5 {
		create(t, env.c, dispatchedTask(ns, fmt.Sprintf("job-%d", i), 4))
	}
	for i := range 5 {
		done := waitTask(t, ns, fmt.Sprintf("job-%d", i), "Succeeded", 3*time.Minute, phase(v1alpha1.PhaseSucceeded))
		if done.Status.Attempts != 1 {
			t.Errorf("job-%d: %d attempts", i, done.Status.Attempts)
		}
	}
	t.Logf("at most %d copies running on the workers together, %d Jobs running on the manager", onWorkers.MaxRunning(), onManager.MaxRunning())
	if onWorkers.MaxRunning() > 2 || onManager.MaxRunning() > 2 {
		t.Fatalf("more than 2 attempts ran at once under a 2-CPU queue: %d on the workers, %d on the manager", onWorkers.MaxRunning(), onManager.MaxRunning())
	}
}

// A worker that disappears (its API server stopped) while an attempt runs
// there: the Task keeps running, never fails for it; once the manager's
// Kueue gives the worker up (workerLostTimeout) the same attempt is
// dispatched to the other worker and succeeds there, and when the lost
// worker comes back its copy is removed: never two copies on reachable
// workers. Not parallel: it takes a worker away.
func TestAWorkerThatDisappearsLeavesTheAttemptToTheOther(t *testing.T) {
	ns := newNamespace(t, "mk-lost")
	queues(t, ns, 4, 1, 1)
	create(t, env.c, dispatchedTask(ns, "survivor", 20))
	first := runningOn(t, ns, "survivor")
	waitTask(t, ns, "survivor", "Running", time.Minute, phase(v1alpha1.PhaseRunning))
	var lost *worker
	for _, w := range env.workers {
		if w.name == first {
			lost = w
		}
	}
	args, err := lost.cluster.StopComponent("kube-apiserver", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	restarted := false
	restart := func() {
		if restarted {
			return
		}
		restarted = true
		if err := lost.cluster.StartComponent("kube-apiserver", args, "by "+t.Name()); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 2*time.Minute, lost.name+" /readyz", nil, lost.cluster.APIServerReady)
	}
	t.Cleanup(restart) // the other tests need both workers
	lostAt := time.Now()
	t.Logf("stopped %s's API server", lost.name)

	// Until Kueue gives the worker up, the Task is not failed for it.
	var other string
	harness.Eventually(t, workerLostTimeout+3*time.Minute, "the attempt on the other worker", nil, func(context.Context) (bool, string) {
		task, err := harness.GetTask(context.Background(), env.c, ns, "survivor")
		if err != nil {
			return false, err.Error()
		}
		if task.Status.Phase == v1alpha1.PhaseFailed {
			t.Fatalf("the Task failed %s after its worker went: %q", time.Since(lostAt).Round(time.Second), task.Status.LastError)
		}
		c := copies(ns, "survivor")
		if len(c) > 1 {
			t.Fatalf("copies on %v", keys(c))
		}
		for name := range c {
			other = name
		}
		return other != "" && other != first, fmt.Sprintf("phase %s, copies on %v", task.Status.Phase, keys(c))
	})
	movedAt := time.Now()
	t.Logf("%s after %s went, the attempt was dispatched to %s", time.Since(lostAt).Round(time.Second), first, other)
	done := waitTask(t, ns, "survivor", "Succeeded", 2*time.Minute, phase(v1alpha1.PhaseSucceeded))
	if done.Status.Attempts != 1 || done.Status.AttemptRecords[0].Cluster != other {
		t.Fatalf("attempts %d, records %+v; want one, on %s", done.Status.Attempts, done.Status.AttemptRecords, other)
	}
	// The record says which worker lost the attempt, and when (between
	// the API server's stop and the dispatch to the other worker).
	gone := done.Status.AttemptRecords[0].LostWorkers
	t.Logf("lostWorkers %+v", gone)
	if len(gone) != 1 || gone[0].Cluster != first || gone[0].Time.Time.Before(lostAt.Add(-time.Second)) || gone[0].Time.Time.After(movedAt.Add(time.Second)) {
		t.Fatalf("lostWorkers %+v; want %s, lost between %s and %s", gone, first, lostAt.Format(time.RFC3339), movedAt.Format(time.RFC3339))
	}

	restart()
	back := time.Now()
	harness.Eventually(t, 2*time.Minute, "the copy on "+first+" removed once it is back", nil, func(ctx context.Context) (bool, string) {
		jobs, err := harness.JobsOf(ctx, lost.c, ns, "survivor")
		return err == nil && len(jobs) == 0, fmt.Sprintf("%d Jobs, %v", len(jobs), err)
	})
	t.Logf("%s back: its stale copy removed after %s", lost.name, time.Since(back).Round(time.Second))
	// The worker takes work again once its own Kueue has caught up with
	// its API server (client-go's watches back off while it is away):
	// the other tests run after this one and need it.
	occupy(t, lost, ns, 1)
	t.Logf("%s's Kueue admits again %s after its API server came back", lost.name, time.Since(back).Round(time.Second))
}

// startLong creates a dispatched Task whose pod runs ten minutes, and
// returns the worker it runs on once it is Running.
func startLong(t *testing.T, ns, name string) string {
	t.Helper()
	create(t, env.c, dispatchedTask(ns, name, 600))
	on := runningOn(t, ns, name)
	waitTask(t, ns, name, "Running", time.Minute, phase(v1alpha1.PhaseRunning))
	return on
}
