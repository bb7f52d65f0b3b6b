package reconciler_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

func slotJob(t *testing.T, task *v1alpha1.Task, slot time.Time) {
	t.Helper()
	id := runs.ScheduledID(slot)
	eventually(t, "the Job of slot "+id, func() (bool, string) {
		for _, j := range jobsOf(t, task) {
			if j.Labels[v1alpha1.LabelRun] == id {
				return true, ""
			}
		}
		return false, itoa(len(jobsOf(t, task))) + " Jobs"
	})
}

func TestEachSlotOfACronTaskFiresOnce(t *testing.T) {
	ns := newNamespace(t)
	task, first := scheduledTask(t, ns, "every-five")
	if first.Status.Phase != v1alpha1.PhaseScheduled || len(jobsOf(t, task)) != 0 {
		t.Fatalf("before its first slot: %s", statusSummary(first))
	}
	assertConditions(t, first, T, F, F, F)
	if r := condition(first, v1alpha1.ConditionReady).Reason; r != string(v1alpha1.ReasonScheduled) {
		t.Fatalf("Ready reason %s, want Scheduled", r)
	}
	if res := reconcileOnce(t, rec, task); res.RequeueAfter <= 0 || res.RequeueAfter > 5*time.Minute {
		t.Fatalf("requeue after %s, want the exact wait until the next slot", res.RequeueAfter)
	}

	slot1 := toSlot(t, task)
	slotJob(t, task, slot1)
	for i := 0; i < 3; i++ {
		reconcileOnce(t, rec, task)
	}
	if n := len(jobsOf(t, task)); n != 1 {
		t.Fatalf("%d Jobs for one slot", n)
	}
	running := waitTask(t, task, "phase Running", phaseIs(v1alpha1.PhaseRunning))
	assertConditions(t, running, T, F, F, F) // a run in progress does not make a cron Task InProgress
	assertKstatus(t, running, kstatus.CurrentStatus)
	if !running.Status.LastScheduleTime.Time.Equal(slot1) {
		t.Fatalf("lastScheduleTime %v, want %v", running.Status.LastScheduleTime, slot1)
	}

	job := jobsOf(t, task)[0]
	must(t, testutil.CompleteJob(ctx, k8s, &job, fakeClock.Now()))
	done := waitTask(t, task, "back to Scheduled", func(x *v1alpha1.Task) bool {
		return x.Status.Phase == v1alpha1.PhaseScheduled && x.Status.LastSuccessfulTime != nil
	})
	assertConditions(t, done, T, F, F, F)
	if want := slot1.Add(5 * time.Minute); !done.Status.NextScheduleTime.Time.Equal(want) {
		t.Fatalf("nextScheduleTime %v, want %v", done.Status.NextScheduleTime, want)
	}

	slot2 := toSlot(t, task)
	slotJob(t, task, slot2)
	if n := len(jobsOf(t, task)); n != 2 {
		t.Fatalf("%d Jobs after two slots", n)
	}
}

func TestAfterDowntimeOnlyTheNewestMissedSlotRunsAndTheMissedAreReported(t *testing.T) {
	ns := newNamespace(t)
	task, first := scheduledTask(t, ns, "downtime")
	// Six slots pass unseen.
	newest := first.Status.NextScheduleTime.Time.Add(25 * time.Minute)
	fakeClock.SetTime(newest.Add(30 * time.Second))
	poke(t, task)
	slotJob(t, task, newest)
	if n := len(jobsOf(t, task)); n != 1 {
		t.Fatalf("%d Jobs after downtime, want only the newest slot", n)
	}
	eventually(t, "a MissedSchedules event", func() (bool, string) {
		return hasEvent(t, task, v1alpha1.EventMissedSchedules, "5 earlier slot(s)"), "none yet"
	})
}

func TestASlotPastItsStartingDeadlineIsSkipped(t *testing.T) {
	ns := newNamespace(t)
	task, first := scheduledTask(t, ns, "late", func(t *v1alpha1.Task) { t.Spec.StartingDeadlineSeconds = ptr.To[int64](10) })
	slot := first.Status.NextScheduleTime.Time
	fakeClock.SetTime(slot.Add(time.Minute))
	poke(t, task)
	got := waitTask(t, task, "the slot recorded", func(x *v1alpha1.Task) bool {
		return x.Status.LastScheduleTime != nil && x.Status.LastScheduleTime.Time.Equal(slot)
	})
	if n := len(jobsOf(t, task)); n != 0 || got.Status.Phase != v1alpha1.PhaseScheduled {
		t.Fatalf("a slot past its deadline started: %d Jobs, %s", n, statusSummary(got))
	}
}

func TestForbidSkipsASlotWhileARunIsActiveAndReplaceStopsIt(t *testing.T) {
	ns := newNamespace(t)
	forbid, _ := scheduledTask(t, ns, "forbid-cron")
	slot1 := toSlot(t, forbid)
	slotJob(t, forbid, slot1)
	toSlot(t, forbid)
	waitTask(t, forbid, "the second slot recorded", func(x *v1alpha1.Task) bool {
		return x.Status.LastScheduleTime.Time.After(slot1)
	})
	if n := len(jobsOf(t, forbid)); n != 1 {
		t.Fatalf("Forbid started a second run: %d Jobs", n)
	}

	replace, _ := scheduledTask(t, ns, "replace-cron", testutil.Concurrency(v1alpha1.ReplaceConcurrent))
	slotA := toSlot(t, replace)
	slotJob(t, replace, slotA)
	slotB := toSlot(t, replace)
	slotJob(t, replace, slotB)
	old := jobOf(t, replace, runs.ScheduledID(slotA), 1)
	if !ptr.Deref(old.Spec.Suspend, false) || old.Annotations[v1alpha1.AnnotationStopReason] != string(v1alpha1.AttemptReplaced) {
		t.Fatalf("Replace did not stop the older run: %v", old.Annotations)
	}
}

func TestASuspendedCronTaskStartsNoRun(t *testing.T) {
	ns := newNamespace(t)
	task, _ := scheduledTask(t, ns, "paused-cron", testutil.Suspend(true))
	toSlot(t, task)
	got := waitTask(t, task, "phase Suspended", phaseIs(v1alpha1.PhaseSuspended))
	reconcileOnce(t, rec, task)
	if n := len(jobsOf(t, task)); n != 0 {
		t.Fatalf("a suspended cron Task started %d Jobs: %s", n, statusSummary(got))
	}
}

func TestEditingTheScheduleNeverStartsARun(t *testing.T) {
	ns := newNamespace(t)
	task, first := scheduledTask(t, ns, "edited", testutil.Schedule("0 0 1 1 *"))
	// Time passes beyond many minutes; then the schedule becomes every minute.
	fakeClock.SetTime(first.CreationTimestamp.Add(10 * time.Minute))
	edit(t, task, func(fresh *v1alpha1.Task) {
		fresh.Spec.Schedule = ptr.To("* * * * *")
	})
	got := waitTask(t, task, "the edit seen", func(x *v1alpha1.Task) bool { return x.Status.ObservedGeneration == x.Generation })
	reconcileOnce(t, rec, task)
	if n := len(jobsOf(t, task)); n != 0 {
		t.Fatalf("a schedule edit started a run retroactively: %d Jobs", n)
	}
	if next := got.Status.NextScheduleTime.Time; next.Sub(fakeClock.Now()) > time.Minute {
		t.Fatalf("nextScheduleTime %v does not follow the new schedule", next)
	}
}

func TestHistoryLimitsPruneTheJobsOfOldRuns(t *testing.T) {
	ns := newNamespace(t)
	task, _ := scheduledTask(t, ns, "pruned", func(t *v1alpha1.Task) {
		t.Spec.SuccessfulRunsHistoryLimit = ptr.To[int32](1)
		t.Spec.FailedRunsHistoryLimit = ptr.To[int32](1)
	})
	var slots []time.Time
	for i := 0; i < 3; i++ {
		s := toSlot(t, task)
		slots = append(slots, s)
		slotJob(t, task, s)
		job := jobOf(t, task, runs.ScheduledID(s), 1)
		if i == 1 {
			must(t, testutil.FailJob(ctx, k8s, job, fakeClock.Now(), "BackoffLimitExceeded", "x"))
		} else {
			must(t, testutil.CompleteJob(ctx, k8s, job, fakeClock.Now()))
		}
		waitTask(t, task, "the run finished", func(x *v1alpha1.Task) bool {
			return len(x.Status.History) == i+1 && x.Status.History[0].Result != v1alpha1.RunResultRunning
		})
	}
	// Pruning follows, unprompted, the status write that recorded the runs.
	eventually(t, "the oldest success pruned", func() (bool, string) {
		n := len(jobsOf(t, task))
		return n == 2, itoa(n) + " Jobs"
	})
	jobOf(t, task, runs.ScheduledID(slots[1]), 1) // the one failure is kept
	jobOf(t, task, runs.ScheduledID(slots[2]), 1) // the newest success is kept
	got := getTask(t, task)
	if len(got.Status.History) != 3 {
		t.Fatalf("pruning lost history: %+v", got.Status.History)
	}
	assertConditions(t, got, T, F, F, F)
}

func TestALastRunFailedForGoodMakesACronTaskNotReady(t *testing.T) {
	ns := newNamespace(t)
	task, _ := scheduledTask(t, ns, "cron-fails")
	s := toSlot(t, task)
	slotJob(t, task, s)
	must(t, testutil.FailJob(ctx, k8s, jobOf(t, task, runs.ScheduledID(s), 1), fakeClock.Now(), "BackoffLimitExceeded", "x"))
	got := waitTask(t, task, "LastRunFailed", func(x *v1alpha1.Task) bool {
		c := condition(x, v1alpha1.ConditionReady)
		return c != nil && c.Reason == string(v1alpha1.ReasonLastRunFailed)
	})
	assertConditions(t, got, F, T, F, T)
	assertKstatus(t, got, kstatus.FailedStatus)
	if got.Status.Phase != v1alpha1.PhaseScheduled {
		t.Fatalf("phase %s, want Scheduled", got.Status.Phase)
	}
}

func TestRunNowWorksOnACronTask(t *testing.T) {
	ns := newNamespace(t)
	task, _ := scheduledTask(t, ns, "cron-now")
	setRunNow(t, task, "deploy-7")
	waitJobs(t, task, 1)
	jobOf(t, task, runs.RunNowID("deploy-7"), 1)
}

func TestAnUnparsableScheduleIsInvalidUntilFixed(t *testing.T) {
	ns := newNamespaceNow(t)
	// A reversed range: admission cannot tell, the parser can.
	task := createTask(t, ns, "bad-cron", testutil.Schedule("5-1 * * * *"))
	bad := waitTask(t, task, "InvalidSchedule", phaseIs(v1alpha1.PhaseFailed))
	assertConditions(t, bad, F, T, F, T)
	if c := condition(bad, v1alpha1.ConditionReady); c.Reason != string(v1alpha1.ReasonInvalidSchedule) || !strings.Contains(c.Message, "spec.schedule") {
		t.Fatalf("Ready: %+v", c)
	}
	// A pass that races the manager's own may meet a conflict (a quiet
	// requeue); the one after it must not ask to be run again.
	eventually(t, "a pass that does not requeue the invalid schedule", func() (bool, string) {
		res := reconcileOnce(t, rec, task)
		return res.RequeueAfter == 0, fmt.Sprintf("requeued after %s", res.RequeueAfter)
	})
	eventually(t, "an InvalidSchedule event", func() (bool, string) {
		return hasEvent(t, task, v1alpha1.EventInvalidSchedule, "spec.schedule"), "none yet"
	})

	edit(t, task, func(fixed *v1alpha1.Task) {
		fixed.Spec.Schedule = ptr.To("*/5 * * * *")
	})
	good := waitTask(t, task, "phase Scheduled", phaseIs(v1alpha1.PhaseScheduled))
	assertConditions(t, good, T, F, F, F)
}

func TestACrashBetweenASlotsJobAndItsStatusMakesNoSecondJob(t *testing.T) {
	ns := newNamespaceNow(t)
	task := createTask(t, ns, "cron-crash", manual, testutil.Schedule("*/5 * * * *"))
	first := reconcileUntil(t, task, "phase Scheduled", func(x *v1alpha1.Task) bool { return x.Status.Phase == v1alpha1.PhaseScheduled })
	slot := first.Status.NextScheduleTime.Time
	fakeClock.SetTime(slot.Add(time.Second))

	waitCached(t, task)
	crashing := manualReconciler(crashBeforeStatus())
	eventually(t, "the crashing pass to create the slot's Job", func() (bool, string) {
		_, _ = crashing.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)})
		return len(jobsOf(t, task)) == 1, "no Job yet"
	})
	fakeClock.SetTime(slot.Add(3 * time.Second))
	got := reconcileUntil(t, task, "the slot recorded", func(x *v1alpha1.Task) bool {
		return x.Status.LastScheduleTime != nil && x.Status.LastScheduleTime.Time.Equal(slot) && x.Status.Phase == v1alpha1.PhaseRunning
	})
	if n := len(jobsOf(t, task)); n != 1 {
		t.Fatalf("%d Jobs for one slot after a crash: %s", n, statusSummary(got))
	}
}

// hasEvent reports whether the Task has an event with reason whose note
// contains text.
func hasEvent(t *testing.T, task *v1alpha1.Task, reason v1alpha1.Reason, text string) bool {
	t.Helper()
	var list eventsv1.EventList
	must(t, k8s.List(ctx, &list, client.InNamespace(task.Namespace)))
	for _, e := range list.Items {
		if e.Regarding.Name == task.Name && e.Reason == string(reason) && strings.Contains(e.Note, text) {
			return true
		}
	}
	return false
}

// The slots missed in downtime are reported even when the status write of
// the pass that started the newest slot is lost: the next pass counts from
// that slot's Job and no longer sees them. (The envtest suite once lost
// this event when a pass on a stale cached Task created the Job and its
// write conflicted.)
func TestMissedSlotsAreReportedWhenTheWriteOfThePassThatStartedTheNewestIsLost(t *testing.T) {
	ns := newNamespaceNow(t)
	task := createTask(t, ns, "cron-missed-crash", manual, testutil.Schedule("*/5 * * * *"))
	first := reconcileUntil(t, task, "phase Scheduled", func(x *v1alpha1.Task) bool { return x.Status.Phase == v1alpha1.PhaseScheduled })
	newest := first.Status.NextScheduleTime.Time.Add(25 * time.Minute)
	fakeClock.SetTime(newest.Add(30 * time.Second))

	waitCached(t, task)
	recorder := events.NewFakeRecorder(100)
	crashing := manualReconciler(crashBeforeStatus())
	crashing.Recorder = recorder
	eventually(t, "the crashing pass to create the newest slot's Job", func() (bool, string) {
		_, _ = crashing.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)})
		return len(jobsOf(t, task)) == 1, "no Job yet"
	})
	// The pass after the crash reads the Job from the cache, as a restarted
	// operator's first pass would; one that ran before the cache showed it
	// would see the slots missed again and report them a second time (an
	// event the crash repeats, as the lost write repeats the pass).
	eventually(t, "the slot's Job in the manual cache", func() (bool, string) {
		var list batchv1.JobList
		err := manualClient.List(ctx, &list, client.InNamespace(ns))
		return err == nil && len(list.Items) == 1, fmt.Sprintf("%d Jobs cached, %v", len(list.Items), err)
	})
	after := manualReconciler(nil)
	after.Recorder = recorder
	eventually(t, "the slot recorded", func() (bool, string) {
		_, err := after.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)})
		got := getTask(t, task)
		return err == nil && got.Status.LastScheduleTime != nil && got.Status.LastScheduleTime.Time.Equal(newest), statusSummary(got)
	})
	missed := eventsOf(recorder, v1alpha1.EventMissedSchedules)
	if len(missed) != 1 || !strings.Contains(missed[0], "5 earlier slot(s)") {
		t.Fatalf("MissedSchedules events %q, want one for 5 earlier slots", missed)
	}
}
