package reconciler_test

import (
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

func setSuspend(t *testing.T, task *v1alpha1.Task, on bool) {
	t.Helper()
	edit(t, task, func(fresh *v1alpha1.Task) {
		fresh.Spec.Suspend = ptr.To(on)
	})
}

func TestRunNowWaitsForTheActiveRunUnderForbid(t *testing.T) {
	task, first := startTask(t, "forbid", testutil.Concurrency(v1alpha1.ForbidConcurrent))
	waitTask(t, task, "phase Running", phaseIs(v1alpha1.PhaseRunning))

	setRunNow(t, task, "later")
	// The token is seen, but no run starts while run 0 is active.
	waitTask(t, task, "the token seen", func(x *v1alpha1.Task) bool { return x.Status.ObservedGeneration == x.Generation })
	reconcileOnce(t, rec, task)
	if n := len(jobsOf(t, task)); n != 1 {
		t.Fatalf("run-now started a run while another was active under Forbid: %d Jobs", n)
	}

	must(t, testutil.CompleteJob(ctx, k8s, &first, fakeClock.Now()))
	runID := runs.RunNowID("later")
	waitTask(t, task, "the waiting run started", func(x *v1alpha1.Task) bool {
		return x.Status.CurrentRun == runID && x.Status.Phase == v1alpha1.PhaseRunning
	})
	waitJobs(t, task, 2)
}

func TestRunNowStopsTheActiveRunUnderReplace(t *testing.T) {
	task, first := startTask(t, "replace", testutil.Concurrency(v1alpha1.ReplaceConcurrent))

	setRunNow(t, task, "now")
	runID := runs.RunNowID("now")
	got := waitTask(t, task, "the replacing run", func(x *v1alpha1.Task) bool {
		return x.Status.CurrentRun == runID && x.Status.Phase == v1alpha1.PhaseRunning && len(x.Status.Active) == 1
	})
	old := getJob(t, &first)
	if !ptr.Deref(old.Spec.Suspend, false) || old.Annotations[v1alpha1.AnnotationStopReason] != string(v1alpha1.AttemptReplaced) {
		t.Fatalf("the replaced Job was not stopped: suspend=%v annotations=%v", old.Spec.Suspend, old.Annotations)
	}
	if len(got.Status.History) != 2 || got.Status.History[1].RunID != "0" || got.Status.History[1].Result != v1alpha1.RunResultStopped {
		t.Fatalf("history: %+v", got.Status.History)
	}
}

func TestRunNowOverlapsTheActiveRunUnderAllow(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "allow", testutil.Concurrency(v1alpha1.AllowConcurrent))
	waitJobs(t, task, 1)
	setRunNow(t, task, "parallel")
	got := waitTask(t, task, "two active runs", func(x *v1alpha1.Task) bool { return len(x.Status.Active) == 2 })
	if got.Status.CurrentRun != runs.RunNowID("parallel") {
		t.Fatalf("currentRun %s, want the newest run", got.Status.CurrentRun)
	}
}

func TestASuspendedOneShotTaskWaitsAndARunNowRunsAnyway(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "paused", testutil.Suspend(true))
	got := waitTask(t, task, "phase Suspended", phaseIs(v1alpha1.PhaseSuspended))
	if c := condition(got, v1alpha1.ConditionReconciling); c == nil || c.Status != T {
		t.Fatalf("a suspended one-shot Task with its run unfinished must be Reconciling: %s", statusSummary(got))
	}
	reconcileOnce(t, rec, task)
	if n := len(jobsOf(t, task)); n != 0 {
		t.Fatalf("a suspended Task started %d Jobs", n)
	}

	setSuspend(t, task, false)
	job := waitJobs(t, task, 1)[0]
	waitTask(t, task, "phase Running", phaseIs(v1alpha1.PhaseRunning))

	// Suspended while waiting out a backoff: the retry waits.
	setSuspend(t, task, true)
	must(t, testutil.FailJob(ctx, k8s, &job, fakeClock.Now().Add(-time.Hour), "BackoffLimitExceeded", "x"))
	waitTask(t, task, "phase Suspended", phaseIs(v1alpha1.PhaseSuspended))
	reconcileOnce(t, rec, task)
	if n := len(jobsOf(t, task)); n != 1 {
		t.Fatalf("a suspended Task retried: %d Jobs", n)
	}

	// A run-now token runs even while suspended.
	setRunNow(t, task, "urgent")
	waitJobs(t, task, 2)
	jobOf(t, task, runs.RunNowID("urgent"), 1)
}

func TestDecisionsAreRecordedAsEvents(t *testing.T) {
	task, job := startTask(t, "evented", testutil.MaxRetry(1))
	ns := task.Namespace
	must(t, testutil.FailJob(ctx, k8s, &job, fakeClock.Now(), "BackoffLimitExceeded", "x"))
	waitTask(t, task, "phase Retrying", phaseIs(v1alpha1.PhaseRetrying))
	// The retry's Job gets an AttemptCreated event (a run's first Job none).
	fakeClock.Step(11 * time.Second)
	poke(t, task)
	waitJobs(t, task, 2)

	want := []v1alpha1.Reason{v1alpha1.EventAttemptFailed, v1alpha1.EventRetryScheduled, v1alpha1.EventAttemptCreated}
	eventually(t, "the events", func() (bool, string) {
		var list eventsv1.EventList
		if err := k8s.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		seen := map[string]bool{}
		for _, e := range list.Items {
			if e.Regarding.Name == task.Name && e.Regarding.Kind == "Task" {
				seen[e.Reason] = true
			}
		}
		var missing []string
		for _, r := range want {
			if !seen[string(r)] {
				missing = append(missing, string(r))
			}
		}
		return len(missing) == 0, "missing " + strings.Join(missing, ",")
	})
}
