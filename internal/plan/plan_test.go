package plan_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/status"
	"github.com/taskops/task-operator/internal/testutil"
)

var now = time.Date(2026, 1, 1, 10, 0, 30, 0, time.UTC)

func ago(d time.Duration) time.Time { return now.Add(-d) }

// hour is that hour of the test's day.
func hour(h int) time.Time { return time.Date(2026, 1, 1, h, 0, 0, 0, time.UTC) }

// task is a one-shot Task with up to 3 attempts, 10 s apart at first, and
// a start timeout of 5 minutes.
func task(opts ...testutil.TaskOpt) *v1alpha1.Task {
	base := []testutil.TaskOpt{testutil.UID("uid-1"), testutil.Generation(1), testutil.Retries(2, 10, 60, 2), testutil.StartTimeout(300)}
	return testutil.NewTask("ns", "t", append(base, opts...)...)
}

// withParams declares date (default yesterday) and region (default eu).
func withParams(t *v1alpha1.Task) {
	t.Spec.Params = []v1alpha1.ParamSpec{{Name: "date", Default: ptr.To("yesterday")}, {Name: "region", Default: ptr.To("eu")}}
}

// recorded is a stored status whose history records runs as finished.
func recorded(ids ...string) v1alpha1.TaskStatus {
	st := v1alpha1.TaskStatus{ObservedGeneration: 1}
	for _, id := range ids {
		st.History = append(st.History, v1alpha1.RunRecord{RunID: id, Attempts: 1, Result: v1alpha1.RunResultSucceeded})
	}
	return st
}

// cancelled is a stored status whose history records runs as cancelled.
func cancelled(ids ...string) v1alpha1.TaskStatus {
	st := v1alpha1.TaskStatus{ObservedGeneration: 1}
	for _, id := range ids {
		st.History = append(st.History, v1alpha1.RunRecord{RunID: id, Attempts: 1, Result: v1alpha1.RunResultCancelled, Reason: v1alpha1.ReasonCancelled})
	}
	return st
}

// running is a stored status whose history records runs as running.
func running(ids ...string) v1alpha1.TaskStatus {
	st := v1alpha1.TaskStatus{ObservedGeneration: 1}
	for _, id := range ids {
		st.History = append(st.History, v1alpha1.RunRecord{RunID: id, Attempts: 1, Result: v1alpha1.RunResultRunning})
	}
	return st
}

func TestDecide(t *testing.T) {
	imagePull := []retry.PodStart{{Name: "p", Created: ago(301 * time.Second), WaitingReason: "ImagePullBackOff", WaitingMessage: "no such image"}}
	runNow, runParams := v1alpha1.AnnotationRunNow, v1alpha1.AnnotationRunParams
	tests := []struct {
		name string
		in   plan.Input
		want plan.Plan
	}{
		{
			name: "a new one-shot Task starts its initial run",
			in:   plan.Input{Task: task()},
			want: plan.Plan{Start: []plan.Start{{RunID: runs.OneShot, Attempt: 1}}},
		},
		{
			name: "a running attempt within its start timeout is looked at when the timeout passes",
			in:   plan.Input{Task: task(), Runs: []runs.Run{testutil.MakeRun("0").Active(ago(time.Minute)).Obj()}},
			want: plan.Plan{Wake: ago(time.Minute).Add(300 * time.Second)},
		},
		{
			name: "an attempt whose pods have all started needs no look",
			in:   plan.Input{Task: task(), Runs: []runs.Run{testutil.MakeRun("0").Started(ago(time.Hour)).Obj()}},
			want: plan.Plan{},
		},
		{
			name: "an attempt whose pod cannot pull its image is stopped after the start timeout, and retried after its backoff",
			in: plan.Input{Task: task(), Runs: []runs.Run{testutil.MakeRun("0").Active(ago(301 * time.Second)).Obj()},
				Pods: map[string][]retry.PodStart{"t-0-1": imagePull}},
			want: plan.Plan{
				Stop: []plan.Stop{{RunID: "0", Attempt: 1, Reason: v1alpha1.AttemptStartTimeout, Message: "pod p did not start within 5m0s: ImagePullBackOff: no such image (kubectl describe pod p)"}},
				Wake: now.Add(10 * time.Second),
			},
		},
		{
			name: "a failed attempt waits out its backoff",
			in: plan.Input{Task: task(), Runs: []runs.Run{testutil.MakeRun("0").
				Failed(ago(time.Minute), ago(5*time.Second), v1alpha1.AttemptPodFailed, "exit 3").Obj()}},
			want: plan.Plan{Wake: ago(5 * time.Second).Add(10 * time.Second)},
		},
		{
			name: "a failed attempt whose backoff passed starts the next attempt",
			in: plan.Input{Task: task(), Runs: []runs.Run{testutil.MakeRun("0").
				Failed(ago(time.Minute), ago(10*time.Second), v1alpha1.AttemptPodFailed, "exit 3").Obj()}},
			want: plan.Plan{Start: []plan.Start{{RunID: "0", Attempt: 2}}},
		},
		{
			name: "an attempt whose Job was deleted is retried at once",
			in: plan.Input{Task: task(), DeletedJobs: 1, Runs: []runs.Run{testutil.MakeRun("0").
				Failed(now, now, v1alpha1.AttemptJobDeleted, "deleted").Obj()}},
			want: plan.Plan{Start: []plan.Start{{RunID: "0", Attempt: 2}}, DeletedJobs: 1},
		},
		{
			name: "a run-now token under Replace stops the active run and starts its own",
			in: plan.Input{Task: task(testutil.Concurrency(v1alpha1.ReplaceConcurrent), testutil.Annotation(runNow, "again"), testutil.Status(recorded())),
				Runs: []runs.Run{testutil.MakeRun("0").Started(ago(time.Minute)).Obj()}},
			want: plan.Plan{
				Stop:        []plan.Stop{{RunID: "0", Attempt: 1, Reason: v1alpha1.AttemptReplaced, Message: "replaced by a newer run (concurrencyPolicy: Replace)"}},
				Start:       []plan.Start{{RunID: runs.RunNowID("again"), Attempt: 1}},
				RunNowToken: runs.TokenHash("again"),
			},
		},
		{
			name: "a cancelled run's Job that someone resumed is stopped again",
			in: plan.Input{Task: task(testutil.Status(cancelled("0"))),
				Runs: []runs.Run{testutil.MakeRun("0").Started(ago(time.Minute)).StopUndone(v1alpha1.AttemptCancelled, "token t1").Obj()}},
			want: plan.Plan{Stop: []plan.Stop{{RunID: "0", Attempt: 1, Reason: v1alpha1.AttemptCancelled,
				Message: "stopped again (its Job ran again after it was stopped): token t1"}}},
		},
		{
			name: "a stopped attempt's Job that runs again after the next attempt started is stopped again",
			in: plan.Input{Task: task(testutil.Status(recorded())), Runs: []runs.Run{testutil.MakeRun("0").
				Started(ago(time.Hour)).StopUndone(v1alpha1.AttemptStartTimeout, "pod p did not start").
				Started(ago(time.Minute)).Obj()}},
			want: plan.Plan{Stop: []plan.Stop{{RunID: "0", Attempt: 1, Reason: v1alpha1.AttemptStartTimeout,
				Message: "stopped again (its Job ran again after it was stopped): pod p did not start"}}},
		},
		{
			name: "a running Job someone annotated as stopped by hand runs on and starts no next attempt",
			in: plan.Input{Task: task(testutil.Status(running("0"))),
				Runs: []runs.Run{testutil.MakeRun("0").Started(ago(time.Minute)).StopUndone(v1alpha1.AttemptCancelled, "").Obj()}},
			want: plan.Plan{},
		},
		{
			name: "the output of an attempt being failed for its deadline is kept on its Job",
			in: plan.Input{Task: task(), Runs: []runs.Run{testutil.MakeRun("0").Started(ago(time.Minute)).Failing(v1alpha1.AttemptDeadlineExceeded).Obj()},
				Captured: map[string]string{"t-0-1": "step 3 of 5"}},
			want: plan.Plan{Capture: map[string]string{"t-0-1": "step 3 of 5"}},
		},
		{
			name: "finished runs beyond the history limit lose their Jobs once the status records them",
			in: plan.Input{Task: task(testutil.HistoryLimits(1, 1), testutil.Status(recorded("0", runs.RunNowID("a")))), Runs: []runs.Run{
				testutil.MakeRun("0").Succeeded(ago(3*time.Hour), ago(3*time.Hour)).Obj(),
				testutil.MakeRun(runs.RunNowID("a")).Succeeded(ago(2*time.Hour), ago(2*time.Hour)).Obj(),
				testutil.MakeRun(runs.RunNowID("b")).Succeeded(ago(time.Hour), ago(time.Hour)).Obj(),
			}},
			want: plan.Plan{Prune: []plan.Prune{
				{RunID: runs.RunNowID("a"), JobNames: []string{testutil.AttemptJobName(runs.RunNowID("a"), 1)}},
				{RunID: "0", JobNames: []string{"t-0-1"}},
			}},
		},
		{
			name: "a run over the limit the status does not record yet is pruned a second later",
			in: plan.Input{Task: task(testutil.HistoryLimits(0, 0), testutil.Status(recorded())), Runs: []runs.Run{
				testutil.MakeRun("0").Succeeded(ago(time.Hour), ago(time.Hour)).Obj(),
			}},
			want: plan.Plan{Wake: now.Add(time.Second)},
		},
		{
			name: "a finished one-shot Task past its TTL expires",
			in:   plan.Input{Task: task(testutil.TTL(60)), Runs: []runs.Run{testutil.MakeRun("0").Succeeded(ago(2*time.Minute), ago(time.Minute)).Obj()}},
			want: plan.Plan{Expire: true},
		},
		{
			name: "a finished one-shot Task within its TTL is looked at when it passes",
			in:   plan.Input{Task: task(testutil.TTL(600)), Runs: []runs.Run{testutil.MakeRun("0").Succeeded(ago(2*time.Minute), ago(time.Minute)).Obj()}},
			want: plan.Plan{Wake: ago(time.Minute).Add(600 * time.Second)},
		},
		{
			name: "a bad schedule is a problem and nothing is done",
			in:   plan.Input{Task: task(testutil.Schedule("61 * * * *")), Runs: []runs.Run{testutil.MakeRun("0").Active(ago(time.Hour)).Obj()}},
			want: plan.Plan{Problem: &status.Problem{Reason: v1alpha1.ReasonInvalidSchedule,
				Message: `spec.schedule: invalid minute field "61" in "61 * * * *": end of range (61) above maximum (59): 61`}},
		},
		{
			name: "the initial run of a Task with params gets the defaults",
			in:   plan.Input{Task: task(withParams)},
			want: plan.Plan{Start: []plan.Start{{RunID: runs.OneShot, Attempt: 1, Params: map[string]string{"date": "yesterday", "region": "eu"}}}},
		},
		{
			name: "a run-now run gets the values written with its token, defaults filling the rest",
			in:   plan.Input{Task: task(withParams, testutil.Annotation(runNow, "t1"), testutil.Annotation(runParams, `{"date":"2026-11-30"}`), testutil.Status(recorded("0")))},
			want: plan.Plan{Start: []plan.Start{{RunID: runs.RunNowID("t1"), Attempt: 1, Params: map[string]string{"date": "2026-11-30", "region": "eu"}}},
				RunNowToken: runs.TokenHash("t1")},
		},
		{
			name: "a run-now run whose values name an unknown param fails at once without a Job",
			in:   plan.Input{Task: task(withParams, testutil.Annotation(runNow, "t2"), testutil.Annotation(runParams, `{"dat":"x"}`), testutil.Status(recorded("0")))},
			want: plan.Plan{Dropped: []plan.Dropped{{
				Queued: v1alpha1.QueuedAttempt{RunID: runs.RunNowID("t2"), Attempt: 1, JobName: jobs.Name(task(), runs.RunNowID("t2"), 1)},
				Result: v1alpha1.RunResultFailed, Reason: v1alpha1.ReasonInvalidParams,
				Message: `unknown params "dat": spec.params declares "date", "region"`}},
				RunNowToken: runs.TokenHash("t2")},
		},
		{
			name: "a retry keeps its run's values, whatever the annotation says now",
			in: plan.Input{Task: task(withParams, testutil.Annotation(runParams, `{"date":"other"}`)), Runs: []runs.Run{testutil.MakeRun("0").
				Failed(ago(time.Minute), ago(10*time.Second), v1alpha1.AttemptPodFailed, "exit 3").Params(map[string]string{"date": "first"}).Obj()}},
			want: plan.Plan{Start: []plan.Start{{RunID: "0", Attempt: 2, Params: map[string]string{"date": "first"}}}},
		},
		{
			name: "a reference to an undeclared param in an http Task's url is a problem",
			in: plan.Input{Task: task(func(t *v1alpha1.Task) {
				t.Spec.Type, t.Spec.Shell, t.Spec.URL = v1alpha1.TaskTypeHTTP, "", "https://x.test/$(params.region)"
			})},
			want: plan.Plan{Problem: &status.Problem{Reason: v1alpha1.ReasonInvalidSpec, Message: "spec.url uses $(params.region), which spec.params does not declare"}},
		},
		{
			name: "a backfill starts the oldest slot of its range that has no run, one at a time under Forbid",
			in: plan.Input{Task: task(testutil.Schedule("0 * * * *"), testutil.Annotation(v1alpha1.AnnotationBackfill, "b1"),
				testutil.Annotation(v1alpha1.AnnotationBackfillRange, "2026-01-01T07:00:00Z/2026-01-01T09:30:00Z"),
				testutil.Status(v1alpha1.TaskStatus{ObservedGeneration: 1, LastScheduleTime: status.Time(hour(10))}))},
			want: plan.Plan{Start: []plan.Start{{RunID: runs.ScheduledID(hour(7)), Attempt: 1, Scheduled: ptr.To(hour(7))}},
				Backfill: &v1alpha1.BackfillStatus{Token: "b1", From: status.Time(hour(7)), To: status.Time(hour(9).Add(30 * time.Minute)),
					State: v1alpha1.BackfillRunning, Total: 3, Started: 1, Cursor: status.Time(hour(7))},
				Wake: hour(11)},
		},
		{
			name: "a backfill passes over the slots that have a run and waits while one is active",
			in: plan.Input{Task: task(testutil.Schedule("0 * * * *"), testutil.Annotation(v1alpha1.AnnotationBackfill, "b1"),
				testutil.Annotation(v1alpha1.AnnotationBackfillRange, "2026-01-01T07:00:00Z/2026-01-01T09:30:00Z"),
				testutil.Status(v1alpha1.TaskStatus{ObservedGeneration: 1, LastScheduleTime: status.Time(hour(10)),
					Backfill: &v1alpha1.BackfillStatus{Token: "b1", From: status.Time(hour(7)), To: status.Time(hour(9).Add(30 * time.Minute)),
						State: v1alpha1.BackfillRunning, Total: 3, Started: 1, Cursor: status.Time(hour(7))}})),
				Runs: []runs.Run{
					testutil.MakeRun(runs.ScheduledID(hour(7))).Scheduled(hour(7)).Succeeded(hour(7), hour(7).Add(time.Minute)).Obj(),
					testutil.MakeRun(runs.ScheduledID(hour(8))).Scheduled(hour(8)).Started(ago(time.Minute)).Obj(),
				}},
			want: plan.Plan{Backfill: &v1alpha1.BackfillStatus{Token: "b1", From: status.Time(hour(7)), To: status.Time(hour(9).Add(30 * time.Minute)),
				State: v1alpha1.BackfillRunning, Total: 3, Started: 2, Finished: 1, Cursor: status.Time(hour(8))},
				Wake: hour(11)},
		},
		{
			name: "a backfill request on a one-shot Task is refused",
			in:   plan.Input{Task: task(testutil.Annotation(v1alpha1.AnnotationBackfill, "b"), testutil.Status(recorded("0")))},
			want: plan.Plan{Backfill: &v1alpha1.BackfillStatus{Token: "b", State: v1alpha1.BackfillRefused,
				Message: "a one-shot Task has no slots to backfill: the Task needs spec.schedule"}},
		},
		{
			name: "labels a Job lost are put back, even when the spec is a problem",
			in:   plan.Input{Task: task(testutil.Schedule("61 * * * *")), Relabel: map[string]map[string]string{"t-0-1": {"batch.taskops.io/run": "0"}}},
			want: plan.Plan{Problem: &status.Problem{Reason: v1alpha1.ReasonInvalidSchedule,
				Message: `spec.schedule: invalid minute field "61" in "61 * * * *": end of range (61) above maximum (59): 61`},
				Relabel: map[string]map[string]string{"t-0-1": {"batch.taskops.io/run": "0"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = now
			got := plan.Decide(tt.in)
			got.Schedule = tt.want.Schedule // the scheduler's part has its own tests
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAJobTheAPIServerRefusedIsNotRetriedUntilTheSpecChanges(t *testing.T) {
	st := v1alpha1.TaskStatus{}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue,
		Reason: string(v1alpha1.ReasonInvalidSpec), Message: "refused", ObservedGeneration: 1})
	got := plan.Decide(plan.Input{Task: task(testutil.Status(st)), Now: now})
	if got.Problem == nil || got.Problem.Reason != v1alpha1.ReasonInvalidSpec || len(got.Start) > 0 {
		t.Fatalf("generation 1: %+v, want InvalidSpec and nothing started", got)
	}
	got = plan.Decide(plan.Input{Task: task(testutil.Generation(2), testutil.Status(st)), Now: now})
	if got.Problem != nil || len(got.Start) != 1 {
		t.Fatalf("generation 2: %+v, want the initial run started", got)
	}
}

func TestADueCronSlotStartsItsRunAndTheNextSlotWakesThePass(t *testing.T) {
	last := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	st := v1alpha1.TaskStatus{ObservedGeneration: 1, LastScheduleTime: status.Time(last)}
	got := plan.Decide(plan.Input{Task: task(testutil.Schedule("0 * * * *"), testutil.Status(st)), Now: time.Date(2026, 1, 1, 10, 0, 5, 0, time.UTC)})
	slot := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	if len(got.Start) != 1 || got.Start[0].RunID != runs.ScheduledID(slot) || !got.Start[0].Scheduled.Equal(slot) {
		t.Fatalf("start %+v, want the 10:00 slot's run", got.Start)
	}
	if want := slot.Add(time.Hour); !got.Wake.Equal(want) {
		t.Errorf("wake %s, want the next slot %s", got.Wake, want)
	}
}

func TestTheStatusWriteWaitsForTheNextPassOnlyWhenNothingButJobsWasDecided(t *testing.T) {
	fresh := plan.Decide(plan.Input{Task: task(), Now: now})
	if !fresh.RecordLater(1) {
		t.Error("a pass that created the initial Job should leave the status write to the next pass")
	}
	if fresh.RecordLater(0) {
		t.Error("a pass that created nothing must write the status")
	}
	deleted := plan.Decide(plan.Input{Task: task(), DeletedJobs: 1, Now: now,
		Runs: []runs.Run{testutil.MakeRun("0").Failed(now, now, v1alpha1.AttemptJobDeleted, "deleted").Obj()}})
	if deleted.RecordLater(1) {
		t.Error("a deleted Job is known only to this pass: its status write must not wait")
	}
	expired := plan.Decide(plan.Input{Task: task(testutil.TTL(0)), Now: now,
		Runs: []runs.Run{testutil.MakeRun("0").Succeeded(ago(time.Minute), ago(time.Minute)).Obj()}})
	if !expired.Expire || expired.RecordLater(1) {
		t.Error("an expiring Task must write its status before it is deleted")
	}
}

func TestDecideLeavesItsInputAsItIs(t *testing.T) {
	rs := []runs.Run{testutil.MakeRun("0").Active(ago(301 * time.Second)).Obj()}
	in := plan.Input{Task: task(), Runs: rs, Now: now,
		Pods: map[string][]retry.PodStart{"t-0-1": {{Name: "p", Created: ago(301 * time.Second)}}}}
	if got := plan.Decide(in); len(got.Stop) != 1 {
		t.Fatalf("stop %+v, want the stuck attempt stopped", got.Stop)
	}
	if rs[0].Latest().Phase != runs.Active {
		t.Error("Decide changed the observed runs")
	}
}

func TestACancelTokenStopsEveryUnfinishedRun(t *testing.T) {
	const cancel = "batch.taskops.io/cancel"
	seen := v1alpha1.TaskStatus{ObservedGeneration: 1}
	running := testutil.MakeRun("0").Started(ago(time.Minute)).Obj()
	backoff := testutil.MakeRun(runs.RunNowID("a")).Failed(ago(time.Minute), ago(time.Second), v1alpha1.AttemptPodFailed, "exit 3").Obj()
	done := testutil.MakeRun(runs.RunNowID("b")).Succeeded(ago(time.Hour), ago(time.Hour)).Obj()
	stop := func(id string) plan.Stop {
		return plan.Stop{RunID: id, Attempt: 1, Reason: v1alpha1.AttemptCancelled, Message: "a new batch.taskops.io/cancel token"}
	}
	tests := []struct {
		name string
		in   plan.Input
		want plan.Plan
	}{
		{
			name: "a running run and one waiting out its backoff are stopped; a finished one is left",
			in: plan.Input{Task: task(testutil.Concurrency(v1alpha1.AllowConcurrent), testutil.Annotation(cancel, "c1"), testutil.Status(seen)),
				Runs: []runs.Run{done, running, backoff}},
			// Two cancelled runs, one over failedRunsHistoryLimit (1): pruned
			// once the status records them.
			want: plan.Plan{Stop: []plan.Stop{stop("0"), stop(runs.RunNowID("a"))}, CancelToken: runs.TokenHash("c1"), Wake: now.Add(time.Second)},
		},
		{
			name: "a token already consumed does nothing",
			in: plan.Input{Task: task(testutil.Annotation(cancel, "c1"),
				testutil.Status(v1alpha1.TaskStatus{ObservedGeneration: 1, LastCancelToken: runs.TokenHash("c1")})),
				Runs: []runs.Run{running}},
			want: plan.Plan{},
		},
		{
			name: "a token present at creation is only recorded",
			in:   plan.Input{Task: task(testutil.Annotation(cancel, "c1"))},
			want: plan.Plan{Start: []plan.Start{{RunID: runs.OneShot, Attempt: 1}}, CancelToken: runs.TokenHash("c1")},
		},
		{
			name: "a token a Job was made under (present at creation, the status write lost) is only recorded",
			in: plan.Input{Task: task(testutil.Annotation(cancel, "c1")), Runs: []runs.Run{func() runs.Run {
				r := testutil.MakeRun("0").Started(ago(time.Minute)).Obj()
				r.Attempts[0].CancelToken = runs.TokenHash("c1")
				return r
			}()}},
			want: plan.Plan{CancelToken: runs.TokenHash("c1")},
		},
		{
			name: "a token set after the first Job, before the first status write, stops it",
			in:   plan.Input{Task: task(testutil.Annotation(cancel, "c1")), Runs: []runs.Run{running}},
			want: plan.Plan{Stop: []plan.Stop{stop("0")}, CancelToken: runs.TokenHash("c1")},
		},
		{
			name: "a token a stopped Job records (a lost status write) is only recorded",
			in: plan.Input{Task: task(testutil.Annotation(cancel, "c1"), testutil.Status(seen)), Runs: []runs.Run{func() runs.Run {
				r := testutil.MakeRun("0").Stopped(ago(time.Minute), ago(time.Second), v1alpha1.AttemptCancelled, "x").Obj()
				r.Latest().CancelToken = runs.TokenHash("c1")
				return r
			}()}},
			want: plan.Plan{CancelToken: runs.TokenHash("c1")},
		},
		{
			name: "a cancel and a run-now in the same pass: the run is cancelled, then the new one starts (Forbid)",
			in: plan.Input{Task: task(testutil.Annotation(cancel, "c1"), testutil.Annotation("batch.taskops.io/run-now", "r1"), testutil.Status(seen)),
				Runs: []runs.Run{running}},
			want: plan.Plan{Stop: []plan.Stop{stop("0")}, CancelToken: runs.TokenHash("c1"),
				Start: []plan.Start{{RunID: runs.RunNowID("r1"), Attempt: 1}}, RunNowToken: runs.TokenHash("r1")},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = now
			got := plan.Decide(tt.in)
			got.Schedule = tt.want.Schedule
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAFailedHTTPAttemptsRetryAfterIsKeptAndSetsTheNextAttempt(t *testing.T) {
	run := testutil.MakeRun("0").Failed(ago(time.Minute), ago(time.Second), v1alpha1.AttemptPodFailed, "503").Obj()
	got := plan.Decide(plan.Input{Task: task(testutil.HTTP("https://example.com/hook")), Runs: []runs.Run{run}, Now: now,
		RetryAfter: map[string]int64{"t-0-1": 45}})
	if diff := cmp.Diff(map[string]int64{"t-0-1": 45}, got.RecordRetryAfter); diff != "" {
		t.Errorf("RecordRetryAfter (-want +got):\n%s", diff)
	}
	if want := ago(time.Second).Add(45 * time.Second); !got.Wake.Equal(want) || len(got.Start) != 0 {
		t.Errorf("wake %s, start %v; want the retry at %s (the server's 45 s, not the 10 s backoff)", got.Wake, got.Start, want)
	}
}

func TestAnAttemptWaitingForCapacityWaitsUntilItsCapacityTimeout(t *testing.T) {
	pods := map[string][]retry.PodStart{"t-0-1": {{Name: "p", Created: ago(10 * time.Minute), WaitingReason: "Unschedulable", WaitingMessage: "0/1 nodes are available"}}}
	run := testutil.MakeRun("0").Active(ago(10 * time.Minute)).Obj()

	got := plan.Decide(plan.Input{Task: task(), Runs: []runs.Run{run}, Pods: pods, Now: now})
	if len(got.Stop) != 0 || got.Waiting["t-0-1"] != "pod p is Unschedulable: 0/1 nodes are available" {
		t.Fatalf("without capacityTimeoutSeconds: stop %+v, waiting %v; want no stop, the cause", got.Stop, got.Waiting)
	}
	if want := now.Add(300 * time.Second); !got.Wake.Equal(want) {
		t.Errorf("wake %s, want a look a start timeout later, %s", got.Wake, want)
	}

	withTimeout := func(secs int32) *v1alpha1.Task {
		return task(func(t *v1alpha1.Task) { t.Spec.CapacityTimeoutSeconds = &secs })
	}
	got = plan.Decide(plan.Input{Task: withTimeout(900), Runs: []runs.Run{run}, Pods: pods, Now: now})
	if len(got.Stop) != 0 || !got.Wake.Equal(ago(10*time.Minute).Add(900*time.Second)) {
		t.Errorf("within capacityTimeoutSeconds: stop %+v, wake %s", got.Stop, got.Wake)
	}
	got = plan.Decide(plan.Input{Task: withTimeout(600), Runs: []runs.Run{run}, Pods: pods, Now: now})
	if len(got.Stop) != 1 || got.Stop[0].Reason != v1alpha1.AttemptCapacityTimeout {
		t.Fatalf("past capacityTimeoutSeconds: stop %+v, want CapacityTimeout", got.Stop)
	}
	if want := now.Truncate(time.Second).Add(10 * time.Second); !got.Wake.Equal(want) {
		t.Errorf("after a CapacityTimeout the retry waits its backoff: wake %s, want %s", got.Wake, want)
	}
}

// A capacity timeout shorter than the start timeout fires at its own
// time: the pods are first looked at then, not at the start timeout.
func TestACapacityTimeoutShorterThanTheStartTimeoutFiresAtItsOwnTime(t *testing.T) {
	short := task(func(t *v1alpha1.Task) {
		t.Spec.CapacityTimeoutSeconds = ptr.To[int32](10)
		t.Spec.StartTimeoutSeconds = ptr.To[int32](60)
	})
	run := testutil.MakeRun("0").Active(ago(5 * time.Second)).Obj()
	got := plan.Decide(plan.Input{Task: short, Runs: []runs.Run{run}, Now: now})
	if want := ago(5 * time.Second).Add(10 * time.Second); len(got.Stop) != 0 || !got.Wake.Equal(want) {
		t.Fatalf("5 s in: stop %+v, wake %s; want the first look at the capacity timeout, %s", got.Stop, got.Wake, want)
	}
	run = testutil.MakeRun("0").Active(ago(12 * time.Second)).Obj()
	pods := map[string][]retry.PodStart{"t-0-1": {{Name: "p", Created: ago(12 * time.Second), WaitingReason: "Unschedulable"}}}
	got = plan.Decide(plan.Input{Task: short, Runs: []runs.Run{run}, Pods: pods, Now: now})
	if len(got.Stop) != 1 || got.Stop[0].Reason != v1alpha1.AttemptCapacityTimeout {
		t.Fatalf("12 s in, Unschedulable: stop %+v, want CapacityTimeout (the start timeout is 60 s)", got.Stop)
	}
}

// An attempt is stopped at its activeDeadlineSeconds by the operator, with
// what its pods printed kept on its Job first; before it, the pass wakes at
// the deadline.
func TestAnAttemptIsStoppedAtItsDeadlineAfterItsOutputIsKept(t *testing.T) {
	bounded := task(testutil.ActiveDeadline(30))
	run := testutil.MakeRun("0").Active(ago(10 * time.Second)).Obj()
	got := plan.Decide(plan.Input{Task: bounded, Runs: []runs.Run{run}, Now: now})
	if want := ago(10 * time.Second).Add(30 * time.Second); len(got.Stop) != 0 || !got.Wake.Equal(want) {
		t.Fatalf("before the deadline: stop %+v, wake %s; want none and a wake at %s", got.Stop, got.Wake, want)
	}
	run = testutil.MakeRun("0").Active(ago(31 * time.Second)).Obj()
	got = plan.Decide(plan.Input{Task: bounded, Runs: []runs.Run{run}, Now: now, Captured: map[string]string{"t-0-1": "step 1 of 2 done"}})
	if len(got.Stop) != 1 || got.Stop[0].Reason != v1alpha1.AttemptDeadlineExceeded || got.Stop[0].Message != plan.DeadlineMessage {
		t.Fatalf("past the deadline: stop %+v, want DeadlineExceeded", got.Stop)
	}
	if got.Capture["t-0-1"] != "step 1 of 2 done" {
		t.Fatalf("capture %v: what the pods printed is not kept", got.Capture)
	}
}

// A Job Kueue held runs no deadline clock: an attempt admitted after a
// long wait is not stopped before the Job controller records its start,
// and its deadline then counts from that start.
func TestAKueueAttemptsDeadlineCountsFromItsAdmission(t *testing.T) {
	kueued := task(testutil.ActiveDeadline(30), testutil.Label(v1alpha1.LabelKueueQueueName, "team"))
	run := testutil.MakeRun("0").Started(ago(time.Hour)).Obj()
	got := plan.Decide(plan.Input{Task: kueued, Runs: []runs.Run{run}, Now: now})
	if len(got.Stop) != 0 {
		t.Fatalf("admitted, its start not recorded yet: stop %+v, want none", got.Stop)
	}
	run.Latest().Resumed = ago(10 * time.Second)
	got = plan.Decide(plan.Input{Task: kueued, Runs: []runs.Run{run}, Now: now})
	if want := ago(10 * time.Second).Add(30 * time.Second); len(got.Stop) != 0 || !got.Wake.Equal(want) {
		t.Fatalf("10 s after its start: stop %+v, wake %s; want none and a wake at %s", got.Stop, got.Wake, want)
	}
	run.Latest().Resumed = ago(31 * time.Second)
	got = plan.Decide(plan.Input{Task: kueued, Runs: []runs.Run{run}, Now: now})
	if len(got.Stop) != 1 || got.Stop[0].Reason != v1alpha1.AttemptDeadlineExceeded {
		t.Fatalf("31 s after its start: stop %+v, want DeadlineExceeded", got.Stop)
	}
}

// An attempt a worker cluster runs (MultiKueue) has no pods here: it is
// never "no pod was created"; its start timeout counts from the start the
// worker mirrors back, and only the mirrored counts make it stuck, with
// the worker named.
func TestARemoteAttemptsStartIsJudgedFromItsMirroredStatus(t *testing.T) {
	dispatched := task(testutil.StartTimeout(60), testutil.Label(v1alpha1.LabelKueueQueueName, "team"),
		testutil.Label(v1alpha1.LabelDispatch, v1alpha1.DispatchMultiKueue))
	run := testutil.MakeRun("0").Started(ago(time.Hour)).Obj()
	a := run.Latest()
	a.Remote, a.PodsStarted = true, false
	got := plan.Decide(plan.Input{Task: dispatched, Runs: []runs.Run{run}, Now: now})
	if len(got.Stop) != 0 {
		t.Fatalf("admitted an hour ago, no start mirrored yet: stop %+v, want none", got.Stop)
	}
	a.Resumed = ago(10 * time.Second)
	got = plan.Decide(plan.Input{Task: dispatched, Runs: []runs.Run{run}, Now: now})
	if want := ago(10 * time.Second).Add(time.Minute); len(got.Stop) != 0 || !got.Wake.Equal(want) {
		t.Fatalf("started on the worker 10 s ago: stop %+v, wake %s; want none and a wake at %s", got.Stop, got.Wake, want)
	}
	a.Resumed = ago(61 * time.Second)
	got = plan.Decide(plan.Input{Task: dispatched, Runs: []runs.Run{run}, Now: now,
		Remote: map[string]retry.RemotePods{a.JobName: {Cluster: "worker-2", Active: 1}}})
	if len(got.Stop) != 1 || got.Stop[0].Reason != v1alpha1.AttemptStartTimeout || !strings.Contains(got.Stop[0].Message, "worker cluster worker-2 (1 active, 0 ready") {
		t.Fatalf("61 s after its start, not ready: stop %+v, want StartTimeout naming worker-2", got.Stop)
	}
	a.PodsStarted = true
	if got = plan.Decide(plan.Input{Task: dispatched, Runs: []runs.Run{run}, Now: now}); len(got.Stop) != 0 {
		t.Fatalf("its pods started on the worker: stop %+v, want none", got.Stop)
	}
}

// Under Allow a queued Task's backfill starts no more slots than the Task
// may hold places in its queue's line: one more would be dropped as missed.
func TestAQueuedBackfillNeverOverflowsTheLine(t *testing.T) {
	got := plan.Decide(plan.Input{Now: now, Queue: &plan.Queue{Name: "q", Found: true},
		Task: task(testutil.Schedule("*/5 * * * *"), testutil.Concurrency(v1alpha1.AllowConcurrent), testutil.Queue("q"),
			testutil.Annotation(v1alpha1.AnnotationBackfill, "b2"),
			testutil.Annotation(v1alpha1.AnnotationBackfillRange, "2026-01-01T07:00:00Z/2026-01-01T09:00:00Z"),
			testutil.Status(v1alpha1.TaskStatus{ObservedGeneration: 1, LastScheduleTime: status.Time(hour(10))}))})
	bf := got.Backfill
	if len(got.Queued) != plan.MaxQueued || len(got.QueuedMissed) != 0 || bf == nil || bf.Total != 25 || bf.Started != int32(plan.MaxQueued) ||
		!bf.Cursor.Time.Equal(hour(7).Add(45*time.Minute)) {
		t.Fatalf("queued %d, missed %d, backfill %+v; want %d queued, none missed, the cursor at 07:45", len(got.Queued), len(got.QueuedMissed), bf, plan.MaxQueued)
	}
}
