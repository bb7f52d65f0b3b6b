package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

// These tests read the trackers without an API server.

func observedTask(gen int64, mutate func(*v1alpha1.Task)) *v1alpha1.Task {
	t := shellTask("ns", "x", 2)
	t.Generation = gen
	t.Status.ObservedGeneration = gen
	mutate(t)
	return t
}

func TestPendingRunNowToken(t *testing.T) {
	withToken := func(token, consumed string, og int64) *v1alpha1.Task {
		task := shellTask("ns", "x", 0)
		task.Generation = 1
		task.Annotations = map[string]string{v1alpha1.AnnotationRunNow: token}
		task.Status.ObservedGeneration = og
		task.Status.LastRunNowToken = consumed
		return task
	}
	cases := []struct {
		name string
		task *v1alpha1.Task
		want bool
	}{
		{"new token", withToken("a", runs.TokenHash("b"), 1), true},
		{"consumed token", withToken("a", runs.TokenHash("a"), 1), false},
		{"token present before the operator's first look", withToken("a", "", 0), false},
		{"empty token", withToken("", "", 1), false},
	}
	for _, tc := range cases {
		if _, got := pendingRunNowToken(tc.task); got != tc.want {
			t.Errorf("%s: pending = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A one-shot Task that succeeded but has a new run-now token: wait waits
// for that token's run, not for Ready.
func TestTaskTrackerFollowsPendingRunNow(t *testing.T) {
	task := observedTask(1, func(task *v1alpha1.Task) {
		succeeded(task, 1)
		task.Annotations = map[string]string{v1alpha1.AnnotationRunNow: "again"}
	})
	tr := newTaskTracker()
	progress, done := tr.observe(task)
	if done != nil {
		t.Fatalf("finished with %+v; want to wait for run %s", done, runs.RunNowID("again"))
	}
	if want := "waiting for the operator to start run " + runs.RunNowID("again"); progress != want {
		t.Errorf("progress %q, want %q", progress, want)
	}
	// The operator takes the token, the run fails.
	task.Status.LastRunNowToken = runs.TokenHash("again")
	task.Status.History = append([]v1alpha1.RunRecord{{RunID: runs.RunNowID("again"), Attempts: 3,
		Result: v1alpha1.RunResultFailed, Message: "RetriesExhausted: boom"}}, task.Status.History...)
	_, done = tr.observe(task)
	if done == nil || done.code != ExitFailed || !strings.Contains(done.lines[0], "failed after 3 attempts: RetriesExhausted: boom") {
		t.Fatalf("outcome %+v", done)
	}
}

func TestRunTrackerTokenTakenAtCreation(t *testing.T) {
	task := observedTask(1, func(task *v1alpha1.Task) {
		task.Annotations = map[string]string{v1alpha1.AnnotationRunNow: "tok"}
		task.Status.LastRunNowToken = runs.TokenHash("tok")
	})
	_, done := (&runTracker{id: runs.RunNowID("tok"), token: "tok"}).observe(task)
	if done == nil || done.code != ExitError || !strings.Contains(done.lines[0], "as part of the Task's creation") {
		t.Fatalf("outcome %+v", done)
	}
}

func TestStoppedRunFails(t *testing.T) {
	task := observedTask(1, func(task *v1alpha1.Task) {
		task.Status.History = []v1alpha1.RunRecord{{RunID: "m1", Attempts: 1, Result: v1alpha1.RunResultStopped, Message: "replaced by run m2"}}
	})
	_, done := (&runTracker{id: "m1"}).observe(task)
	if done == nil || done.code != ExitFailed || done.lines[0] != "task/x: run m1 was stopped after 1 attempt: replaced by run m2" {
		t.Fatalf("outcome %+v", done)
	}
}

func TestCronInvalidScheduleFailsAtOnce(t *testing.T) {
	task := observedTask(3, func(task *v1alpha1.Task) {
		task.Spec.Schedule = ptr.To("61 * * * *")
		task.Status.Phase = v1alpha1.PhaseFailed
		setCondition(task, v1alpha1.ConditionFailed, metav1.ConditionTrue, v1alpha1.ReasonInvalidSchedule, "minute 61 out of range")
	})
	_, done := newTaskTracker().observe(task)
	if done == nil || done.code != ExitFailed || done.lines[0] != "task/x failed: InvalidSchedule: minute 61 out of range" {
		t.Fatalf("outcome %+v", done)
	}
}

func TestPhaseLine(t *testing.T) {
	next := metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	cases := []struct {
		want   string
		mutate func(*v1alpha1.Task)
	}{
		{"Pending", func(*v1alpha1.Task) {}},
		{"Pending (run m123)", func(t *v1alpha1.Task) { t.Status.Phase, t.Status.CurrentRun = v1alpha1.PhasePending, "m123" }},
		{"Running (attempt 2/3)", func(t *v1alpha1.Task) {
			t.Status.Phase, t.Status.CurrentRun, t.Status.Attempts = v1alpha1.PhaseRunning, "0", 2
		}},
		{"Retrying (run s9, attempt 1/3 failed), next attempt at 2030-01-02T03:04:05Z: StartTimeout (attempt 1, job j: ImagePullBackOff", func(t *v1alpha1.Task) {
			t.Status.Phase, t.Status.CurrentRun, t.Status.Attempts = v1alpha1.PhaseRetrying, "s9", 1
			t.Status.NextRetryTime = &next
			t.Status.LastError = "StartTimeout (attempt 1, job j:\n  ImagePullBackOff"
		}},
		{"Scheduled (next run at 2030-01-02T03:04:05Z)", func(t *v1alpha1.Task) {
			t.Status.Phase, t.Status.NextScheduleTime = v1alpha1.PhaseScheduled, &next
		}},
		{"Suspended", func(t *v1alpha1.Task) { t.Status.Phase = v1alpha1.PhaseSuspended }},
	}
	for _, tc := range cases {
		if got := phaseLine(observedTask(1, tc.mutate)); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}

func TestNewRunNowToken(t *testing.T) {
	a, b := newRunNowToken(), newRunNowToken()
	if a == b || !tokenPattern.MatchString(a) {
		t.Errorf("tokens %q, %q", a, b)
	}
}
