package status_test

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/notify"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/scheduler"
	"github.com/taskops/task-operator/internal/status"
	"github.com/taskops/task-operator/internal/testutil"
)

var now = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

func ago(d time.Duration) time.Time { return now.Add(-d) }

// row is one row of the contract's conditions table
// (docs/api.md, "Conditions"): the phase, the four
// conditions' statuses and the kstatus verdict.
type row struct {
	phase                              v1alpha1.TaskPhase
	ready, failed, reconciling, stalld metav1.ConditionStatus
	readyReason                        v1alpha1.Reason
	kstatus                            kstatus.Status
	finished                           metav1.ConditionStatus
}

var (
	inProgress = func(phase v1alpha1.TaskPhase, reason v1alpha1.Reason) row {
		return row{phase, metav1.ConditionUnknown, metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, reason, kstatus.InProgressStatus, metav1.ConditionFalse}
	}
	current = func(phase v1alpha1.TaskPhase, reason v1alpha1.Reason) row {
		return row{phase, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionFalse, reason, kstatus.CurrentStatus, metav1.ConditionTrue}
	}
	failed = func(phase v1alpha1.TaskPhase, reason v1alpha1.Reason) row {
		return row{phase, metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionTrue, reason, kstatus.FailedStatus, metav1.ConditionTrue}
	}
	// unfinished is a row whose newest run has not ended (cron rows whose
	// Ready is that of an earlier run).
	unfinished = func(r row) row { r.finished = metav1.ConditionFalse; return r }
)

// compute runs Compute on task and runs with the scheduler's next slot at
// next (cron Tasks), and returns the Task with its new status.
func compute(t *testing.T, task *v1alpha1.Task, rs []runs.Run, problem *status.Problem) *v1alpha1.Task {
	t.Helper()
	in := status.Input{Task: task, Runs: rs, Problem: problem, Now: now}
	if task.Spec.Schedule != nil {
		in.Schedule.Slots = &scheduler.Slots{Next: now.Add(time.Hour)}
	}
	out := task.DeepCopy()
	out.Status = status.Compute(in)
	return out
}

func assertRow(t *testing.T, task *v1alpha1.Task, want row) {
	t.Helper()
	st := &task.Status
	cond := func(typ string) metav1.Condition {
		c := meta.FindStatusCondition(st.Conditions, typ)
		if c == nil {
			t.Fatalf("no %s condition: %+v", typ, st.Conditions)
		}
		if c.ObservedGeneration != task.Generation {
			t.Errorf("%s observedGeneration %d, want %d", typ, c.ObservedGeneration, task.Generation)
		}
		return *c
	}
	ready := cond(v1alpha1.ConditionReady)
	got := row{st.Phase, ready.Status, cond(v1alpha1.ConditionFailed).Status, cond(v1alpha1.ConditionReconciling).Status,
		cond(v1alpha1.ConditionStalled).Status, v1alpha1.Reason(ready.Reason), "", cond(v1alpha1.ConditionFinished).Status}
	ks, msg, err := testutil.Kstatus(task)
	if err != nil {
		t.Fatal(err)
	}
	got.kstatus = ks
	if got != want {
		t.Errorf("got  %+v (kstatus message %q)\nwant %+v", got, msg, want)
	}
}

// oneShot is a one-shot Task with up to 3 attempts, 10 s apart at first.
func oneShot(opts ...testutil.TaskOpt) *v1alpha1.Task {
	return testutil.NewTask("ns", "t", append([]testutil.TaskOpt{testutil.Generation(1), testutil.Retries(2, 10, 60, 2)}, opts...)...)
}

// cron is oneShot on an hourly schedule.
func cron(opts ...testutil.TaskOpt) *v1alpha1.Task {
	return oneShot(append([]testutil.TaskOpt{testutil.Schedule("0 * * * *")}, opts...)...)
}

// runsAfterETL makes a Task run after the Task etl (spec.after).
func runsAfterETL(t *v1alpha1.Task) { t.Spec.After = []v1alpha1.TaskAfter{{Task: "etl"}} }

// finished is a stored status that already records runs as finished.
func finished(results ...v1alpha1.RunRecord) v1alpha1.TaskStatus {
	return v1alpha1.TaskStatus{ObservedGeneration: 1, History: results}
}

func TestTheConditionsTableOfTheContract(t *testing.T) {
	slot := ago(2 * time.Hour)
	tests := []struct {
		name    string
		task    *v1alpha1.Task
		runs    []runs.Run
		problem *status.Problem
		want    row
	}{
		{
			name: "one-shot, no Job yet: Pending, in progress",
			task: oneShot(),
			want: inProgress(v1alpha1.PhasePending, v1alpha1.ReasonPending),
		},
		{
			name: "one-shot, an attempt running: Running, in progress",
			task: oneShot(),
			runs: []runs.Run{testutil.MakeRun("0").Active(ago(time.Minute)).Obj()},
			want: inProgress(v1alpha1.PhaseRunning, v1alpha1.ReasonRunning),
		},
		{
			name: "one-shot, waiting out its backoff: Retrying, in progress",
			task: oneShot(),
			runs: []runs.Run{testutil.MakeRun("0").Failed(ago(time.Minute), ago(time.Second), v1alpha1.AttemptPodFailed, "exit 3").Obj()},
			want: inProgress(v1alpha1.PhaseRetrying, v1alpha1.ReasonRetrying),
		},
		{
			name: "one-shot, a run-now re-run in progress: Running, in progress",
			task: oneShot(testutil.Status(finished(v1alpha1.RunRecord{RunID: "0", Attempts: 1, Result: v1alpha1.RunResultSucceeded,
				StartTime: status.Time(ago(time.Hour)), CompletionTime: status.Time(ago(time.Hour))}))),
			runs: []runs.Run{
				testutil.MakeRun("0").Succeeded(ago(time.Hour), ago(time.Hour)).Obj(),
				testutil.MakeRun(runs.RunNowID("again")).Active(ago(time.Minute)).Obj(),
			},
			want: inProgress(v1alpha1.PhaseRunning, v1alpha1.ReasonRunning),
		},
		{
			name: "one-shot, run succeeded: Succeeded, current",
			task: oneShot(),
			runs: []runs.Run{testutil.MakeRun("0").Succeeded(ago(time.Minute), ago(time.Second)).Obj()},
			want: current(v1alpha1.PhaseSucceeded, v1alpha1.ReasonSucceeded),
		},
		{
			name: "one-shot, run failed for good: Failed, failed, with the final reason",
			task: oneShot(testutil.MaxRetry(0)),
			runs: []runs.Run{testutil.MakeRun("0").Failed(ago(time.Minute), ago(time.Second), v1alpha1.AttemptPodFailed, "exit 3").Obj()},
			want: failed(v1alpha1.PhaseFailed, v1alpha1.ReasonRetriesExhausted),
		},
		{
			name: "one-shot, the runner's bad request: Failed NotRetryable",
			task: oneShot(),
			runs: []runs.Run{testutil.MakeRun("0").Failed(ago(time.Minute), ago(time.Second), v1alpha1.AttemptNotRetryable, "bad URL").Obj()},
			want: failed(v1alpha1.PhaseFailed, v1alpha1.ReasonNotRetryable),
		},
		{
			name: "one-shot, failed for good and its Jobs pruned: the history's reason stays",
			task: oneShot(testutil.Status(finished(v1alpha1.RunRecord{RunID: "0", Attempts: 1, Result: v1alpha1.RunResultFailed,
				Reason: v1alpha1.ReasonNotRetryable, StartTime: status.Time(ago(time.Hour)), CompletionTime: status.Time(ago(time.Hour))}))),
			want: failed(v1alpha1.PhaseFailed, v1alpha1.ReasonNotRetryable),
		},
		{
			name: "cron, no run yet: Scheduled, Ready, not Finished",
			task: cron(),
			want: unfinished(current(v1alpha1.PhaseScheduled, v1alpha1.ReasonScheduled)),
		},
		{
			name: "after others (spec.after), no run yet: as cron, Scheduled, Ready, not Finished",
			task: oneShot(runsAfterETL),
			want: unfinished(current(v1alpha1.PhaseScheduled, v1alpha1.ReasonScheduled)),
		},
		{
			name: "after others, its last chained run failed for good: as cron, not Ready (LastRunFailed), failed",
			task: oneShot(runsAfterETL, testutil.MaxRetry(0)),
			runs: []runs.Run{testutil.MakeRun("a0123456789").Failed(slot, slot.Add(time.Minute), v1alpha1.AttemptPodFailed, "exit 3").Obj()},
			want: failed(v1alpha1.PhaseScheduled, v1alpha1.ReasonLastRunFailed),
		},
		{
			name: "cron, the first run running: Running, Ready, not Finished",
			task: cron(),
			runs: []runs.Run{testutil.MakeRun(runs.ScheduledID(slot)).Scheduled(slot).Active(slot).Obj()},
			want: unfinished(current(v1alpha1.PhaseRunning, v1alpha1.ReasonScheduled)),
		},
		{
			name: "cron, last finished run succeeded: Scheduled, Ready",
			task: cron(),
			runs: []runs.Run{testutil.MakeRun(runs.ScheduledID(slot)).Scheduled(slot).Succeeded(slot, slot.Add(time.Minute)).Obj()},
			want: current(v1alpha1.PhaseScheduled, v1alpha1.ReasonSucceeded),
		},
		{
			name: "cron, last finished run failed for good: Scheduled, not Ready (LastRunFailed), failed",
			task: cron(testutil.MaxRetry(0)),
			runs: []runs.Run{testutil.MakeRun(runs.ScheduledID(slot)).Scheduled(slot).Failed(slot, slot.Add(time.Minute), v1alpha1.AttemptPodFailed, "exit 3").Obj()},
			want: failed(v1alpha1.PhaseScheduled, v1alpha1.ReasonLastRunFailed),
		},
		{
			name: "cron, a failed run then one running: Running, still not Ready, not Finished",
			task: cron(testutil.MaxRetry(0)),
			runs: []runs.Run{
				testutil.MakeRun(runs.ScheduledID(slot)).Scheduled(slot).Failed(slot, slot.Add(time.Minute), v1alpha1.AttemptPodFailed, "exit 3").Obj(),
				testutil.MakeRun(runs.ScheduledID(ago(time.Hour))).Scheduled(ago(time.Hour)).Active(ago(time.Hour)).Obj(),
			},
			want: unfinished(failed(v1alpha1.PhaseRunning, v1alpha1.ReasonLastRunFailed)),
		},
		{
			name: "one-shot, run cancelled: Failed, not Ready (Cancelled), failed, Finished",
			task: oneShot(),
			runs: []runs.Run{testutil.MakeRun("0").Stopped(ago(time.Minute), ago(time.Second), v1alpha1.AttemptCancelled, "a new cancel token").Obj()},
			want: failed(v1alpha1.PhaseFailed, v1alpha1.ReasonCancelled),
		},
		{
			name: "cron, its last run cancelled: Ready is that of the run before",
			task: cron(),
			runs: []runs.Run{
				testutil.MakeRun(runs.ScheduledID(slot)).Scheduled(slot).Succeeded(slot, slot.Add(time.Minute)).Obj(),
				testutil.MakeRun(runs.ScheduledID(ago(time.Hour))).Scheduled(ago(time.Hour)).
					Stopped(ago(time.Hour), ago(time.Minute), v1alpha1.AttemptCancelled, "a new cancel token").Obj(),
			},
			want: current(v1alpha1.PhaseScheduled, v1alpha1.ReasonSucceeded),
		},
		{
			name:    "a bad schedule: Failed, not Ready (InvalidSchedule), failed",
			task:    oneShot(testutil.Schedule("61 * * * *")),
			problem: &status.Problem{Reason: v1alpha1.ReasonInvalidSchedule, Message: "bad minute"},
			want:    failed(v1alpha1.PhaseFailed, v1alpha1.ReasonInvalidSchedule),
		},
		{
			name:    "a Job the API server refused: Failed, not Ready (InvalidSpec), failed",
			task:    oneShot(),
			problem: &status.Problem{Reason: v1alpha1.ReasonInvalidSpec, Message: "the API server refused the Job"},
			want:    failed(v1alpha1.PhaseFailed, v1alpha1.ReasonInvalidSpec),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertRow(t, compute(t, tt.task, tt.runs, tt.problem), tt.want)
		})
	}
}

func TestSuspendKeepsReadyFailedAndStalledAndReconcilingSaysWhetherTheRunIsUnfinished(t *testing.T) {
	// A Task that succeeded, then got a run-now re-run, then was suspended
	// while that run waits out its backoff.
	task := compute(t, oneShot(), []runs.Run{testutil.MakeRun("0").Succeeded(ago(time.Hour), ago(time.Hour)).Obj()}, nil)
	assertRow(t, task, current(v1alpha1.PhaseSucceeded, v1alpha1.ReasonSucceeded))
	task.Spec.Suspend = ptrTo(true)
	rerun := testutil.MakeRun(runs.RunNowID("x")).Failed(ago(time.Minute), ago(time.Second), v1alpha1.AttemptPodFailed, "exit 3").Obj()
	both := []runs.Run{testutil.MakeRun("0").Succeeded(ago(time.Hour), ago(time.Hour)).Obj(), rerun}

	got := compute(t, task, both, nil)
	assertRow(t, got, row{v1alpha1.PhaseSuspended, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionTrue, metav1.ConditionFalse,
		v1alpha1.ReasonSucceeded, kstatus.InProgressStatus, metav1.ConditionFalse})

	rerunDone := testutil.MakeRun(runs.RunNowID("x")).Failed(ago(time.Minute), ago(time.Second), v1alpha1.AttemptPodFailed, "exit 3").
		Succeeded(now, now).Obj()
	got = compute(t, got, []runs.Run{both[0], rerunDone}, nil)
	assertRow(t, got, row{v1alpha1.PhaseSuspended, metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionFalse,
		v1alpha1.ReasonSucceeded, kstatus.CurrentStatus, metav1.ConditionTrue})
}

func TestASuspendedTaskWithAnActiveJobIsRunning(t *testing.T) {
	got := compute(t, oneShot(testutil.Suspend(true)), []runs.Run{testutil.MakeRun("0").Active(ago(time.Minute)).Obj()}, nil)
	if got.Status.Phase != v1alpha1.PhaseRunning {
		t.Errorf("phase %s, want Running", got.Status.Phase)
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestFinishedSaysHowTheNewestRunEnded(t *testing.T) {
	tests := []struct {
		name string
		task *v1alpha1.Task
		runs []runs.Run
		want v1alpha1.Reason
	}{
		{"succeeded", oneShot(), []runs.Run{testutil.MakeRun("0").Succeeded(ago(time.Minute), ago(time.Second)).Obj()}, v1alpha1.ReasonSucceeded},
		{"retries exhausted", oneShot(testutil.MaxRetry(0)),
			[]runs.Run{testutil.MakeRun("0").Failed(ago(time.Minute), ago(time.Second), v1alpha1.AttemptPodFailed, "exit 3").Obj()}, v1alpha1.ReasonRetriesExhausted},
		{"not retryable", oneShot(),
			[]runs.Run{testutil.MakeRun("0").Failed(ago(time.Minute), ago(time.Second), v1alpha1.AttemptNotRetryable, "bad URL").Obj()}, v1alpha1.ReasonNotRetryable},
		{"cancelled", oneShot(),
			[]runs.Run{testutil.MakeRun("0").Stopped(ago(time.Minute), ago(time.Second), v1alpha1.AttemptCancelled, "token").Obj()}, v1alpha1.ReasonCancelled},
		{"retrying is not finished", oneShot(),
			[]runs.Run{testutil.MakeRun("0").Failed(ago(time.Minute), ago(time.Second), v1alpha1.AttemptPodFailed, "exit 3").Obj()}, v1alpha1.ReasonRunning},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := compute(t, tt.task, tt.runs, nil)
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionFinished)
			if c == nil || v1alpha1.Reason(c.Reason) != tt.want {
				t.Fatalf("Finished = %+v, want reason %s", c, tt.want)
			}
		})
	}
}

func TestAnAttemptWaitingForCapacityIsPendingWithTheCause(t *testing.T) {
	run := testutil.MakeRun("0").Active(ago(time.Hour)).Obj()
	task := oneShot()
	got := task.DeepCopy()
	got.Status = status.Compute(status.Input{Task: task, Runs: []runs.Run{run}, Now: now,
		Waiting: map[string]string{run.Latest().JobName: "pod p is Unschedulable: 0/1 nodes are available"}})
	assertRow(t, got, inProgress(v1alpha1.PhasePending, v1alpha1.ReasonWaitingForCapacity))
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); !strings.Contains(c.Message, "0/1 nodes are available") {
		t.Errorf("Ready message %q lacks the cause", c.Message)
	}
}

// status.active lists at most MaxActiveListed Jobs (the schema's bound: a
// longer list would make every status write fail) and counts the rest.
func TestStatusActiveIsCutAtItsBoundAndCountsTheRest(t *testing.T) {
	var rs []runs.Run
	for i := range v1alpha1.MaxActiveListed + 5 {
		slot := ago(time.Duration(i) * time.Minute)
		rs = append(rs, testutil.MakeRun(runs.ScheduledID(slot)).Scheduled(slot).Active(slot).Obj())
	}
	got := compute(t, cron(testutil.Concurrency(v1alpha1.AllowConcurrent)), rs, nil)
	if len(got.Status.Active) != v1alpha1.MaxActiveListed || got.Status.ActiveOmitted != 5 {
		t.Fatalf("status.active has %d Jobs, activeOmitted %d; want %d and 5", len(got.Status.Active), got.Status.ActiveOmitted, v1alpha1.MaxActiveListed)
	}
	got = compute(t, cron(testutil.Concurrency(v1alpha1.AllowConcurrent)), rs[:3], nil)
	if len(got.Status.Active) != 3 || got.Status.ActiveOmitted != 0 {
		t.Fatalf("status.active has %d Jobs, activeOmitted %d; want 3 and 0", len(got.Status.Active), got.Status.ActiveOmitted)
	}
}

// A Job the API server refuses although the spec is fine: a quota on Jobs
// is a wait for capacity (in progress), a policy or a foreign Job under
// the name needs someone (stalled, not failed, not finished).
func TestARefusedJobIsAWaitOrStalledNeverAFailure(t *testing.T) {
	for _, tt := range []struct {
		name    string
		refusal status.Problem
		want    row
	}{{
		name:    "a ResourceQuota on Jobs refused it: Pending, waiting for capacity, in progress",
		refusal: status.Problem{Reason: v1alpha1.ReasonWaitingForCapacity, Message: "run 0: attempt 1 waits: a ResourceQuota refused its Job"},
		want:    inProgress(v1alpha1.PhasePending, v1alpha1.ReasonWaitingForCapacity),
	}, {
		name:    "the API server could not take it for now (a webhook restarting): Pending, waiting for the API, in progress",
		refusal: status.Problem{Reason: v1alpha1.ReasonWaitingForAPI, Message: "run 0: attempt 1 waits: the API server could not take its Job for now"},
		want:    inProgress(v1alpha1.PhasePending, v1alpha1.ReasonWaitingForAPI),
	}, {
		name:    "a policy refused it: Pending, not Ready (JobRefused), stalled, not failed",
		refusal: status.Problem{Reason: v1alpha1.ReasonJobRefused, Message: "run 0: attempt 1 waits: the API server refused its Job"},
		want: row{v1alpha1.PhasePending, metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionFalse, metav1.ConditionTrue,
			v1alpha1.ReasonJobRefused, kstatus.FailedStatus, metav1.ConditionFalse},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			task := oneShot()
			out := task.DeepCopy()
			out.Status = status.Compute(status.Input{Task: task, Refusal: &tt.refusal, Now: now})
			assertRow(t, out, tt.want)
		})
	}
}

// What the pass's create of a notification Job came to is an input of the
// computation, which the pass runs again with it: a Job created is
// recorded; a refusal that will not pass fails the notification in the
// status that records the run's end; one that may pass leaves it Pending
// until the deadline, then fails it, the reason in the run's message.
func TestANotificationRefusedForGoodFailsAndOneRefusedForNowWaitsUntilItsDeadline(t *testing.T) {
	task := oneShot(testutil.Notify("http://10.0.0.1/hook", "", v1alpha1.NotifyOnFailed), testutil.Retries(0, 10, 60, 2))
	failed := []runs.Run{testutil.MakeRun("0").Failed(ago(time.Minute), ago(time.Second), v1alpha1.AttemptPodFailed, "exit 3").Obj()}
	for _, tc := range []struct {
		name    string
		try     *notify.Try
		now     time.Time
		want    v1alpha1.NotificationState
		wantJob string
	}{
		{"no create yet", nil, now, v1alpha1.NotificationPending, ""},
		{"created", &notify.Try{Job: "n-0"}, now, v1alpha1.NotificationPending, "n-0"},
		{"refused for good", &notify.Try{Refusal: "forbidden", Final: true}, now, v1alpha1.NotificationFailed, ""},
		{"refused for now", &notify.Try{Refusal: "webhook down"}, now, v1alpha1.NotificationPending, ""},
		{"refused for now, past the deadline", &notify.Try{Refusal: "webhook down"}, now.Add(notify.DefaultDeadline), v1alpha1.NotificationFailed, ""},
	} {
		in := status.Input{Task: task, Runs: failed, Now: tc.now, NotificationDeadline: notify.DefaultDeadline}
		if tc.try != nil {
			in.NotificationTries = map[string]notify.Try{"0": *tc.try}
		}
		st := status.Compute(in)
		if len(st.History) != 1 || st.History[0].Result != v1alpha1.RunResultFailed || st.History[0].Notification != tc.want || st.History[0].NotificationJob != tc.wantJob {
			t.Errorf("%s: history %+v, want the run Failed with notification %s, job %q", tc.name, st.History, tc.want, tc.wantJob)
		}
		if tc.want == v1alpha1.NotificationFailed && !strings.Contains(st.History[0].Message, "notification not sent: "+tc.try.Refusal) {
			t.Errorf("%s: message %q lacks the refusal", tc.name, st.History[0].Message)
		}
	}
}
