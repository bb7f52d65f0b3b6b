package reconciler_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/notify"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

// notificationJobs are the Task's notification Jobs.
func notificationJobs(t *testing.T, task *v1alpha1.Task) []batchv1.Job {
	t.Helper()
	var out []batchv1.Job
	for _, j := range jobsOf(t, task) {
		if j.Labels[v1alpha1.LabelNotification] != "" {
			out = append(out, j)
		}
	}
	return out
}

// waitNotification waits for the notification Job of run id.
func waitNotification(t *testing.T, task *v1alpha1.Task, id string) batchv1.Job {
	t.Helper()
	var job batchv1.Job
	eventually(t, "the notification Job of run "+id, func() (bool, string) {
		for _, j := range notificationJobs(t, task) {
			if j.Labels[v1alpha1.LabelNotification] == id {
				job = j
				return true, ""
			}
		}
		return false, itoa(len(notificationJobs(t, task))) + " notification Jobs"
	})
	return job
}

// documentOf is the outcome document a notification Job sends.
func documentOf(t *testing.T, job *batchv1.Job) notify.Document {
	t.Helper()
	var doc notify.Document
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		if e.Name == notify.EnvDocument {
			must(t, json.Unmarshal([]byte(strings.ReplaceAll(e.Value, "$$", "$")), &doc))
		}
	}
	return doc
}

// taskEvents are the reasons of the events about the Task, with counts.
func taskEvents(t *testing.T, task *v1alpha1.Task) map[string]int {
	t.Helper()
	var list eventsv1.EventList
	must(t, k8s.List(ctx, &list, client.InNamespace(task.Namespace)))
	seen := map[string]int{}
	for _, e := range list.Items {
		if e.Regarding.Name == task.Name && e.Regarding.Kind == "Task" {
			seen[e.Reason]++
		}
	}
	return seen
}

func waitEvent(t *testing.T, task *v1alpha1.Task, reason v1alpha1.Reason) {
	t.Helper()
	eventually(t, "event "+string(reason), func() (bool, string) {
		return taskEvents(t, task)[string(reason)] > 0, "not yet"
	})
}

func TestAFailedRunGetsExactlyOneNotificationJobAndItsOutcomeIsRecorded(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "told", manual, testutil.Notify("http://10.0.0.1/hook", "", v1alpha1.NotifyOnFailed))
	reconcileUntil(t, task, "the first Job", func(*v1alpha1.Task) bool { return len(jobsOf(t, task)) == 1 })
	job := jobsOf(t, task)[0]
	must(t, testutil.FailJob(ctx, k8s, &job, fakeClock.Now(), "BackoffLimitExceeded", "exit 3"))

	// A pass that ends the run creates the notification Job and then
	// crashes before its status write: the passes after it, which find
	// the run newly ended again, find the Job instead of making another.
	crashing := manualReconciler(crashBeforeStatus())
	eventually(t, "the crashing pass to create the notification Job", func() (bool, string) {
		_, _ = crashing.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)})
		return len(notificationJobs(t, task)) == 1, "none yet"
	})
	got := reconcileUntil(t, task, "notification Pending", func(x *v1alpha1.Task) bool {
		return len(x.Status.History) == 1 && x.Status.History[0].Notification == v1alpha1.NotificationPending
	})
	if n := len(notificationJobs(t, task)); n != 1 || got.Status.Phase != v1alpha1.PhaseFailed {
		t.Fatalf("%d notification Jobs for one run: %s", n, statusSummary(got))
	}
	note := notificationJobs(t, task)[0]
	if doc := documentOf(t, &note); doc.Event != v1alpha1.NotifyOnFailed || doc.Task != "told" || doc.Result != v1alpha1.RunResultFailed || doc.Attempts != 1 {
		t.Fatalf("document %+v", doc)
	}

	// The webhook refused: the notification failed, the run's result stands.
	must(t, testutil.FailJob(ctx, k8s, &note, fakeClock.Now(), "BackoffLimitExceeded", "exit 1"))
	got = reconcileUntil(t, task, "notification Failed", func(x *v1alpha1.Task) bool {
		return x.Status.History[0].Notification == v1alpha1.NotificationFailed
	})
	if got.Status.Phase != v1alpha1.PhaseFailed || got.Status.History[0].Result != v1alpha1.RunResultFailed {
		t.Fatalf("the notification changed the Task: %s", statusSummary(got))
	}
	if n := len(notificationJobs(t, task)); n != 1 {
		t.Fatalf("%d notification Jobs after the failure, want 1 (a failed notification is not sent again)", n)
	}
}

func TestASentNotificationIsRecordedOnceAndItsJobIsPrunedWithItsRun(t *testing.T) {
	ns := newNamespace(t)
	task := newTask(ns, "told-ok", testutil.HistoryLimits(0, 0),
		testutil.Notify("http://10.0.0.1/hook", v1alpha1.NotifyFormatSlack, v1alpha1.NotifyOnSucceeded))
	must(t, k8s.Create(ctx, task))
	job := waitJobs(t, task, 1)[0]
	must(t, testutil.CompleteJob(ctx, k8s, &job, fakeClock.Now()))
	note := waitNotification(t, task, runs.OneShot)
	// The run is over its history limit (0), but its Jobs wait for the
	// notification.
	if n := len(jobsOf(t, task)); n != 2 {
		t.Fatalf("%d Jobs while the notification runs, want the attempt and the notification", n)
	}
	must(t, testutil.CompleteJob(ctx, k8s, &note, fakeClock.Now()))
	waitTask(t, task, "notification Sent", func(x *v1alpha1.Task) bool {
		return len(x.Status.History) == 1 && x.Status.History[0].Notification == v1alpha1.NotificationSent
	})
	waitEvent(t, task, v1alpha1.EventNotificationSent)
	waitJobs(t, task, 0)
	for range 2 {
		reconcileOnce(t, rec, task)
	}
	if n := taskEvents(t, task)[string(v1alpha1.EventNotificationSent)]; n != 1 {
		t.Fatalf("%d NotificationSent events, want 1", n)
	}
}

func TestANotificationWhoseJobIsDeletedBeforeItFinishesFailsAndIsNotSentAgain(t *testing.T) {
	task, job := startTask(t, "told-gone", testutil.Notify("http://10.0.0.1/hook", "", v1alpha1.NotifyOnFailed))
	ns := task.Namespace
	must(t, testutil.FailJob(ctx, k8s, &job, fakeClock.Now(), "BackoffLimitExceeded", "exit 3"))
	note := waitNotification(t, task, runs.OneShot)
	waitTask(t, task, "notification Pending", func(x *v1alpha1.Task) bool {
		return len(x.Status.History) == 1 && x.Status.History[0].Notification == v1alpha1.NotificationPending
	})

	// Background: envtest runs no garbage collector to lift an orphan
	// finalizer.
	must(t, k8s.Delete(ctx, &note, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	got := waitTask(t, task, "notification Failed", func(x *v1alpha1.Task) bool {
		return x.Status.History[0].Notification == v1alpha1.NotificationFailed
	})
	if got.Status.Phase != v1alpha1.PhaseFailed || got.Status.History[0].Result != v1alpha1.RunResultFailed {
		t.Fatalf("the deleted notification changed the Task: %s", statusSummary(got))
	}
	eventually(t, "a NotificationFailed event that says the Job was deleted", func() (bool, string) {
		var list eventsv1.EventList
		must(t, k8s.List(ctx, &list, client.InNamespace(ns)))
		for _, e := range list.Items {
			if e.Reason == string(v1alpha1.EventNotificationFailed) {
				return strings.Contains(e.Note, "was deleted before it finished"), e.Note
			}
		}
		return false, "no event"
	})
	for range 2 {
		reconcileOnce(t, rec, task)
	}
	if n := len(notificationJobs(t, task)); n != 0 {
		t.Fatalf("%d notification Jobs after the deletion, want 0 (not sent again)", n)
	}
}

// failSlot moves to the Task's next slot and fails (or completes) its Job.
func endSlot(t *testing.T, task *v1alpha1.Task, ok bool) string {
	t.Helper()
	slot := toSlot(t, task)
	slotJob(t, task, slot)
	id := runs.ScheduledID(slot)
	job := jobOf(t, task, id, 1)
	if ok {
		must(t, testutil.CompleteJob(ctx, k8s, job, fakeClock.Now()))
	} else {
		must(t, testutil.FailJob(ctx, k8s, job, fakeClock.Now(), "BackoffLimitExceeded", "exit 3"))
	}
	waitTask(t, task, "run "+id+" recorded", func(x *v1alpha1.Task) bool {
		return len(x.Status.History) > 0 && x.Status.History[0].RunID == id && x.Status.History[0].Result != v1alpha1.RunResultRunning
	})
	return id
}

func TestRecoveredIsSentOnlyForASuccessAfterAFailedRun(t *testing.T) {
	ns := newNamespace(t)
	task, _ := scheduledTask(t, ns, "recovers", testutil.Notify("http://10.0.0.1/hook", "", v1alpha1.NotifyOnRecovered))
	endSlot(t, task, true)
	endSlot(t, task, false)
	if n := len(notificationJobs(t, task)); n != 0 {
		t.Fatalf("%d notification Jobs before any recovery", n)
	}
	id := endSlot(t, task, true)
	note := waitNotification(t, task, id)
	if doc := documentOf(t, &note); doc.Event != v1alpha1.NotifyOnRecovered || doc.RunID != id {
		t.Fatalf("document %+v", doc)
	}
	if n := len(notificationJobs(t, task)); n != 1 {
		t.Fatalf("%d notification Jobs, want the recovery's only", n)
	}
}

// streak brings a cron Task with suspendAfterFailures 2 to its streak.
func streak(t *testing.T, ns, name string) *v1alpha1.Task {
	t.Helper()
	task, _ := scheduledTask(t, ns, name, testutil.SuspendAfterFailures(2))
	endSlot(t, task, false)
	endSlot(t, task, false)
	got := waitTask(t, task, "phase Suspended", phaseIs(v1alpha1.PhaseSuspended))
	if got.Status.ConsecutiveFailures != 2 || condition(got, v1alpha1.ConditionReady).Reason != string(v1alpha1.ReasonTooManyFailures) {
		t.Fatalf("after the streak: %s", statusSummary(got))
	}
	assertConditions(t, got, F, T, F, T)
	waitEvent(t, task, v1alpha1.EventTooManyFailures)
	// The next slot starts nothing.
	before := len(jobsOf(t, task))
	toSlot(t, task)
	for range 2 {
		reconcileOnce(t, rec, task)
	}
	if n := len(jobsOf(t, task)); n != before {
		t.Fatalf("a slot started while the streak holds: %d Jobs, had %d", n, before)
	}
	return task
}

func TestAFailureStreakSuspendsACronTaskUntilARunNowRunSucceeds(t *testing.T) {
	task := streak(t, newNamespace(t), "streak-run-now")
	setRunNow(t, task, "try-again")
	var job *batchv1.Job
	eventually(t, "the run-now Job", func() (bool, string) {
		for _, j := range jobsOf(t, task) {
			if strings.HasPrefix(j.Labels[v1alpha1.LabelRun], "m") {
				job = &j
				return true, ""
			}
		}
		return false, "none"
	})
	must(t, testutil.CompleteJob(ctx, k8s, job, fakeClock.Now()))
	got := waitTask(t, task, "phase Scheduled", phaseIs(v1alpha1.PhaseScheduled))
	if got.Status.ConsecutiveFailures != 0 {
		t.Fatalf("after the successful run-now run: %s", statusSummary(got))
	}
	slotJob(t, task, toSlot(t, task))
}

func TestAFailureStreakSuspendsACronTaskUntilTheSpecChanges(t *testing.T) {
	task := streak(t, newNamespace(t), "streak-edit")
	edit(t, task, func(fresh *v1alpha1.Task) {
		fresh.Spec.Shell = "echo fixed"
	})
	got := waitTask(t, task, "the new generation observed", func(x *v1alpha1.Task) bool {
		return x.Status.ObservedGeneration == x.Generation && x.Generation > task.Generation
	})
	if got.Status.Phase == v1alpha1.PhaseSuspended || got.Status.ConsecutiveFailures != 0 {
		t.Fatalf("after the spec change: %s", statusSummary(got))
	}
	slotJob(t, task, toSlot(t, task))
}

func TestPerTaskMetricsFollowTheStatusAndGoWithTheTask(t *testing.T) {
	ns := newNamespace(t)
	task, _ := scheduledTask(t, ns, "measured", testutil.Concurrency(v1alpha1.AllowConcurrent))
	endSlot(t, task, false)
	series := func(name string) string { return name + `{namespace="` + ns + `",task="measured"}` }
	scraped(t, "the per-Task series", []string{
		series("taskoperator_task_last_run_success") + " 0",
		series("taskoperator_task_consecutive_failures") + " 1",
		series("taskoperator_task_next_schedule_timestamp_seconds"),
		series("taskoperator_task_schedule_period_seconds") + " 300",
	}, series("taskoperator_task_last_success_timestamp_seconds"))
	endSlot(t, task, true)
	scraped(t, "the series after a success", []string{
		series("taskoperator_task_last_run_success") + " 1",
		series("taskoperator_task_consecutive_failures") + " 0",
		series("taskoperator_task_last_success_timestamp_seconds"),
	})
	must(t, k8s.Delete(ctx, getTask(t, task)))
	scraped(t, "the series gone with the Task", nil, `task="measured"`)
}

// A notification Job the API server refuses never holds back the run's
// result: a ResourceQuota of Jobs that the run's own Job filled refuses
// the notification Job, and the same status write records the run's end
// and the notification Failed, with the refusal in the event, without a
// retry loop.
func TestARefusedNotificationJobNeverHoldsBackTheResult(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "quota-told", manual, testutil.Notify("http://10.0.0.1/hook", "", v1alpha1.NotifyOnFailed))
	reconcileUntil(t, task, "the first Job", func(*v1alpha1.Task) bool { return len(jobsOf(t, task)) == 1 })
	fillJobsQuota(t, ns) // the run's own Job fills it
	job := jobsOf(t, task)[0]
	must(t, testutil.FailJob(ctx, k8s, &job, fakeClock.Now(), "BackoffLimitExceeded", "exit 3"))

	r := manualReconciler(nil)
	recorder := events.NewFakeRecorder(100)
	r.Recorder = recorder
	var res reconcile.Result
	var got *v1alpha1.Task
	eventually(t, "the run's end recorded", func() (bool, string) {
		var err error
		res, err = r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)})
		got = getTask(t, task)
		return err == nil && got.Status.Phase == v1alpha1.PhaseFailed, errString(err) + "; " + statusSummary(got)
	})
	if h := got.Status.History[0]; h.Result != v1alpha1.RunResultFailed || h.Notification != v1alpha1.NotificationFailed {
		t.Fatalf("history %+v, want the run Failed and its notification Failed", h)
	}
	if c := condition(got, v1alpha1.ConditionFinished); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Finished %+v", c)
	}
	notificationGaveUp(t, res, task, recorder, "exceeded quota: jobs")
}

// notificationGaveUp checks that a refused notification is over: no
// notification Job, no retry within a minute, one NotificationFailed event
// naming the cause.
func notificationGaveUp(t *testing.T, res reconcile.Result, task *v1alpha1.Task, recorder *events.FakeRecorder, cause string) {
	t.Helper()
	if n := len(notificationJobs(t, task)); n != 0 {
		t.Fatalf("%d notification Jobs", n)
	}
	if res.RequeueAfter != 0 && res.RequeueAfter < time.Minute {
		t.Fatalf("the refused notification is retried after %s", res.RequeueAfter)
	}
	notes := eventsOf(recorder, v1alpha1.EventNotificationFailed)
	if len(notes) != 1 || !strings.Contains(notes[0], cause) {
		t.Fatalf("NotificationFailed events %q, want one naming %q", notes, cause)
	}
}
