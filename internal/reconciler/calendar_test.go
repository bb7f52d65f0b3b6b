package reconciler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

// A holiday list in a ConfigMap: the slot on a listed date falls due but
// does not run (SlotSkipped, SkipDate), nextScheduleTime passes over it,
// an edit of the list is seen at the Task's next pass (nothing watches
// ConfigMaps: the operator reads one only when a Task plans), and a
// missing list is a Warning while the schedule goes on.
func TestASkippedHolidayFromAConfigMap(t *testing.T) {
	ns := newNamespaceNow(t)
	t.Cleanup(func() { fakeClock.SetTime(time.Now()) }) // other tests' attempts must not age by days
	// The holiday is the date of the next 09:00 UTC: tomorrow's, or today's
	// when the suite runs before 09:00 (it failed then when the holiday
	// was always tomorrow: today's 09:00 came first).
	now := fakeClock.Now().UTC()
	slot := time.Date(now.Year(), now.Month(), now.Day(), 9, 0, 0, 0, time.UTC)
	if !slot.After(now) {
		slot = slot.AddDate(0, 0, 1)
	}
	holiday := slot.Format("2006-01-02")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holidays"},
		Data: map[string]string{"dates": "# company holidays\n" + holiday + "\n"}}
	must(t, k8s.Create(ctx, cm))
	task := newTask(ns, "settlement", testutil.Schedule("0 9 * * *"), func(x *v1alpha1.Task) {
		x.Spec.SkipDatesFrom = &v1alpha1.ConfigMapKeyRef{Name: "holidays", Key: "dates"}
	})
	must(t, k8s.Create(ctx, task))
	waitNextSchedule(t, task, slot.AddDate(0, 0, 1))

	// The line goes: the Task's next pass (poked here; at the latest its
	// next slot) sees it, and its next slot is back.
	cm.Data["dates"] = "# company holidays\n"
	must(t, k8s.Update(ctx, cm))
	poke(t, task)
	waitNextSchedule(t, task, slot)
	cm.Data["dates"] = holiday + "\nnot-a-date\n"
	must(t, k8s.Update(ctx, cm))
	poke(t, task)
	waitNextSchedule(t, task, slot.AddDate(0, 0, 1))
	got := waitTask(t, task, "the bad line in Ready's message", func(x *v1alpha1.Task) bool {
		c := condition(x, v1alpha1.ConditionReady)
		return c != nil && strings.Contains(c.Message, `"not-a-date" is not YYYY-MM-DD or --MM-DD`)
	})
	assertConditions(t, got, T, F, F, F)
	eventually(t, "a SkipDatesUnreadable event", func() (bool, string) {
		return hasEvent(t, task, v1alpha1.EventSkipDatesUnreadable, "not-a-date"), "none yet"
	})

	fakeClock.SetTime(slot.Add(2 * time.Second))
	poke(t, task)
	eventually(t, "a SlotSkipped event saying SkipDate", func() (bool, string) {
		return hasEvent(t, task, v1alpha1.EventSlotSkipped, "SkipDate"), "none yet"
	})
	if n := len(jobsOf(t, task)); n != 0 {
		t.Fatalf("%d Jobs on a holiday", n)
	}
	skipped := getTask(t, task)
	if !skipped.Status.LastScheduleTime.Time.Equal(slot) || hasEvent(t, task, v1alpha1.EventMissedSchedules, "") {
		t.Fatalf("the holiday's slot: lastScheduleTime %v, want it handled and not missed", skipped.Status.LastScheduleTime)
	}

	// The list is deleted: a Warning, and the schedule goes on.
	must(t, k8s.Delete(ctx, cm))
	poke(t, task)
	waitTask(t, task, "the missing list in Ready's message", func(x *v1alpha1.Task) bool {
		c := condition(x, v1alpha1.ConditionReady)
		return c != nil && strings.Contains(c.Message, "ConfigMap holidays (spec.skipDatesFrom) does not exist")
	})
	fakeClock.SetTime(slot.AddDate(0, 0, 1).Add(2 * time.Second))
	poke(t, task)
	slotJob(t, task, slot.AddDate(0, 0, 1))
}

// On the day clocks fall back, "30 2 * * *" in Berlin runs once under
// Once (the default) and twice under Twice.
func TestAFallBackDayRunsOnceUnderOnceAndTwiceUnderTwice(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	must(t, err)
	t.Cleanup(func() { fakeClock.SetTime(time.Now()) }) // other tests' attempts must not age by months
	// The next fall-back after today: the last Sunday of October.
	year := time.Now().Year()
	if time.Now().Month() >= time.October {
		year++
	}
	day := time.Date(year, time.October, 31, 0, 0, 0, 0, berlin)
	for day.Weekday() != time.Sunday {
		day = day.AddDate(0, 0, -1)
	}
	first := time.Date(year, time.October, day.Day(), 0, 30, 0, 0, time.UTC) // the first 02:30 (CEST, UTC+2)
	second := first.Add(time.Hour)                                           // 02:30 again (CET, UTC+1)
	next := time.Date(year, time.October, day.Day()+1, 2, 30, 0, 0, berlin)
	for _, tc := range []struct {
		policy v1alpha1.RepeatedTimePolicy
		after  time.Time // the next slot once the first 02:30 ran
	}{{"", next}, {v1alpha1.RepeatedOnce, next}, {v1alpha1.RepeatedTwice, second}} {
		t.Run("policy "+string(tc.policy), func(t *testing.T) {
			ns := newNamespace(t)
			fakeClock.SetTime(day.Add(-time.Minute))
			task := newTask(ns, "nightly", testutil.Schedule("30 2 * * *"), testutil.StartingDeadline(60), func(x *v1alpha1.Task) {
				x.Spec.TimeZone, x.Spec.RepeatedTimePolicy = ptr.To("Europe/Berlin"), tc.policy
			})
			must(t, k8s.Create(ctx, task))
			waitTask(t, task, "the first 02:30 next", func(x *v1alpha1.Task) bool {
				return x.Status.NextScheduleTime != nil && x.Status.NextScheduleTime.Time.Equal(first)
			})
			fakeClock.SetTime(first.Add(2 * time.Second))
			poke(t, task)
			slotJob(t, task, first)
			completeJob(t, task, runs.ScheduledID(first), 1)
			waitTask(t, task, "the next slot "+tc.after.UTC().Format(time.RFC3339), func(x *v1alpha1.Task) bool {
				return x.Status.NextScheduleTime != nil && x.Status.NextScheduleTime.Time.Equal(tc.after) && x.Status.Phase == v1alpha1.PhaseScheduled
			})
			fakeClock.SetTime(second.Add(2 * time.Second))
			poke(t, task)
			if tc.policy == v1alpha1.RepeatedTwice {
				slotJob(t, task, second)
			} else {
				reconcileOnce(t, rec, task)
				if n := len(jobsOf(t, task)); n != 1 {
					t.Fatalf("%d Jobs on the fall-back day under %q, want 1", n, tc.policy)
				}
			}
		})
	}
}

// completeJob completes the Job of one run and attempt, reading it afresh
// after a conflict: the operator may have just written it.
func completeJob(t *testing.T, task *v1alpha1.Task, run string, attempt int) {
	t.Helper()
	eventually(t, "the Job of run "+run+" completed", func() (bool, string) {
		err := testutil.CompleteJob(ctx, k8s, waitJobOf(t, task, run, attempt), fakeClock.Now())
		return err == nil, errString(err)
	})
}

// forbiddenConfigMaps is the API server of a namespace that did not grant
// the operator get on its ConfigMaps.
type forbiddenConfigMaps struct{ client.Reader }

func (f forbiddenConfigMaps) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.ConfigMap); ok {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, key.Name, errors.New("the operator's ServiceAccount cannot get configmaps in this namespace"))
	}
	return f.Reader.Get(ctx, key, obj, opts...)
}

// The operator reads no ConfigMap the namespace did not grant: a
// skipDatesFrom it may not read is a Warning (SkipDatesUnreadable) and a
// Ready message that gives the one-line grant, and the schedule runs on
// the dates it has; nothing fails.
func TestASkipDatesFromTheNamespaceDidNotGrantSaysHowAndTheScheduleRuns(t *testing.T) {
	ns := newNamespaceNow(t)
	must(t, k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holidays"}, Data: map[string]string{"dates": "--12-25\n"}}))
	task := newTask(ns, "settlement", manual, testutil.Schedule("0 9 * * *"), func(x *v1alpha1.Task) {
		x.Spec.SkipDatesFrom = &v1alpha1.ConfigMapKeyRef{Name: "holidays", Key: "dates"}
	})
	must(t, k8s.Create(ctx, task))
	waitCached(t, task)
	r := manualReconciler(nil)
	r.APIReader = forbiddenConfigMaps{manualReader}
	recorder := events.NewFakeRecorder(100)
	r.Recorder = recorder
	_, got := pass(t, r, task)
	c := condition(got, v1alpha1.ConditionReady)
	if c == nil || !strings.Contains(c.Message, "may not read ConfigMap holidays") || !strings.Contains(c.Message, "create rolebinding task-operator-skip-dates") {
		t.Fatalf("Ready %+v, want the grant named", c)
	}
	if got.Status.NextScheduleTime == nil || got.Status.Phase != v1alpha1.PhaseScheduled {
		t.Fatalf("%s: the schedule does not run on the dates it has", statusSummary(got))
	}
	if unreadable := eventsOf(recorder, v1alpha1.EventSkipDatesUnreadable); len(unreadable) != 1 {
		t.Fatalf("SkipDatesUnreadable events %q, want 1", unreadable)
	}
}

// A holiday list the platform team owns for the whole cluster: a
// TaskCalendar's date holds the slot (SlotSkipped, SkipDate) of a Task in
// any namespace that names it; an edit wakes the Task at once (the
// operator watches calendars); a calendar that does not exist is a
// Warning and a Ready message while the schedule goes on.
func TestATaskCalendarHoldsTheSlotsOfTheTasksNamingIt(t *testing.T) {
	ns := newNamespaceNow(t)
	t.Cleanup(func() { fakeClock.SetTime(time.Now()) })
	now := fakeClock.Now().UTC()
	slot := time.Date(now.Year(), now.Month(), now.Day(), 9, 0, 0, 0, time.UTC)
	if !slot.After(now) {
		slot = slot.AddDate(0, 0, 1)
	}
	cal := &v1alpha1.TaskCalendar{ObjectMeta: metav1.ObjectMeta{Name: "holidays-" + ns},
		Spec: v1alpha1.TaskCalendarSpec{Dates: []string{slot.Format("2006-01-02")}, Description: "the bank's holidays"}}
	must(t, k8s.Create(ctx, cal))
	t.Cleanup(func() { _ = k8s.Delete(ctx, cal) })
	task := newTask(ns, "settlement", testutil.Schedule("0 9 * * *"), func(x *v1alpha1.Task) {
		x.Spec.SkipCalendars = []string{cal.Name}
	})
	must(t, k8s.Create(ctx, task))
	waitNextSchedule(t, task, slot.AddDate(0, 0, 1))

	// The date goes from the calendar: the watch wakes the Task.
	latest := &v1alpha1.TaskCalendar{}
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(cal), latest))
	latest.Spec.Dates = []string{"--12-25"}
	must(t, k8s.Update(ctx, latest))
	waitNextSchedule(t, task, slot)

	// The calendar goes: a Warning, and the schedule goes on.
	must(t, k8s.Delete(ctx, latest))
	got := waitTask(t, task, "the missing calendar in Ready's message", func(x *v1alpha1.Task) bool {
		c := condition(x, v1alpha1.ConditionReady)
		return c != nil && strings.Contains(c.Message, "TaskCalendar "+cal.Name+" (spec.skipCalendars) does not exist")
	})
	if got.Status.NextScheduleTime == nil || !got.Status.NextScheduleTime.Time.Equal(slot) {
		t.Fatalf("nextScheduleTime %v, want %s: the schedule goes on", got.Status.NextScheduleTime, slot)
	}
	eventually(t, "a SkipDatesUnreadable event", func() (bool, string) {
		return hasEvent(t, task, v1alpha1.EventSkipDatesUnreadable, cal.Name), "none yet"
	})
}
