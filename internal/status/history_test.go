package status_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/status"
	"github.com/taskops/task-operator/internal/testutil"
)

func TestAFinishedRunNeverTurnsBackToRunningWhenTheCacheLags(t *testing.T) {
	done := compute(t, oneShot(), []runs.Run{testutil.MakeRun("0").Succeeded(ago(time.Minute), ago(time.Second)).Obj()}, nil)
	// The cache still shows the attempt running.
	again := compute(t, done, []runs.Run{testutil.MakeRun("0").Active(ago(time.Minute)).Obj()}, nil)
	if h := again.Status.History[0]; h.Result != v1alpha1.RunResultSucceeded || h.Reason != v1alpha1.ReasonSucceeded {
		t.Errorf("history[0] = %+v, want the run still Succeeded", h)
	}
	assertRow(t, again, current(v1alpha1.PhaseSucceeded, v1alpha1.ReasonSucceeded))
}

func TestARunsAttemptsNeverDecrease(t *testing.T) {
	two := testutil.MakeRun("0").Failed(ago(time.Hour), ago(time.Hour), v1alpha1.AttemptPodFailed, "exit 1").Active(ago(time.Minute)).Obj()
	st := compute(t, oneShot(), []runs.Run{two}, nil)
	if st.Status.Attempts != 2 || st.Status.RetryCount != 1 {
		t.Fatalf("attempts %d retryCount %d, want 2 and 1", st.Status.Attempts, st.Status.RetryCount)
	}
	// A lagging cache shows only the first attempt.
	one := testutil.MakeRun("0").Failed(ago(time.Hour), ago(time.Hour), v1alpha1.AttemptPodFailed, "exit 1").Obj()
	if got := compute(t, st, []runs.Run{one}, nil); got.Status.Attempts != 2 || got.Status.History[0].Attempts != 2 {
		t.Errorf("attempts %d (history %d), want 2", got.Status.Attempts, got.Status.History[0].Attempts)
	}
}

func TestHistoryEntriesRecordHowTheRunEnded(t *testing.T) {
	slotA, slotB, slotC := ago(3*time.Hour), ago(2*time.Hour), ago(time.Hour)
	task := cron(testutil.MaxRetry(0))
	got := compute(t, task, []runs.Run{
		testutil.MakeRun(runs.ScheduledID(slotA)).Scheduled(slotA).Succeeded(slotA, slotA.Add(time.Minute)).Obj(),
		testutil.MakeRun(runs.ScheduledID(slotB)).Scheduled(slotB).Failed(slotB, slotB.Add(time.Minute), v1alpha1.AttemptNotRetryable, "bad request").Obj(),
		testutil.MakeRun(runs.ScheduledID(slotC)).Scheduled(slotC).Stopped(slotC, slotC.Add(time.Minute), v1alpha1.AttemptReplaced, "replaced").Obj(),
	}, nil)
	want := []v1alpha1.Reason{v1alpha1.AttemptReplaced, v1alpha1.ReasonNotRetryable, v1alpha1.ReasonSucceeded}
	for i, h := range got.Status.History {
		if h.Reason != want[i] {
			t.Errorf("history[%d] (run %s) reason %q, want %q", i, h.RunID, h.Reason, want[i])
		}
	}
}

func TestARecordFromBeforeHistoryHadReasonsGetsTheOneItsJobsTell(t *testing.T) {
	old := v1alpha1.RunRecord{RunID: "0", Attempts: 1, Result: v1alpha1.RunResultFailed, Message: "NotRetryable: bad request",
		StartTime: status.Time(ago(time.Hour)), CompletionTime: status.Time(ago(time.Hour))}
	got := compute(t, oneShot(testutil.Status(finished(old))),
		[]runs.Run{testutil.MakeRun("0").Failed(ago(time.Hour), ago(time.Hour), v1alpha1.AttemptNotRetryable, "bad request").Obj()}, nil)
	if h := got.Status.History[0]; h.Reason != v1alpha1.ReasonNotRetryable || h.Message != old.Message {
		t.Errorf("history[0] = %+v, want the old record with reason NotRetryable", h)
	}
}

func TestLastErrorIsAboutTheNewestFailedAttemptAndWrittenOnce(t *testing.T) {
	run := testutil.MakeRun("0").Failed(ago(time.Hour), ago(time.Hour), v1alpha1.AttemptPodFailed, "job message").Obj()
	in := status.Input{Task: oneShot(), Runs: []runs.Run{run}, Now: now,
		Outputs: map[string]status.Output{run.Latest().JobName: {Text: "pod t-0-1-0 exited with code 3: boom", ExitCode: ptrTo[int32](3)}}}
	st := status.Compute(in)
	if want := "PodFailed (attempt 1, job t-0-1): pod t-0-1-0 exited with code 3: boom"; st.LastError != want {
		t.Errorf("lastError %q, want %q", st.LastError, want)
	}
	if st.LastErrorJobName != "t-0-1" {
		t.Errorf("lastErrorJobName %q, want t-0-1", st.LastErrorJobName)
	}
	// A later pass does not read the output again and keeps lastError.
	task := oneShot(testutil.Status(st))
	if got := status.OutputsToRead(task, []runs.Run{run}, now); len(got) != 0 {
		t.Errorf("OutputsToRead = %v after lastError was written, want none", got)
	}
	if got := status.Compute(status.Input{Task: task, Runs: []runs.Run{run}, Now: now}); got.LastError != st.LastError {
		t.Errorf("lastError changed to %q", got.LastError)
	}
}

func TestOutputsAreReadForTheNewestFailureAndNewlyFinishedRunsOnly(t *testing.T) {
	failedRun := testutil.MakeRun("0").Failed(ago(2*time.Hour), ago(2*time.Hour), v1alpha1.AttemptPodFailed, "").
		Succeeded(ago(time.Hour), ago(time.Hour)).Obj()
	running := testutil.MakeRun(runs.RunNowID("x")).Active(ago(time.Minute)).Obj()
	stopped := testutil.MakeRun(runs.RunNowID("y")).Stopped(ago(30*time.Minute), ago(29*time.Minute), v1alpha1.AttemptReplaced, "replaced").Obj()
	got := status.OutputsToRead(oneShot(), []runs.Run{failedRun, stopped, running}, now)
	if want := "t-0-1,t-0-2"; strings.Join(got, ",") != want {
		t.Errorf("OutputsToRead = %v, want %s (the failed attempt and the succeeded one)", got, want)
	}
}

func TestASucceededRunsMessageCarriesItsOutput(t *testing.T) {
	run := testutil.MakeRun("0").Succeeded(ago(time.Minute), ago(time.Second)).Obj()
	st := status.Compute(status.Input{Task: oneShot(), Runs: []runs.Run{run}, Now: now,
		Outputs: map[string]status.Output{"t-0-1": {Text: "done: 42 rows"}}})
	if want := "succeeded on attempt 1: done: 42 rows"; st.History[0].Message != want {
		t.Errorf("message %q, want %q", st.History[0].Message, want)
	}
}

func TestMessagesAreCutAtTheContractsBound(t *testing.T) {
	long := strings.Repeat("é", status.MaxMessage)
	run := testutil.MakeRun("0").Failed(ago(time.Minute), ago(time.Second), v1alpha1.AttemptPodFailed, long).Obj()
	st := status.Compute(status.Input{Task: oneShot(testutil.MaxRetry(0)), Runs: []runs.Run{run}, Now: now})
	for what, s := range map[string]string{"lastError": st.LastError, "history message": st.History[0].Message} {
		if len(s) > status.MaxMessage || !strings.Contains(s, "...") {
			t.Errorf("%s is %d bytes, want at most %d with a cut mark", what, len(s), status.MaxMessage)
		}
	}
	if !strings.HasSuffix(st.LastError, "é") {
		t.Error("lastError keeps the head of the output; the tail says more")
	}
}

func TestHistoryKeepsTheNewestTenRunsNewestFirst(t *testing.T) {
	var rs []runs.Run
	for i := 20; i > 0; i-- {
		slot := ago(time.Duration(i) * time.Hour)
		rs = append(rs, testutil.MakeRun(runs.ScheduledID(slot)).Scheduled(slot).Succeeded(slot, slot.Add(time.Minute)).Obj())
	}
	st := status.Compute(status.Input{Task: cron(), Runs: rs, Now: now})
	if len(st.History) != 10 || st.History[0].RunID != runs.ScheduledID(ago(time.Hour)) {
		t.Fatalf("history has %d entries, first %s; want 10, newest first", len(st.History), st.History[0].RunID)
	}
}

func TestAttemptRecordsKeepEveryAttemptOfTheNewestRunAfterItsJobsAreGone(t *testing.T) {
	task := oneShot(testutil.MaxRetry(2))
	run := testutil.MakeRun("0").Failed(ago(3*time.Hour), ago(3*time.Hour), v1alpha1.AttemptPodFailed, "")
	// Each pass sees one more failed attempt, and reads that one's output.
	for n := int32(1); n <= 3; n++ {
		if n > 1 {
			run = run.Failed(ago(time.Duration(4-n)*time.Hour), ago(time.Duration(4-n)*time.Hour), v1alpha1.AttemptPodFailed, "")
		}
		job := testutil.AttemptJobName("0", n)
		task.Status = status.Compute(status.Input{Task: task, Runs: []runs.Run{run.Obj()}, Now: now,
			Outputs: map[string]status.Output{job: {Text: "exit " + job, ExitCode: ptrTo(n)}}})
	}
	// The Jobs are pruned: nothing observed.
	task.Status = status.Compute(status.Input{Task: task, Now: now})
	recs := task.Status.AttemptRecords
	if len(recs) != 3 {
		t.Fatalf("%d attempt records, want 3: %+v", len(recs), recs)
	}
	for i, r := range recs {
		n := int32(3 - i)
		job := testutil.AttemptJobName("0", n)
		if r.Attempt != n || r.JobName != job || r.Result != v1alpha1.AttemptResultFailed || r.Reason != v1alpha1.AttemptPodFailed ||
			r.ExitCode == nil || *r.ExitCode != n || r.Message != "exit "+job || r.StartTime == nil || r.CompletionTime == nil {
			t.Errorf("record %d = %+v, want attempt %d of Job %s, Failed PodFailed, exit code %d", i, r, n, job, n)
		}
	}
	if task.Status.Phase != v1alpha1.PhaseFailed {
		t.Errorf("phase %s, want Failed", task.Status.Phase)
	}
}

func TestAttemptRecordsStartAfreshWithANewRun(t *testing.T) {
	first := testutil.MakeRun("0").Failed(ago(2*time.Hour), ago(2*time.Hour), v1alpha1.AttemptPodFailed, "x").Succeeded(ago(time.Hour), ago(time.Hour)).Obj()
	task := oneShot()
	task.Status = status.Compute(status.Input{Task: task, Runs: []runs.Run{first}, Now: now})
	if len(task.Status.AttemptRecords) != 2 {
		t.Fatalf("records %+v, want 2", task.Status.AttemptRecords)
	}
	again := testutil.MakeRun(runs.RunNowID("again")).Active(ago(time.Minute)).Obj()
	task.Status = status.Compute(status.Input{Task: task, Runs: []runs.Run{first, again}, Now: now})
	recs := task.Status.AttemptRecords
	if len(recs) != 1 || recs[0].JobName != again.Latest().JobName || recs[0].Result != "" {
		t.Errorf("records %+v, want only the new run's running attempt", recs)
	}
}
