package status_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/notify"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/status"
	"github.com/taskops/task-operator/internal/testutil"
)

func failedRun(id string, at time.Time) runs.Run {
	return testutil.MakeRun(id).Failed(at.Add(-time.Minute), at, v1alpha1.AttemptPodFailed, "exit 3").Obj()
}

func okRun(id string, at time.Time) runs.Run {
	return testutil.MakeRun(id).Succeeded(at.Add(-time.Minute), at).Obj()
}

func TestFailedRunsAreCountedInARowAndASuccessStartsOver(t *testing.T) {
	task := cron(testutil.Retries(0, 10, 60, 2))
	task.Status.ObservedGeneration = 1
	rs := []runs.Run{failedRun("s1", ago(3*time.Hour))}
	task = compute(t, task, rs, nil)
	rs = append(rs, failedRun("s2", ago(2*time.Hour)))
	task = compute(t, task, rs, nil)
	if got := task.Status.ConsecutiveFailures; got != 2 {
		t.Fatalf("after two failed runs consecutiveFailures = %d, want 2", got)
	}
	// A repeated pass over the same runs counts nothing again.
	if again := compute(t, task, rs, nil); again.Status.ConsecutiveFailures != 2 {
		t.Fatalf("a repeated pass counted again: %d", again.Status.ConsecutiveFailures)
	}
	rs = append(rs, okRun("s3", ago(time.Hour)))
	if task = compute(t, task, rs, nil); task.Status.ConsecutiveFailures != 0 {
		t.Fatalf("after a success consecutiveFailures = %d, want 0", task.Status.ConsecutiveFailures)
	}
}

func TestASpecChangeStartsTheFailureCountOver(t *testing.T) {
	task := cron(testutil.Retries(0, 10, 60, 2))
	task.Status = v1alpha1.TaskStatus{ObservedGeneration: 1, ConsecutiveFailures: 4}
	task.Generation = 2
	if got := compute(t, task, nil, nil).Status.ConsecutiveFailures; got != 0 {
		t.Fatalf("consecutiveFailures after a spec change = %d, want 0", got)
	}
}

func TestAStreakOfSuspendAfterFailuresSuspendsACronTaskAsStalled(t *testing.T) {
	task := cron(testutil.Retries(0, 10, 60, 2), testutil.SuspendAfterFailures(2))
	task.Status = v1alpha1.TaskStatus{ObservedGeneration: 1, ConsecutiveFailures: 1,
		History: []v1alpha1.RunRecord{{RunID: "s1", Result: v1alpha1.RunResultFailed, Attempts: 1}}}
	out := compute(t, task, []runs.Run{failedRun("s2", ago(time.Hour))}, nil)
	if out.Status.ConsecutiveFailures != 2 {
		t.Fatalf("consecutiveFailures = %d", out.Status.ConsecutiveFailures)
	}
	assertRow(t, out, failed(v1alpha1.PhaseSuspended, v1alpha1.ReasonTooManyFailures))

	// One failure short of the streak it is an ordinary failed cron Task.
	short := cron(testutil.Retries(0, 10, 60, 2), testutil.SuspendAfterFailures(3))
	short.Status = task.Status
	assertRow(t, compute(t, short, []runs.Run{failedRun("s2", ago(time.Hour))}, nil),
		failed(v1alpha1.PhaseScheduled, v1alpha1.ReasonLastRunFailed))
}

func TestARunThatEndsIsMarkedForNotificationOnlyWhenAnEntryListsItsOutcome(t *testing.T) {
	onFailure := cron(testutil.Retries(0, 10, 60, 2), testutil.Notify("http://hook.example/", "", v1alpha1.NotifyOnFailed))
	onFailure.Status.ObservedGeneration = 1
	rs := []runs.Run{okRun("s1", ago(2*time.Hour))}
	out := compute(t, onFailure, rs, nil)
	if n := out.Status.History[0].Notification; n != "" {
		t.Fatalf("a success marked %q for an entry on Failed only", n)
	}
	rs = append(rs, failedRun("s2", ago(time.Hour)))
	out = compute(t, out, rs, nil)
	if n := out.Status.History[0].Notification; n != v1alpha1.NotificationPending {
		t.Fatalf("a failure marked %q, want Pending", n)
	}
	if due := notify.Due(out.Status.History, nil); len(due) != 1 || due[0].RunID != "s2" {
		t.Fatalf("due %v, want s2", due)
	}
}

func TestRecoveredIsToldOnlyAfterAFailedRun(t *testing.T) {
	task := cron(testutil.Retries(0, 10, 60, 2), testutil.Notify("http://hook.example/", "", v1alpha1.NotifyOnRecovered))
	task.Status.ObservedGeneration = 1
	rs := []runs.Run{okRun("s1", ago(3*time.Hour))}
	task = compute(t, task, rs, nil)
	if n := task.Status.History[0].Notification; n != "" {
		t.Fatalf("a first success marked %q for Recovered", n)
	}
	rs = append(rs, failedRun("s2", ago(2*time.Hour)))
	task = compute(t, task, rs, nil)
	rs = append(rs, okRun("s3", ago(time.Hour)))
	task = compute(t, task, rs, nil)
	if h := task.Status.History[0]; h.RunID != "s3" || h.Notification != v1alpha1.NotificationPending {
		t.Fatalf("the success after a failure: %+v, want s3 Pending", h)
	}
}

func TestAPendingNotificationRecordsHowItsJobEnded(t *testing.T) {
	task := oneShot(testutil.Retries(0, 10, 60, 2), testutil.Notify("http://hook.example/", "", v1alpha1.NotifyOnFailed))
	task.Status = finished(v1alpha1.RunRecord{RunID: "0", Attempts: 1, Result: v1alpha1.RunResultFailed, Notification: v1alpha1.NotificationPending,
		StartTime: status.Time(ago(time.Hour)), CompletionTime: status.Time(ago(time.Hour))})
	rs := []runs.Run{failedRun("0", ago(time.Hour))}
	for _, tc := range []struct {
		jobs map[string]notify.Job
		want v1alpha1.NotificationState
	}{
		{nil, v1alpha1.NotificationPending},
		{map[string]notify.Job{"0": {RunID: "0"}}, v1alpha1.NotificationPending},
		{map[string]notify.Job{"0": {RunID: "0", Finished: true, Sent: true}}, v1alpha1.NotificationSent},
		{map[string]notify.Job{"0": {RunID: "0", Finished: true}}, v1alpha1.NotificationFailed},
	} {
		st := status.Compute(status.Input{Task: task, Runs: rs, Notifications: tc.jobs, Now: now})
		if got := st.History[0].Notification; got != tc.want {
			t.Errorf("with %+v: %s, want %s", tc.jobs, got, tc.want)
		}
		if st.History[0].Result != v1alpha1.RunResultFailed {
			t.Errorf("the notification changed the run's result: %s", st.History[0].Result)
		}
	}
}

// The re-run recipe of plain kubectl: status.lastFinishedRunNowToken names
// a token only in the write that records the end of the run it started.
func TestTheFinishedRunNowTokenNamesTheRunATokenStartedOnlyOnceItEnded(t *testing.T) {
	const old, fresh = "ci-41", "ci-42"
	task := oneShot(testutil.Annotation(v1alpha1.AnnotationRunNow, fresh))
	task.Status = v1alpha1.TaskStatus{ObservedGeneration: 1, LastFinishedRunNowToken: old,
		History: []v1alpha1.RunRecord{{RunID: runs.RunNowID(old), Result: v1alpha1.RunResultFailed, Attempts: 1}}}
	previous := failedRun(runs.RunNowID(old), ago(2*time.Hour))
	running := testutil.MakeRun(runs.RunNowID(fresh)).Active(ago(time.Minute)).Token(fresh).Obj()

	out := compute(t, task, []runs.Run{previous, running}, nil)
	if got := out.Status.LastFinishedRunNowToken; got != old {
		t.Fatalf("while the new run runs the field says %q, want the previous token %q", got, old)
	}
	// The annotation has moved on by the time the run ends: the Job's
	// record of its token still names it.
	out.Annotations[v1alpha1.AnnotationRunNow] = "ci-43"
	ended := testutil.MakeRun(runs.RunNowID(fresh)).Succeeded(ago(time.Minute), ago(time.Second)).Token(fresh).Obj()
	out = compute(t, out, []runs.Run{previous, ended}, nil)
	if got := out.Status.LastFinishedRunNowToken; got != fresh {
		t.Fatalf("after the run ended the field says %q, want %q", got, fresh)
	}
	assertRow(t, out, current(v1alpha1.PhaseSucceeded, v1alpha1.ReasonSucceeded))

	// A run no token started (a cron slot) leaves the field alone.
	cronTask := cron()
	cronTask.Status = v1alpha1.TaskStatus{ObservedGeneration: 1, LastFinishedRunNowToken: fresh}
	if got := compute(t, cronTask, []runs.Run{okRun("s1", ago(time.Minute))}, nil).Status.LastFinishedRunNowToken; got != fresh {
		t.Fatalf("a cron run changed the field to %q", got)
	}
}

func TestARunNowTokenIsRecordedOnlyForItsOwnRunAndWithinItsLength(t *testing.T) {
	long := strings.Repeat("x", v1alpha1.MaxRunNowTokenLength+1)
	for _, tc := range []struct {
		name, token, runID, want string
	}{
		{"the run the token started", "ci-42", runs.RunNowID("ci-42"), "ci-42"},
		{"another token's run", "ci-42", runs.RunNowID("ci-41"), ""},
		{"the initial run", "ci-42", runs.OneShot, ""},
		{"a token too long to record", long, runs.RunNowID(long), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runs.RunNowToken(tc.token, tc.runID, nil); got != tc.want {
				t.Errorf("RunNowToken(%.12q, %s) = %q, want %q", tc.token, tc.runID, got, tc.want)
			}
		})
	}
}
