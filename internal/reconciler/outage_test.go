package reconciler_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/notify"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

// notificationJobsOnly selects the notification Jobs (not the attempts).
var notificationJobsOnly = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
	{Key: v1alpha1.LabelNotification, Operator: metav1.LabelSelectorOpExists},
}}

// outageTask is a manual Task told of failures whose one attempt has
// failed, so that its next pass ends the run and makes its notification
// due; and the reconciler that drives it, with its events recorded.
func outageTask(t *testing.T, name string) (*v1alpha1.Task, *events.FakeRecorder) {
	t.Helper()
	ns := newNamespace(t)
	task := createTask(t, ns, name, manual, testutil.Notify("http://10.0.0.1/hook", "", v1alpha1.NotifyOnFailed))
	reconcileUntil(t, task, "the first Job", func(*v1alpha1.Task) bool { return len(jobsOf(t, task)) == 1 })
	job := jobsOf(t, task)[0]
	must(t, testutil.FailJob(ctx, k8s, &job, fakeClock.Now(), "BackoffLimitExceeded", "exit 3"))
	return task, events.NewFakeRecorder(100)
}

// pass runs one pass of the hand-driven reconciler and returns its result
// and the stored Task after it.
func pass(t *testing.T, r reconcile.Reconciler, task *v1alpha1.Task) (reconcile.Result, *v1alpha1.Task) {
	t.Helper()
	var res reconcile.Result
	var got *v1alpha1.Task
	// A pass may find its cache behind the last write (a quiet requeue):
	// pass again until one ran on what it wrote last.
	eventually(t, "a pass", func() (bool, string) {
		before := getTask(t, task)
		var err error
		res, err = r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)})
		got = getTask(t, task)
		return err == nil && (res.RequeueAfter != 250*time.Millisecond || got.ResourceVersion != before.ResourceVersion), errString(err)
	})
	return res, got
}

// A policy webhook that is restarting (failurePolicy Fail, so every
// create it should see gets a 500) when a run ends delays the run's
// notification, never drops it: the run's result is written at once with
// the notification Pending, the create is tried again with backoff, and
// once the webhook is back the notification goes out: one Job, recorded.
func TestANotificationRefusedDuringAWebhookOutageIsSentOnceItEnds(t *testing.T) {
	task, recorder := outageTask(t, "told-late")
	endOutage := testutil.WebhookOutage(t, k8s, task.Namespace, notificationJobsOnly)
	r := manualReconciler(nil)
	r.Recorder = recorder

	// The run ends during the outage: its result is recorded at once.
	var res reconcile.Result
	var got *v1alpha1.Task
	eventually(t, "the run's end recorded", func() (bool, string) {
		res, got = pass(t, r, task)
		return got.Status.Phase == v1alpha1.PhaseFailed, statusSummary(got)
	})
	if h := got.Status.History[0]; h.Result != v1alpha1.RunResultFailed || h.Notification != v1alpha1.NotificationPending || h.NotificationJob != "" {
		t.Fatalf("history %+v, want the run Failed and its notification Pending, no Job yet", h)
	}
	if res.RequeueAfter < time.Second || res.RequeueAfter > 30*time.Second {
		t.Fatalf("the refused notification is tried again after %s, want 1-30 s", res.RequeueAfter)
	}

	// 30 s of outage, a pass every 5 s: Pending, no Job, nothing lost.
	for range 6 {
		fakeClock.Step(5 * time.Second)
		res, got = pass(t, r, task)
		if h := got.Status.History[0]; h.Notification != v1alpha1.NotificationPending || len(notificationJobs(t, task)) != 0 {
			t.Fatalf("during the outage: history %+v, %d notification Jobs; want Pending and none", h, len(notificationJobs(t, task)))
		}
	}

	// The webhook is back: the next pass sends it, once.
	endOutage()
	fakeClock.Step(res.RequeueAfter)
	_, got = pass(t, r, task)
	if n := len(notificationJobs(t, task)); n != 1 {
		t.Fatalf("%d notification Jobs after the outage, want 1", n)
	}
	note := notificationJobs(t, task)[0]
	if h := got.Status.History[0]; h.Notification != v1alpha1.NotificationPending || h.NotificationJob != note.Name {
		t.Fatalf("history %+v, want Pending with its Job %s recorded", h, note.Name)
	}
	for range 3 {
		pass(t, r, task)
	}
	if n := len(notificationJobs(t, task)); n != 1 {
		t.Fatalf("%d notification Jobs after more passes, want 1", n)
	}
	must(t, testutil.CompleteJob(ctx, k8s, &note, fakeClock.Now()))
	got = reconcileUntil(t, task, "notification Sent", func(x *v1alpha1.Task) bool {
		return x.Status.History[0].Notification == v1alpha1.NotificationSent
	})
	if got.Status.Phase != v1alpha1.PhaseFailed {
		t.Fatalf("the notification changed the Task: %s", statusSummary(got))
	}
}

// An outage longer than the notification deadline (--notification-
// deadline, 10 minutes after the run's end by default) fails the
// notification, with the last refusal in the run's message and the
// event; the run's result stands.
func TestANotificationStillRefusedAtItsDeadlineFailsWithTheLastReason(t *testing.T) {
	task, recorder := outageTask(t, "told-never")
	testutil.WebhookOutage(t, k8s, task.Namespace, notificationJobsOnly)
	r := manualReconciler(nil)
	r.Recorder = recorder
	var got *v1alpha1.Task
	eventually(t, "the run's end recorded", func() (bool, string) {
		_, got = pass(t, r, task)
		return got.Status.Phase == v1alpha1.PhaseFailed, statusSummary(got)
	})
	fakeClock.Step(notify.DefaultDeadline + time.Second)
	res, got := pass(t, r, task)
	h := got.Status.History[0]
	if h.Notification != v1alpha1.NotificationFailed || !strings.Contains(h.Message, "failed calling webhook") {
		t.Fatalf("history %+v, want the notification Failed with the webhook's refusal in the message", h)
	}
	notificationGaveUp(t, res, task, recorder, "failed calling webhook")
}

// A Task deleted while its notification waits out an outage keeps its
// finalizer and goes on trying, as it waits for a notification Job that
// runs; once the webhook is back the notification is sent, then the Task
// goes.
func TestADeletedTaskSendsTheNotificationAnOutageHeldBackBeforeItGoes(t *testing.T) {
	fakeClock.SetTime(time.Now())
	task, job := startTask(t, "told-on-delete", testutil.Notify("http://10.0.0.1/hook", "", v1alpha1.NotifyOnFailed))
	ns := task.Namespace
	endOutage := testutil.WebhookOutage(t, k8s, ns, notificationJobsOnly)
	must(t, testutil.FailJob(ctx, k8s, &job, fakeClock.Now(), "BackoffLimitExceeded", "exit 3"))
	waitTask(t, task, "the run Failed, its notification Pending", func(x *v1alpha1.Task) bool {
		return x.Status.Phase == v1alpha1.PhaseFailed && len(x.Status.History) == 1 && x.Status.History[0].Notification == v1alpha1.NotificationPending
	})

	must(t, k8s.Delete(ctx, task))
	for range 2 {
		reconcileOnce(t, rec, task)
	}
	finalizersAre(t, task, v1alpha1.Finalizer)
	if n := len(notificationJobs(t, task)); n != 0 {
		t.Fatalf("%d notification Jobs during the outage", n)
	}

	endOutage()
	note := waitNotification(t, task, runs.OneShot)
	must(t, testutil.CompleteJob(ctx, k8s, &note, fakeClock.Now()))
	eventually(t, "the Task gone", func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(task), &v1alpha1.Task{})
		return apierrors.IsNotFound(err), errString(err)
	})
}

// attemptJobsOnly selects the attempts' Jobs (not the notifications).
var attemptJobsOnly = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
	{Key: v1alpha1.LabelAttempt, Operator: metav1.LabelSelectorOpExists},
}}

// An attempt whose Job the API server cannot take for now (a policy
// webhook restarting) waits: Ready Unknown with reason WaitingForAPI
// naming the refusal, never JobRefused; it is tried again within seconds,
// and once the webhook is back its Job is created: one.
func TestAnAttemptRefusedDuringAWebhookOutageWaitsForTheAPIAndStartsOnceItEnds(t *testing.T) {
	ns := newNamespace(t)
	endOutage := testutil.WebhookOutage(t, k8s, ns, attemptJobsOnly)
	task := createTask(t, ns, "started-late", manual)
	waitCached(t, task)
	r := manualReconciler(nil)

	var res reconcile.Result
	var got *v1alpha1.Task
	for range 6 { // 30 s of outage on the Task's clock, a pass every 5 s
		res, got = pass(t, r, task)
		c := condition(got, v1alpha1.ConditionReady)
		if got.Status.Phase != v1alpha1.PhasePending || c == nil || c.Status != metav1.ConditionUnknown ||
			c.Reason != string(v1alpha1.ReasonWaitingForAPI) || !strings.Contains(c.Message, "failed calling webhook") {
			t.Fatalf("during the outage: %s, Ready %+v; want Pending, Ready Unknown WaitingForAPI naming the webhook", statusSummary(got), c)
		}
		if res.RequeueAfter < time.Second || res.RequeueAfter > 30*time.Second {
			t.Fatalf("tried again after %s, want 1-30 s", res.RequeueAfter)
		}
		if n := len(jobsOf(t, task)); n != 0 {
			t.Fatalf("%d Jobs during the outage", n)
		}
		fakeClock.Step(5 * time.Second)
	}

	endOutage()
	eventually(t, "the attempt's Job", func() (bool, string) {
		res, got = pass(t, r, task)
		return len(jobsOf(t, task)) == 1, statusSummary(got)
	})
	// (With the speed shortcuts on, the pass that created the Job leaves
	// its record to the next one.)
	for range 2 {
		_, got = pass(t, r, task)
	}
	if c := condition(got, v1alpha1.ConditionReady); c == nil || c.Reason == string(v1alpha1.ReasonWaitingForAPI) || got.Status.Phase != v1alpha1.PhaseRunning {
		t.Fatalf("%s, Ready %+v after the Job was created; want Running", statusSummary(got), c)
	}
	if n := len(jobsOf(t, task)); n != 1 {
		t.Fatalf("%d Jobs for one attempt", n)
	}
}

// A cron slot that falls inside an outage follows the Task's own rules:
// within startingDeadlineSeconds it runs late, once the API takes its
// Job; past it, it is skipped with a SlotSkipped event. Never silently
// lost, never two Jobs.
func TestACronSlotInsideAnOutageRunsLateOrIsSkippedPastItsStartingDeadline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline int64
		outage   time.Duration
		runs     bool
	}{
		{"within its starting deadline: runs late", 120, 30 * time.Second, true},
		{"past its starting deadline: skipped", 20, 30 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fakeClock.SetTime(time.Now())
			ns := newNamespace(t)
			task := createTask(t, ns, "nightly", manual, testutil.Schedule("*/5 * * * *"), testutil.StartingDeadline(tc.deadline))
			waitCached(t, task)
			r := manualReconciler(nil)
			recorder := events.NewFakeRecorder(100)
			r.Recorder = recorder
			_, got := pass(t, r, task)
			slot := got.Status.NextScheduleTime.Time

			endOutage := testutil.WebhookOutage(t, k8s, ns, attemptJobsOnly)
			fakeClock.SetTime(slot.Add(time.Second))
			_, got = pass(t, r, task)
			if c := condition(got, v1alpha1.ConditionReady); c == nil || c.Reason != string(v1alpha1.ReasonWaitingForAPI) {
				t.Fatalf("at the slot, during the outage: Ready %+v, want WaitingForAPI", c)
			}
			fakeClock.Step(tc.outage)
			pass(t, r, task)
			endOutage()
			fakeClock.Step(time.Second)
			eventually(t, "the slot decided", func() (bool, string) {
				_, got = pass(t, r, task)
				return got.Status.LastScheduleTime != nil && !got.Status.LastScheduleTime.Time.Before(slot), statusSummary(got)
			})
			for range 2 {
				_, got = pass(t, r, task)
			}
			js := jobsOf(t, task)
			skipped := slices.ContainsFunc(eventsOf(recorder, v1alpha1.EventSlotSkipped), func(e string) bool { return strings.Contains(e, "startingDeadlineSeconds") })
			switch {
			case tc.runs && (len(js) != 1 || js[0].Labels[v1alpha1.LabelRun] != runs.ScheduledID(slot)):
				t.Fatalf("Jobs %d (%v), want the slot's one, late", len(js), js)
			case !tc.runs && (len(js) != 0 || !skipped):
				t.Fatalf("%d Jobs, SlotSkipped event %v; want none and the event", len(js), skipped)
			}
		})
	}
}
