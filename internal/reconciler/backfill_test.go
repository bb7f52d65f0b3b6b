package reconciler_test

import (
	"testing"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

// A backfill of the slots of a past range under Forbid: one run after the
// other, oldest first, each slot once, also when the status loses its
// progress (a lost write, a restart); the same token again does nothing.
func TestABackfillRunsEachSlotOnceOneAfterTheOther(t *testing.T) {
	ns := newNamespaceNow(t)
	t.Cleanup(func() { fakeClock.SetTime(time.Now()) })
	now := fakeClock.Now().UTC().Truncate(time.Minute)
	from, to := now.Add(-27*time.Minute), now.Add(-2*time.Minute)
	var want []time.Time
	for s := from.Truncate(5 * time.Minute); !s.After(to); s = s.Add(5 * time.Minute) {
		if !s.Before(from) {
			want = append(want, s)
		}
	}
	task := createTask(t, ns, "report", testutil.Schedule("*/5 * * * *"))
	waitTask(t, task, "the first pass", func(x *v1alpha1.Task) bool { return x.Status.NextScheduleTime != nil })

	setAnnotation(t, task, v1alpha1.AnnotationBackfillRange, from.Format(time.RFC3339)+"/"+to.Format(time.RFC3339))
	setAnnotation(t, task, v1alpha1.AnnotationBackfill, "last-half-hour")

	for i, slot := range want {
		id := runs.ScheduledID(slot)
		job := waitJobOf(t, task, id, 1)
		if n := unfinishedJobs(t, task); n != 1 {
			t.Fatalf("slot %d of %d: %d unfinished Jobs, want one at a time (Forbid)", i+1, len(want), n)
		}
		if v, _ := envOf(job, "TASK_SCHEDULED_TIME"); v != slot.Format(time.RFC3339) {
			t.Errorf("TASK_SCHEDULED_TIME=%q, want the slot %s", v, slot.Format(time.RFC3339))
		}
		if i == 1 {
			// The status loses the backfill's progress: nothing starts twice.
			eventually(t, "the backfill's progress wiped", func() (bool, string) {
				st := getTask(t, task)
				st.Status.Backfill.Cursor, st.Status.Backfill.Started = nil, 0
				err := k8s.Status().Update(ctx, st) // a conflict with the operator's write: again
				return err == nil, errString(err)
			})
			poke(t, task)
			waitTask(t, task, "the cursor back", func(x *v1alpha1.Task) bool {
				return x.Status.Backfill != nil && x.Status.Backfill.Started == int32(i+1)
			})
			if n := unfinishedJobs(t, task); n != 1 {
				t.Fatalf("after the lost progress: %d unfinished Jobs, want 1", n)
			}
		}
		completeJob(t, task, id, 1)
	}
	done := waitTask(t, task, "the backfill Finished", func(x *v1alpha1.Task) bool {
		return x.Status.Backfill != nil && x.Status.Backfill.State == v1alpha1.BackfillFinished
	})
	if bf := done.Status.Backfill; bf.Total != int32(len(want)) || bf.Started != bf.Total || bf.Finished != bf.Total {
		t.Errorf("backfill status %+v, want %d slots started and finished", bf, len(want))
	}
	eventually(t, "a Backfill event saying Finished", func() (bool, string) {
		return hasEvent(t, task, v1alpha1.EventBackfill, "Finished"), "none yet"
	})

	poke(t, task)
	reconcileOnce(t, rec, task)
	if n := unfinishedJobs(t, task); n != 0 {
		t.Fatalf("the same token again: %d unfinished Jobs, want none", n)
	}
	if h := getTask(t, task).Status.History; len(h) != len(want) {
		t.Errorf("history has %d runs, want the %d slots once each", len(h), len(want))
	}
}

// unfinishedJobs counts the Task's Jobs that neither completed nor failed.
func unfinishedJobs(t *testing.T, task *v1alpha1.Task) int {
	t.Helper()
	n := 0
	js := jobsOf(t, task)
	for i := range js {
		if !runs.JobFinished(&js[i]) {
			n++
		}
	}
	return n
}

func TestABackfillThatCannotBeDoneIsRefused(t *testing.T) {
	ns := newNamespaceNow(t)
	now := fakeClock.Now().UTC()
	task := newTask(ns, "minutely", testutil.Schedule("* * * * *"),
		testutil.Annotation(v1alpha1.AnnotationBackfill, "too-much"),
		testutil.Annotation(v1alpha1.AnnotationBackfillRange, now.Add(-24*time.Hour).Format(time.RFC3339)+"/"+now.Format(time.RFC3339)))
	must(t, k8s.Create(ctx, task))
	got := waitTask(t, task, "the backfill Refused", func(x *v1alpha1.Task) bool {
		return x.Status.Backfill != nil && x.Status.Backfill.State == v1alpha1.BackfillRefused
	})
	if bf := got.Status.Backfill; bf.Message != "the range holds more than 1000 slots; split it into ranges of at most 1000 slots" {
		t.Errorf("message %q", bf.Message)
	}
	if n := len(jobsOf(t, task)); n != 0 {
		t.Errorf("%d Jobs for a refused backfill", n)
	}
}

// A queued Task's backfill runs wait in its queue's line like any run.
func TestABackfillGoesThroughTheQueue(t *testing.T) {
	ns := newNamespaceNow(t)
	t.Cleanup(func() { fakeClock.SetTime(time.Now()) })
	createQueue(t, ns, "one", 1)
	blocker := createTask(t, ns, "blocker", testutil.Queue("one"))
	waitJobs(t, blocker, 1)

	now := fakeClock.Now().UTC().Truncate(time.Minute)
	task := newTask(ns, "report", testutil.Schedule("0 0 1 1 *"), testutil.Queue("one"), testutil.Concurrency(v1alpha1.AllowConcurrent),
		testutil.Annotation(v1alpha1.AnnotationBackfill, "b1"),
		testutil.Annotation(v1alpha1.AnnotationBackfillRange, now.AddDate(-3, 0, 0).Format(time.RFC3339)+"/"+now.Format(time.RFC3339)))
	must(t, k8s.Create(ctx, task))
	queued := waitTask(t, task, "the backfill's runs queued", func(x *v1alpha1.Task) bool {
		return x.Status.Backfill != nil && x.Status.Backfill.Total == 3 && len(x.Status.Queued) == 3
	})
	if n := len(jobsOf(t, task)); n != 0 {
		t.Fatalf("%d Jobs while the queue is full", n)
	}
	if queued.Status.Queued[0].ScheduledTime == nil {
		t.Fatalf("queued %+v, want the slots' runs", queued.Status.Queued)
	}
	completeTaskJob(t, blocker)
	waitJobs(t, task, 1) // one at a time: the queue's cap
}
