//go:build multikueue

package multikueue

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// Every way an attempt is stopped, and the end of a remote run being
// notified, across clusters: the stop reaches the worker (Kueue deletes
// the copy once the manager's Workload is deactivated), and the Task
// records it as it would a local one.

// Replace: a cron Task whose run still runs on a worker when its next slot
// comes stops that run (Stopped, Replaced) and dispatches the new slot's
// attempt; the stopped run's copy is removed from its worker.
func TestReplaceStopsTheRemoteRunAndDispatchesTheNextSlot(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "mk-replace")
	queues(t, ns, 4, 2, 2)
	create(t, env.c, dispatchedTask(ns, "replaced", 600, testutil.Schedule("@every 20s"), testutil.Concurrency(v1alpha1.ReplaceConcurrent)))
	first := waitTask(t, ns, "replaced", "a run Running", 2*time.Minute, phase(v1alpha1.PhaseRunning)).Status.CurrentRun
	on := runningOn(t, ns, "replaced")
	t.Logf("run %s runs on %s", first, on)

	task := waitTask(t, ns, "replaced", "run "+first+" replaced", 2*time.Minute, func(t *v1alpha1.Task) bool {
		return historyOf(t, first) != nil && historyOf(t, first).Result == v1alpha1.RunResultStopped && t.Status.CurrentRun != first
	})
	if rec := historyOf(task, first); rec.Reason != v1alpha1.AttemptReplaced {
		t.Fatalf("run %s: result %s reason %s; want Stopped, Replaced", first, rec.Result, rec.Reason)
	}
	next := task.Status.CurrentRun
	suspendTask(t, ns, "replaced", true) // no third slot: the test is about one replacement
	harness.Eventually(t, 2*time.Minute, "run "+first+"'s copy gone, run "+next+"'s on a worker", nil, func(context.Context) (bool, string) {
		runs := runsOnWorkers(ns, "replaced")
		_, old := runs[first]
		_, now := runs[next]
		return !old && now, fmt.Sprintf("runs on the workers: %v", runs)
	})
}

// Suspend: a Task whose remote attempt failed (exit 3 on the worker) and
// that is suspended in its backoff starts no next attempt, on the manager
// or a worker, past the end of the backoff; resumed, its retry is
// dispatched and runs (and fails, exit 3 again).
func TestSuspendHoldsTheRetryOfARemoteAttemptUntilResumed(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "mk-suspend")
	queues(t, ns, 4, 2, 2)
	const backoff = 20 * time.Second
	create(t, env.c, dispatchedTask(ns, "paused", 1, testutil.Retries(1, int32(backoff.Seconds()), int32(backoff.Seconds()), 1),
		testutil.PodAnnotations(harness.SimExitCode, "3")))
	failed := waitTask(t, ns, "paused", "its first attempt failed", time.Minute, func(t *v1alpha1.Task) bool {
		return len(t.Status.AttemptRecords) == 1 && t.Status.AttemptRecords[0].Result == v1alpha1.AttemptResultFailed
	})
	suspendTask(t, ns, "paused", true)
	retryDue := failed.Status.AttemptRecords[0].CompletionTime.Add(backoff)
	if time.Now().After(retryDue) {
		t.Fatalf("suspended only after the backoff ended (%s): the test machine is too slow for a %s backoff", retryDue.Format(time.RFC3339), backoff)
	}
	// Watch past the end of the backoff, and a little more: no second
	// attempt anywhere.
	harness.Eventually(t, backoff+time.Minute, "the backoff over while suspended, with no second attempt", nil, func(ctx context.Context) (bool, string) {
		if n := attemptJobs(t, ns, "paused"); n != 1 {
			t.Fatalf("%d attempt Jobs on the manager while suspended; want 1", n)
		}
		if c := copies(ns, "paused"); len(c) > 0 && workerAttempts(c) > 1 {
			t.Fatalf("a second attempt on the workers while suspended: %v", keys(c))
		}
		return time.Now().After(retryDue.Add(5 * time.Second)), "waiting out the backoff"
	})
	if task := waitTask(t, ns, "paused", "Suspended", time.Minute, phase(v1alpha1.PhaseSuspended)); task.Status.Attempts != 1 {
		t.Fatalf("attempts %d while suspended", task.Status.Attempts)
	}

	resumed := time.Now()
	suspendTask(t, ns, "paused", false)
	done := waitTask(t, ns, "paused", "Failed after its retry", 2*time.Minute, phase(v1alpha1.PhaseFailed))
	if done.Status.Attempts != 2 || len(done.Status.AttemptRecords) != 2 {
		t.Fatalf("attempts %d, records %+v; want 2", done.Status.Attempts, done.Status.AttemptRecords)
	}
	retry := done.Status.AttemptRecords[0]
	if retry.StartTime.Add(time.Second).Before(resumed) || retry.Cluster == "" || ptr.Deref(retry.ExitCode, -1) != 3 {
		t.Fatalf("the retry: %+v; want it made after the resume (%s), run on a worker, exit code 3", retry, resumed.Format(time.RFC3339))
	}
}

// The capacity timeout: with no room on either worker (their queues for
// the namespace have no CPU), MultiKueue finds no worker for the attempt,
// which waits WaitingForCapacity with Kueue's message and fails
// CapacityTimeout after capacityTimeoutSeconds; its Workload is
// deactivated and nothing of it stays on a worker.
func TestAnAttemptNoWorkerTakesEndsAtTheCapacityTimeout(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "mk-capacity")
	queues(t, ns, 4, 0, 0)
	create(t, env.c, dispatchedTask(ns, "waits", 1, testutil.CapacityTimeout(15)))
	waiting := waitTask(t, ns, "waits", "WaitingForCapacity", time.Minute, func(t *v1alpha1.Task) bool {
		return harness.Cond(t, v1alpha1.ConditionReady).Reason == string(v1alpha1.ReasonWaitingForCapacity)
	})
	t.Logf("waiting: %q", harness.Cond(waiting, v1alpha1.ConditionReady).Message)
	if msg := harness.Cond(waiting, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "held by Kueue") {
		t.Fatalf("Ready message %q; want Kueue's reason", msg)
	}
	failed := waitTask(t, ns, "waits", "Failed", 2*time.Minute, phase(v1alpha1.PhaseFailed))
	if rec := failed.Status.AttemptRecords[0]; failed.Status.Attempts != 1 || rec.Reason != v1alpha1.AttemptCapacityTimeout {
		t.Fatalf("attempts %d, record %+v; want one CapacityTimeout", failed.Status.Attempts, rec)
	}
	jobs := managerJobs(t, ns, "waits")
	if active, _, _ := unstructured.NestedBool(workloadOf(t, &jobs[0]).Object, "spec", "active"); active {
		t.Fatal("the timed-out attempt's Workload is still active")
	}
	harness.Eventually(t, time.Minute, "nothing of the attempt on the workers", nil, func(ctx context.Context) (bool, string) {
		c, wls := copies(ns, "waits"), remoteWorkloads(ctx, ns, jobs[0].Name)
		return len(c) == 0 && len(wls) == 0, fmt.Sprintf("Job copies on %v, Workloads %v", keys(c), wls)
	})
}

// Cancel while the worker has not started the pod (it waits for its image
// there): Cancelled, never StartTimeout, and the copy removed.
func TestCancelDuringTheWorkersStartRemovesTheCopy(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "mk-cancel-start")
	queues(t, ns, 4, 2, 2)
	create(t, env.c, dispatchedTask(ns, "starting", 1, testutil.StartTimeout(300), testutil.PodAnnotations(harness.SimStart, "never")))
	on := runningOn(t, ns, "starting")
	cancelTask(t, ns, "starting")
	done := waitTask(t, ns, "starting", "Cancelled", time.Minute, func(t *v1alpha1.Task) bool {
		return harness.Cond(t, v1alpha1.ConditionReady).Reason == string(v1alpha1.ReasonCancelled)
	})
	if rec := done.Status.AttemptRecords[0]; rec.Result != v1alpha1.AttemptResultStopped || rec.Reason != v1alpha1.AttemptCancelled {
		t.Fatalf("attempt record %+v; want Stopped, Cancelled", rec)
	}
	harness.Eventually(t, time.Minute, "the copy on "+on+" removed", nil, func(context.Context) (bool, string) {
		c := copies(ns, "starting")
		return len(c) == 0, fmt.Sprintf("copies on %v", keys(c))
	})
}

// A remote run's end is notified: the notification Job runs on the manager
// (where the notification Secret is), is never dispatched, and the run's
// history says Sent.
func TestTheEndOfARemoteRunIsNotifiedFromTheManager(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "mk-notify")
	queues(t, ns, 4, 2, 2)
	create(t, env.c, dispatchedTask(ns, "told", 1,
		testutil.Notify("http://127.0.0.1:9/hook", v1alpha1.NotifyFormatJSON, v1alpha1.NotifyOnSucceeded)))
	on := runningOn(t, ns, "told")
	done := waitTask(t, ns, "told", "Succeeded and notified", 2*time.Minute, func(t *v1alpha1.Task) bool {
		return t.Status.Phase == v1alpha1.PhaseSucceeded && len(t.Status.History) > 0 && t.Status.History[0].Notification == v1alpha1.NotificationSent
	})
	h := done.Status.History[0]
	t.Logf("run %s ran on %s, notified by Job %s", h.RunID, on, h.NotificationJob)
	var notifier *batchv1.Job
	for _, j := range managerJobs(t, ns, "told") {
		if j.Name == h.NotificationJob {
			notifier = &j
		}
	}
	if notifier == nil {
		t.Fatalf("no notification Job %q on the manager", h.NotificationJob)
	}
	if notifier.Spec.ManagedBy != nil || notifier.Labels[v1alpha1.LabelKueueQueueName] != "" {
		t.Fatalf("the notification Job %s is for Kueue or MultiKueue: managedBy %v, labels %v", notifier.Name, notifier.Spec.ManagedBy, notifier.Labels)
	}
	for name, jobs := range copies(ns, "told") {
		for _, j := range jobs {
			if j.Labels[v1alpha1.LabelNotification] != "" {
				t.Fatalf("a notification Job on %s: %s", name, j.Name)
			}
		}
	}
}

// historyOf is the Task's history record of run id, or nil.
func historyOf(t *v1alpha1.Task, id string) *v1alpha1.RunRecord {
	for i := range t.Status.History {
		if t.Status.History[i].RunID == id {
			return &t.Status.History[i]
		}
	}
	return nil
}

// suspendTask sets the Task's spec.suspend.
func suspendTask(t *testing.T, ns, name string, on bool) {
	t.Helper()
	task, err := harness.GetTask(context.Background(), env.c, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(task.DeepCopy())
	task.Spec.Suspend = ptr.To(on)
	if err := env.c.Patch(context.Background(), task, patch); err != nil {
		t.Fatal(err)
	}
}

// runsOnWorkers are the runs whose Jobs have a copy on a worker, each with
// the worker's name.
func runsOnWorkers(ns, task string) map[string]string {
	out := map[string]string{}
	for name, jobs := range copies(ns, task) {
		for _, j := range jobs {
			out[j.Labels[v1alpha1.LabelRun]] = name
		}
	}
	return out
}

// attemptJobs counts the Task's attempt Jobs on the manager (not its
// notification Jobs).
func attemptJobs(t *testing.T, ns, task string) int {
	n := 0
	for _, j := range managerJobs(t, ns, task) {
		if j.Labels[v1alpha1.LabelAttempt] != "" {
			n++
		}
	}
	return n
}

// workerAttempts counts the distinct attempts with a copy on the workers.
func workerAttempts(c map[string][]batchv1.Job) int {
	seen := map[string]bool{}
	for _, jobs := range c {
		for _, j := range jobs {
			seen[j.Labels[v1alpha1.LabelRun]+"/"+j.Labels[v1alpha1.LabelAttempt]] = true
		}
	}
	return len(seen)
}

// remoteWorkloads are the names of the Workloads on the workers that
// MultiKueue made for the manager's Job jobName (Kueue names a Job's
// Workload "job-<job name>-<hash>", the same on every cluster).
func remoteWorkloads(ctx context.Context, ns, jobName string) []string {
	var out []string
	for _, w := range env.workers {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(harness.KueueAPI)
		list.SetKind("WorkloadList")
		if err := w.c.List(ctx, list, client.InNamespace(ns)); err != nil {
			out = append(out, w.name+": "+err.Error())
			continue
		}
		for _, wl := range list.Items {
			if strings.HasPrefix(wl.GetName(), "job-"+jobName) {
				out = append(out, w.name+"/"+wl.GetName())
			}
		}
	}
	return out
}
