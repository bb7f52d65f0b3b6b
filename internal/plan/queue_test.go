package plan_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

func queue(admitted ...string) *plan.Queue {
	return &plan.Queue{Name: "team", Found: true, Admitted: admitted}
}

func queued(tk *v1alpha1.Task, runID string, attempt int32, since time.Time, slot *time.Time) v1alpha1.QueuedAttempt {
	q := v1alpha1.QueuedAttempt{RunID: runID, Attempt: attempt, JobName: jobs.Name(tk, runID, attempt), Since: metav1.NewMicroTime(since)}
	if slot != nil {
		q.ScheduledTime = &metav1.Time{Time: *slot}
	}
	return q
}

func TestAQueuedTaskStartsOnlyWhatItsQueueAdmitted(t *testing.T) {
	tk := task(testutil.Queue("team"))
	first := jobs.Name(tk, runs.OneShot, 1)

	p := plan.Decide(plan.Input{Task: tk, Queue: queue(), Now: now})
	if len(p.Start) != 0 || len(p.Queued) != 1 || p.Queued[0].JobName != first || !p.Queued[0].Since.Time.Equal(now) {
		t.Fatalf("not admitted: start %v, queued %+v", p.Start, p.Queued)
	}

	// The next pass keeps the time it first waited: its place in the line.
	tk.Status.Queued = p.Queued
	later := plan.Decide(plan.Input{Task: tk, Queue: queue(), Now: now.Add(time.Minute)})
	if len(later.Queued) != 1 || !later.Queued[0].Since.Time.Equal(now) {
		t.Fatalf("still waiting: queued %+v", later.Queued)
	}

	admitted := plan.Decide(plan.Input{Task: tk, Queue: queue(first), Now: now.Add(time.Minute)})
	if len(admitted.Start) != 1 || admitted.Start[0].RunID != runs.OneShot || len(admitted.Queued) != 0 {
		t.Fatalf("admitted: start %v, queued %+v", admitted.Start, admitted.Queued)
	}
}

func TestAMissingOrSuspendedQueueAdmitsNothingAndSaysWhy(t *testing.T) {
	tk := task(testutil.Queue("team"))
	for _, q := range []*plan.Queue{{Name: "team"}, {Name: "team", Found: true, Suspended: true}} {
		p := plan.Decide(plan.Input{Task: tk, Queue: q, Now: now})
		if len(p.Start) != 0 || len(p.Queued) != 1 {
			t.Fatalf("%+v: start %v, queued %+v", q, p.Start, p.Queued)
		}
	}
	if r, _ := (&plan.Queue{Name: "team"}).Problem(); r != v1alpha1.ReasonQueueNotFound {
		t.Fatalf("missing queue: reason %q", r)
	}
	if r, _ := (&plan.Queue{Name: "team", Found: true, Suspended: true}).Problem(); r != v1alpha1.ReasonQueueSuspended {
		t.Fatalf("suspended queue: reason %q", r)
	}
}

func TestARetryWaitingOutItsBackoffHoldsNoPlaceAndQueuesWhenDue(t *testing.T) {
	tk := task(testutil.Queue("team"))
	failed := testutil.MakeRun("0").Failed(ago(20*time.Second), ago(5*time.Second), v1alpha1.AttemptPodFailed, "exit 3").Obj()

	p := plan.Decide(plan.Input{Task: tk, Runs: []runs.Run{failed}, Queue: queue(), Now: now})
	if len(p.Queued) != 0 || len(p.Start) != 0 || !p.Wake.Equal(ago(5*time.Second).Add(10*time.Second)) {
		t.Fatalf("in backoff: queued %+v, start %v, wake %v", p.Queued, p.Start, p.Wake)
	}
	due := plan.Decide(plan.Input{Task: tk, Runs: []runs.Run{failed}, Queue: queue(), Now: now.Add(10 * time.Second)})
	if len(due.Queued) != 1 || due.Queued[0].Attempt != 2 || len(due.Start) != 0 {
		t.Fatalf("retry due: queued %+v, start %v", due.Queued, due.Start)
	}
}

func TestAQueuedCronSlotPastItsStartingDeadlineIsSkippedAndCountedAsMissed(t *testing.T) {
	tk := task(testutil.Queue("team"), testutil.Schedule("*/5 * * * *"), testutil.StartingDeadline(60))
	tk.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	slot := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	tk.Status = v1alpha1.TaskStatus{ObservedGeneration: 1, LastScheduleTime: &metav1.Time{Time: slot},
		Queued: []v1alpha1.QueuedAttempt{queued(tk, runs.ScheduledID(slot), 1, slot, &slot)}}

	within := plan.Decide(plan.Input{Task: tk, Queue: queue(), Now: slot.Add(60 * time.Second)})
	if len(within.Queued) != 1 || len(within.QueuedMissed) != 0 || !within.Wake.Equal(slot.Add(61*time.Second)) {
		t.Fatalf("within its deadline: queued %+v, missed %+v, wake %v", within.Queued, within.QueuedMissed, within.Wake)
	}
	past := plan.Decide(plan.Input{Task: tk, Queue: queue(runs.ScheduledID(slot)), Now: slot.Add(61 * time.Second)})
	if len(past.Queued) != 0 || len(past.Start) != 0 || len(past.QueuedMissed) != 1 {
		t.Fatalf("past its deadline: queued %+v, start %v, missed %+v", past.Queued, past.Start, past.QueuedMissed)
	}
}

func TestForbidSkipsASlotWhileTheTasksRunIsStillQueued(t *testing.T) {
	tk := task(testutil.Queue("team"), testutil.Schedule("*/5 * * * *"))
	tk.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	slot := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	next := slot.Add(5 * time.Minute)
	tk.Status = v1alpha1.TaskStatus{ObservedGeneration: 1, LastScheduleTime: &metav1.Time{Time: slot},
		Queued: []v1alpha1.QueuedAttempt{queued(tk, runs.ScheduledID(slot), 1, slot, &slot)}}

	p := plan.Decide(plan.Input{Task: tk, Queue: queue(), Now: next})
	if len(p.Queued) != 1 || p.Queued[0].RunID != runs.ScheduledID(slot) || p.Schedule.SkippedSlot == "" {
		t.Fatalf("queued %+v, skipped %q", p.Queued, p.Schedule.SkippedSlot)
	}
}

func TestACancelEndsAQueuedRunThatNeverHadAJob(t *testing.T) {
	tk := task(testutil.Queue("team"), testutil.Annotation(v1alpha1.AnnotationCancel, "c1"))
	tk.Status = v1alpha1.TaskStatus{ObservedGeneration: 1, Queued: []v1alpha1.QueuedAttempt{queued(tk, runs.OneShot, 1, now, nil)}}

	p := plan.Decide(plan.Input{Task: tk, Queue: queue(), Now: now})
	if len(p.Queued) != 0 || len(p.Start) != 0 || len(p.Dropped) != 1 || p.Dropped[0].Result != v1alpha1.RunResultCancelled {
		t.Fatalf("queued %+v, start %v, dropped %+v", p.Queued, p.Start, p.Dropped)
	}
}

func TestASuspendedTaskKeepsItsPlaceButAsksForNoAdmission(t *testing.T) {
	tk := task(testutil.Queue("team"), testutil.Suspend(true))
	tk.Status = v1alpha1.TaskStatus{ObservedGeneration: 1, Queued: []v1alpha1.QueuedAttempt{queued(tk, runs.OneShot, 1, ago(time.Hour), nil)}}

	p := plan.Decide(plan.Input{Task: tk, Queue: queue(jobs.Name(tk, runs.OneShot, 1)), Now: now})
	if len(p.Start) != 0 || len(p.Queued) != 1 || !p.Queued[0].Since.Time.Equal(ago(time.Hour)) {
		t.Fatalf("start %v, queued %+v", p.Start, p.Queued)
	}
}

// A run-now run is exempt from suspend, queued or not: on a suspended Task
// it waits for admission and starts when admitted (it waited for ever).
func TestARunNowRunOfASuspendedQueuedTaskStartsWhenAdmitted(t *testing.T) {
	run := runs.RunNowID("ci-7")
	tk := task(testutil.Queue("team"), testutil.Suspend(true))
	tk.Status = v1alpha1.TaskStatus{ObservedGeneration: 1, LastRunNowToken: runs.TokenHash("ci-7"),
		Queued: []v1alpha1.QueuedAttempt{queued(tk, run, 1, ago(time.Minute), nil)}}

	waiting := plan.Decide(plan.Input{Task: tk, Queue: queue(), Now: now})
	if len(waiting.Start) != 0 || len(waiting.Queued) != 1 || waiting.Queued[0].RunID != run {
		t.Fatalf("not admitted yet: start %v, queued %+v", waiting.Start, waiting.Queued)
	}
	admitted := plan.Decide(plan.Input{Task: tk, Queue: queue(jobs.Name(tk, run, 1)), Now: now})
	if len(admitted.Start) != 1 || admitted.Start[0].RunID != run || len(admitted.Queued) != 0 {
		t.Fatalf("admitted: start %v, queued %+v", admitted.Start, admitted.Queued)
	}
}

func TestAnInitialRunQueuesInTheOrderItsTaskWasCreatedAndACronRunByItsSlot(t *testing.T) {
	created := ago(time.Hour).Truncate(time.Second)
	tk := task(testutil.Queue("team"))
	tk.CreationTimestamp = metav1.NewTime(created)
	late := plan.Decide(plan.Input{Task: tk, Queue: queue(), Now: now})
	if want := created.Add(time.Second - time.Microsecond); !late.Queued[0].Since.Time.Equal(want) {
		t.Fatalf("a pass an hour late: since %v, want %v (the end of its creation second)", late.Queued[0].Since, want)
	}
	tk.CreationTimestamp = metav1.NewTime(now.Truncate(time.Second))
	timely := plan.Decide(plan.Input{Task: tk, Queue: queue(), Now: now})
	if !timely.Queued[0].Since.Time.Equal(now) {
		t.Fatalf("a pass within the creation second: since %v, want the pass's time %v", timely.Queued[0].Since, now)
	}

	cron := task(testutil.Queue("team"), testutil.Schedule("*/5 * * * *"))
	cron.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	cron.Status.ObservedGeneration = 1
	p := plan.Decide(plan.Input{Task: cron, Queue: queue(), Now: now})
	if len(p.Queued) != 1 || !p.Queued[0].Since.Time.Equal(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("cron: queued %+v, want since the slot", p.Queued)
	}
}
