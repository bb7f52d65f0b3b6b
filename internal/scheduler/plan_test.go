package scheduler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

var (
	created = time.Date(2026, 11, 29, 11, 30, 10, 0, time.UTC)
	noon    = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
)

// task builds a Task for the planner (testutil.NewTask); opts change it.
func task(opts ...testutil.TaskOpt) *v1alpha1.Task {
	base := []testutil.TaskOpt{testutil.Generation(1), testutil.Concurrency(v1alpha1.ForbidConcurrent),
		testutil.Status(v1alpha1.TaskStatus{ObservedGeneration: 1}),
		func(t *v1alpha1.Task) { t.CreationTimestamp = metav1.NewTime(created) }}
	return testutil.NewTask("", "t", append(base, opts...)...)
}

func lastSchedule(at time.Time) testutil.TaskOpt {
	return func(t *v1alpha1.Task) { t.Status.LastScheduleTime = ptr.To(metav1.NewTime(at)) }
}
func neverReconciled(t *v1alpha1.Task) {
	t.Status.ObservedGeneration = 0
}
func edited(t *v1alpha1.Task) { t.Generation = 2 }
func runNow(token string) testutil.TaskOpt {
	return testutil.Annotation(v1alpha1.AnnotationRunNow, token)
}
func consumed(token string) testutil.TaskOpt {
	return func(t *v1alpha1.Task) { t.Status.LastRunNowToken = runs.TokenHash(token) }
}

func known(ids ...string) map[string]bool {
	m := map[string]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// manyActive is n active runs.
func manyActive(n int) []RunState {
	out := make([]RunState, n)
	for i := range out {
		out[i] = RunState{ID: runs.ScheduledID(created.Add(time.Duration(i) * time.Second)), Active: true}
	}
	return out
}

func slot(t time.Time) NewRun { return NewRun{ID: runs.ScheduledID(t), Scheduled: &t} }

func TestPlanRuns(t *testing.T) {
	noonSlot, halfPast := noon, time.Date(2026, 11, 29, 11, 30, 0, 0, time.UTC)
	cases := []struct {
		name     string
		task     *v1alpha1.Task
		known    map[string]bool
		runs     []RunState
		consumed map[string]bool
		now      time.Time
		want     Plan // Slots is checked apart
	}{
		{
			name: "a new one-shot Task starts its initial run",
			task: task(neverReconciled), now: noon,
			want: Plan{Start: []NewRun{{ID: "0"}}},
		},
		{
			name: "a one-shot Task whose initial run is known starts nothing",
			task: task(), known: known("0"), now: noon,
		},
		{
			name: "a suspended one-shot Task does not start its initial run",
			task: task(neverReconciled, testutil.Suspend(true)), now: noon,
		},
		{
			name: "a run-now token present at creation is recorded without a run",
			task: task(neverReconciled, runNow("a")), now: noon,
			want: Plan{Start: []NewRun{{ID: "0"}}, RunNowToken: runs.TokenHash("a")},
		},
		{
			name: "a new run-now token starts one run",
			task: task(runNow("b"), consumed("a")), known: known("0"), now: noon,
			want: Plan{Start: []NewRun{{ID: runs.RunNowID("b")}}, RunNowToken: runs.TokenHash("b")},
		},
		{
			name: "a consumed run-now token starts nothing",
			task: task(runNow("b"), consumed("b")), known: known("0", runs.RunNowID("b")), now: noon,
		},
		{
			name: "a run-now run that exists but was not recorded is recorded without a second run",
			task: task(runNow("b"), consumed("a")), known: known("0", runs.RunNowID("b")), now: noon,
			want: Plan{RunNowToken: runs.TokenHash("b")},
		},
		{
			name: "a token set after the first Job but before the first status write starts a run",
			task: task(neverReconciled, runNow("c")), known: known("0"), runs: []RunState{{ID: "0"}}, now: noon,
			want: Plan{Start: []NewRun{{ID: runs.RunNowID("c")}}, RunNowToken: runs.TokenHash("c")},
		},
		{
			name: "a token a Job records as consumed starts nothing",
			task: task(neverReconciled, runNow("c")), known: known("0"), runs: []RunState{{ID: "0"}},
			consumed: map[string]bool{runs.TokenHash("c"): true}, now: noon,
			want: Plan{RunNowToken: runs.TokenHash("c")},
		},
		{
			name: "a run-now token waits for the active run under Forbid",
			task: task(runNow("b")), known: known("0"), runs: []RunState{{ID: "0", Active: true}}, now: noon,
			want: Plan{RunNowWaiting: true},
		},
		{
			name: "a run-now token stops the active run under Replace",
			task: task(runNow("b"), testutil.Concurrency(v1alpha1.ReplaceConcurrent)), known: known("0"), runs: []RunState{{ID: "0", Active: true}}, now: noon,
			want: Plan{Start: []NewRun{{ID: runs.RunNowID("b")}}, Replace: []string{"0"}, RunNowToken: runs.TokenHash("b")},
		},
		{
			name: "a run-now token overlaps the active run under Allow",
			task: task(runNow("b"), testutil.Concurrency(v1alpha1.AllowConcurrent)), known: known("0"), runs: []RunState{{ID: "0", Active: true}}, now: noon,
			want: Plan{Start: []NewRun{{ID: runs.RunNowID("b")}}, RunNowToken: runs.TokenHash("b")},
		},
		{
			name: "a run-now token runs while the Task is suspended",
			task: task(runNow("b"), testutil.Suspend(true)), known: known("0"), runs: []RunState{{ID: "0", Active: false}}, now: noon,
			want: Plan{Start: []NewRun{{ID: runs.RunNowID("b")}}, RunNowToken: runs.TokenHash("b")},
		},
		{
			name: "a cron Task that never ran starts the slot due since its creation",
			task: task(testutil.Schedule("*/30 * * * *"), neverReconciled), now: noon.Add(2 * time.Second),
			want: Plan{Start: []NewRun{slot(noonSlot)}},
		},
		{
			name: "a cron Task never starts its initial one-shot run",
			task: task(testutil.Schedule("0 0 1 1 *"), neverReconciled), now: noon,
		},
		{
			name: "a cron Task whose last slot ran starts nothing before the next slot",
			task: task(testutil.Schedule("*/30 * * * *"), lastSchedule(noonSlot)), known: known(runs.ScheduledID(noonSlot)), now: noon.Add(29 * time.Minute),
		},
		{
			name: "a slot already started by a lost pass is not started again",
			task: task(testutil.Schedule("*/30 * * * *"), lastSchedule(halfPast)), known: known(runs.ScheduledID(noonSlot)), now: noon.Add(time.Second),
		},
		{
			name: "after downtime only the newest missed slot starts",
			task: task(testutil.Schedule("*/30 * * * *"), lastSchedule(halfPast.Add(-5*time.Hour))), now: noon.Add(time.Minute),
			want: Plan{Start: []NewRun{slot(noonSlot)}},
		},
		{
			name: "a slot past its starting deadline is skipped",
			task: task(testutil.Schedule("*/30 * * * *"), lastSchedule(halfPast), testutil.StartingDeadline(30)), now: noon.Add(time.Minute),
			want: Plan{SkippedSlot: SkipTooLate},
		},
		{
			name: "a slot within its starting deadline starts",
			task: task(testutil.Schedule("*/30 * * * *"), lastSchedule(halfPast), testutil.StartingDeadline(120)), now: noon.Add(time.Minute),
			want: Plan{Start: []NewRun{slot(noonSlot)}},
		},
		{
			name: "a slot is skipped while a run is active under Forbid",
			task: task(testutil.Schedule("*/30 * * * *"), lastSchedule(halfPast)), known: known(runs.ScheduledID(halfPast)),
			runs: []RunState{{ID: runs.ScheduledID(halfPast), Active: true}}, now: noon,
			want: Plan{SkippedSlot: SkipForbidden},
		},
		{
			name: "a slot is skipped under Allow while MaxActiveRuns runs are active",
			task: task(testutil.Schedule("*/30 * * * *"), lastSchedule(halfPast), testutil.Concurrency(v1alpha1.AllowConcurrent)),
			runs: manyActive(MaxActiveRuns), now: noon,
			want: Plan{SkippedSlot: SkipTooManyActive},
		},
		{
			name: "a slot starts under Allow while fewer than MaxActiveRuns runs are active",
			task: task(testutil.Schedule("*/30 * * * *"), lastSchedule(halfPast), testutil.Concurrency(v1alpha1.AllowConcurrent)),
			runs: manyActive(MaxActiveRuns - 1), now: noon,
			want: Plan{Start: []NewRun{slot(noonSlot)}},
		},
		{
			name: "a paused run does not count as active under Forbid",
			task: task(testutil.Schedule("*/30 * * * *"), lastSchedule(halfPast)), known: known(runs.ScheduledID(halfPast)),
			runs: []RunState{{ID: runs.ScheduledID(halfPast), Active: false}}, now: noon,
			want: Plan{Start: []NewRun{slot(noonSlot)}},
		},
		{
			name: "a slot stops the active run under Replace",
			task: task(testutil.Schedule("*/30 * * * *"), lastSchedule(halfPast), testutil.Concurrency(v1alpha1.ReplaceConcurrent)), known: known(runs.ScheduledID(halfPast)),
			runs: []RunState{{ID: runs.ScheduledID(halfPast), Active: true}}, now: noon,
			want: Plan{Start: []NewRun{slot(noonSlot)}, Replace: []string{runs.ScheduledID(halfPast)}},
		},
		{
			name: "a slot overlaps the active run under Allow",
			task: task(testutil.Schedule("*/30 * * * *"), lastSchedule(halfPast), testutil.Concurrency(v1alpha1.AllowConcurrent)), known: known(runs.ScheduledID(halfPast)),
			runs: []RunState{{ID: runs.ScheduledID(halfPast), Active: true}}, now: noon,
			want: Plan{Start: []NewRun{slot(noonSlot)}},
		},
		{
			name: "a suspended cron Task skips its slot",
			task: task(testutil.Schedule("*/30 * * * *"), lastSchedule(halfPast), testutil.Suspend(true)), now: noon,
			want: Plan{SkippedSlot: SkipSuspended},
		},
		{
			name: "a slot that fell due before a spec edit was seen is skipped",
			task: task(testutil.Schedule("*/30 * * * *"), lastSchedule(halfPast), edited), now: noon.Add(time.Minute),
			want: Plan{SkippedSlot: SkipEdited},
		},
		{
			name: "a clock that went backwards starts nothing",
			task: task(testutil.Schedule("*/30 * * * *"), lastSchedule(noonSlot)), known: known(runs.ScheduledID(noonSlot)), now: noon.Add(-time.Hour),
		},
		{
			name: "an @every schedule starts its first slot one period after creation",
			task: task(testutil.Schedule("@every 10m"), neverReconciled), now: created.Add(10 * time.Minute),
			want: Plan{Start: []NewRun{slot(created.Add(10 * time.Minute))}},
		},
		{
			name: "a cron Task takes run-now and its slot in one pass under Allow",
			task: task(testutil.Schedule("*/30 * * * *"), lastSchedule(halfPast), runNow("x"), testutil.Concurrency(v1alpha1.AllowConcurrent)), now: noon,
			want: Plan{Start: []NewRun{slot(noonSlot), {ID: runs.RunNowID("x")}}, RunNowToken: runs.TokenHash("x")},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := Input{Task: c.task, Known: c.known, Runs: c.runs, ConsumedTokens: c.consumed, Now: c.now}
			if in.Known == nil {
				in.Known = map[string]bool{}
			}
			if c.task.Spec.Schedule != nil {
				s, err := Parse(*c.task.Spec.Schedule, "")
				if err != nil {
					t.Fatal(err)
				}
				in.Schedule = s
			}
			got := PlanRuns(in)
			if in.Schedule != nil && got.Slots == nil {
				t.Fatal("a cron Task's plan has no slots")
			}
			got.Slots = nil
			if diff := cmp.Diff(normalize(c.want), normalize(got)); diff != "" {
				t.Fatalf("PlanRuns() (-want +got):\n%s", diff)
			}
		})
	}
}

// normalize makes times comparable with DeepEqual (zones differ).
func normalize(p Plan) Plan {
	for i, r := range p.Start {
		if r.Scheduled != nil {
			u := r.Scheduled.UTC()
			p.Start[i].Scheduled = &u
		}
	}
	return p
}
