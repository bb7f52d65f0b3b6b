package reconciler_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

// setCancel sets the cancel annotation to token.
func setCancel(t *testing.T, task *v1alpha1.Task, token string) {
	t.Helper()
	setAnnotation(t, task, v1alpha1.AnnotationCancel, token)
}

func cancelled(x *v1alpha1.Task) bool {
	return len(x.Status.History) > 0 && x.Status.History[0].Result == v1alpha1.RunResultCancelled
}

func TestACancelTokenStopsTheRunningAttemptAndTheRunIsCancelledWithoutRetry(t *testing.T) {
	task, job := startTask(t, "cancel-me", testutil.MaxRetry(3))
	waitTask(t, task, "phase Running", phaseIs(v1alpha1.PhaseRunning))

	setCancel(t, task, "ci-pipeline-123")
	got := waitTask(t, task, "the run Cancelled", cancelled)
	stopped := getJob(t, &job)
	if !ptr.Deref(stopped.Spec.Suspend, false) || stopped.Annotations[v1alpha1.AnnotationStopReason] != string(v1alpha1.AttemptCancelled) ||
		stopped.Annotations[v1alpha1.AnnotationCancelToken] != runs.TokenHash("ci-pipeline-123") {
		t.Fatalf("the Job was not stopped for the cancel: suspend %v, annotations %v", stopped.Spec.Suspend, stopped.Annotations)
	}
	if got.Status.Phase != v1alpha1.PhaseFailed || got.Status.LastCancelToken != runs.TokenHash("ci-pipeline-123") {
		t.Fatalf("status: %s", statusSummary(got))
	}
	assertConditions(t, got, F, T, F, T)
	assertKstatus(t, got, kstatus.FailedStatus)
	if c := condition(got, v1alpha1.ConditionReady); c.Reason != string(v1alpha1.ReasonCancelled) {
		t.Fatalf("Ready reason %s, want Cancelled", c.Reason)
	}
	if c := condition(got, v1alpha1.ConditionFinished); c.Status != metav1.ConditionTrue || c.Reason != string(v1alpha1.ReasonCancelled) {
		t.Fatalf("Finished = %s/%s, want True/Cancelled", c.Status, c.Reason)
	}
	if h := got.Status.History[0]; h.Reason != v1alpha1.ReasonCancelled || h.Attempts != 1 {
		t.Fatalf("history[0] = %+v", h)
	}
	if r := got.Status.AttemptRecords; len(r) != 1 || r[0].Result != v1alpha1.AttemptResultStopped || r[0].Reason != v1alpha1.AttemptCancelled {
		t.Fatalf("attemptRecords = %+v", r)
	}
	noRetryAnHourLater(t, task)
	// A run-now after the cancel starts a new run.
	setRunNow(t, task, "again")
	waitTask(t, task, "the run-now run", func(x *v1alpha1.Task) bool {
		return x.Status.CurrentRun == runs.RunNowID("again") && x.Status.Phase == v1alpha1.PhaseRunning
	})
	if c := condition(getTask(t, task), v1alpha1.ConditionFinished); c.Status != metav1.ConditionFalse {
		t.Fatalf("Finished = %s while the new run runs", c.Status)
	}
}

func TestACancelTokenStopsARunWaitingOutItsBackoff(t *testing.T) {
	task, job := startTask(t, "cancel-backoff", testutil.MaxRetry(3))
	must(t, testutil.FailJob(ctx, k8s, &job, fakeClock.Now(), "BackoffLimitExceeded", "Job has reached the specified backoff limit"))
	waitTask(t, task, "phase Retrying", phaseIs(v1alpha1.PhaseRetrying))

	setCancel(t, task, "stop")
	got := waitTask(t, task, "the run Cancelled", cancelled)
	if got.Status.NextRetryTime != nil || got.Status.Phase != v1alpha1.PhaseFailed {
		t.Fatalf("status: %s", statusSummary(got))
	}
	if a := getJob(t, &job).Annotations[v1alpha1.AnnotationStopReason]; a != string(v1alpha1.AttemptCancelled) {
		t.Fatalf("the failed Job's stop reason is %q", a)
	}
	noRetryAnHourLater(t, task)
}

func TestACancelTokenPresentAtCreationDoesNothing(t *testing.T) {
	task, job := startTask(t, "cancel-at-creation", testutil.Annotation(v1alpha1.AnnotationCancel, "from-the-template"))
	got := waitTask(t, task, "the token recorded", func(x *v1alpha1.Task) bool {
		return x.Status.LastCancelToken == runs.TokenHash("from-the-template")
	})
	if got.Status.Phase != v1alpha1.PhaseRunning || ptr.Deref(getJob(t, &job).Spec.Suspend, false) {
		t.Fatalf("a token present at creation stopped the run: %s", statusSummary(got))
	}
}

func TestACancelStopsEveryActiveRunOfACronTaskAndItsScheduleGoesOn(t *testing.T) {
	ns := newNamespace(t)
	task, _ := scheduledTask(t, ns, "cancel-cron", testutil.Concurrency(v1alpha1.AllowConcurrent))
	slotA := toSlot(t, task)
	slotJob(t, task, slotA)
	slotB := toSlot(t, task)
	slotJob(t, task, slotB)

	setCancel(t, task, "both")
	got := waitTask(t, task, "both runs Cancelled", func(x *v1alpha1.Task) bool {
		n := 0
		for _, h := range x.Status.History {
			if h.Result == v1alpha1.RunResultCancelled {
				n++
			}
		}
		return n == 2 && len(x.Status.Active) == 0
	})
	if got.Status.Phase != v1alpha1.PhaseScheduled {
		t.Fatalf("a cron Task with cancelled runs: %s", statusSummary(got))
	}
	assertKstatus(t, got, kstatus.CurrentStatus)
	slotC := toSlot(t, task)
	slotJob(t, task, slotC)
}

// noRetryAnHourLater checks that a cancelled run stays at its one Job
// whatever the clock says: an hour on, a pass starts no retry.
func noRetryAnHourLater(t *testing.T, task *v1alpha1.Task) {
	t.Helper()
	fakeClock.Step(time.Hour)
	poke(t, task)
	reconcileOnce(t, rec, task)
	if n := len(jobsOf(t, task)); n != 1 {
		t.Fatalf("the cancelled run was retried: %d Jobs", n)
	}
}
