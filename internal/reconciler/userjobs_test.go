package reconciler_test

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

// What happens when a user deletes or relabels a child Job (README: "When a
// child Job is deleted or relabelled").

func TestADeletedActiveJobCountsAsAFailedAttemptAndTheNextStartsAtOnce(t *testing.T) {
	task, first := startTask(t, "deleted", testutil.MaxRetry(2))
	waitTask(t, task, "attempt 1 recorded", func(t *v1alpha1.Task) bool { return t.Status.Attempts == 1 && len(t.Status.Active) == 1 })

	deleteJob(t, &first)
	got := waitTask(t, task, "attempt 2 recorded", func(t *v1alpha1.Task) bool { return t.Status.Attempts == 2 && len(t.Status.Active) == 1 })
	if !strings.Contains(got.Status.LastError, string(v1alpha1.AttemptJobDeleted)) || !strings.Contains(got.Status.LastError, first.Name) {
		t.Fatalf("lastError %q does not say Job %s was deleted", got.Status.LastError, first.Name)
	}
	js := waitJobs(t, task, 1)
	if js[0].Labels[v1alpha1.LabelAttempt] != "2" {
		t.Fatalf("the remaining Job is attempt %s, want 2", js[0].Labels[v1alpha1.LabelAttempt])
	}
	must(t, testutil.CompleteJob(ctx, k8s, &js[0], fakeClock.Now()))
	done := waitTask(t, task, "phase Succeeded", phaseIs(ok))
	if h := done.Status.History; len(h) != 1 || h[0].Attempts != 2 || h[0].Result != v1alpha1.RunResultSucceeded {
		t.Fatalf("history: %+v", h)
	}
	if n := len(jobsOf(t, task)); n != 1 {
		t.Fatalf("%d Jobs, want 1: a deleted attempt is never created again", n)
	}
}

func TestDeletingTheJobOfTheLastAllowedAttemptFailsTheRun(t *testing.T) {
	task, job := startTask(t, "deleted-last")
	waitTask(t, task, "attempt 1 recorded", func(t *v1alpha1.Task) bool { return t.Status.Attempts == 1 && len(t.Status.Active) == 1 })

	deleteJob(t, &job)
	failed := waitTask(t, task, "phase Failed", phaseIs(v1alpha1.PhaseFailed))
	c := condition(failed, v1alpha1.ConditionFailed)
	if c.Reason != string(v1alpha1.ReasonRetriesExhausted) || !strings.Contains(c.Message, string(v1alpha1.AttemptJobDeleted)) {
		t.Fatalf("Failed condition %s: %s, want RetriesExhausted naming JobDeleted", c.Reason, c.Message)
	}
	if failed.Status.Attempts != 1 || len(failed.Status.Active) != 0 {
		t.Fatalf("status: %s", statusSummary(failed))
	}
	if n := len(jobsOf(t, task)); n != 0 {
		t.Fatalf("%d Jobs, want none", n)
	}
}

func TestDeletingTheSecondAttemptsJobStartsTheThirdNotTheSecondAgain(t *testing.T) {
	task, first := startTask(t, "deleted-second", testutil.MaxRetry(3))
	// Failed long enough ago that the backoff has passed.
	must(t, testutil.FailJob(ctx, k8s, &first, fakeClock.Now().Add(-time.Hour), "BackoffLimitExceeded", "pod failed"))
	waitTask(t, task, "attempt 2 recorded", func(t *v1alpha1.Task) bool { return t.Status.Attempts == 2 && len(t.Status.Active) == 1 })

	second := jobOf(t, task, "0", 2)
	deleteJob(t, second)
	waitTask(t, task, "attempt 3 recorded", func(t *v1alpha1.Task) bool { return t.Status.Attempts == 3 && len(t.Status.Active) == 1 })
	for _, j := range jobsOf(t, task) {
		if j.Name == second.Name {
			t.Fatalf("attempt 2's Job %s was created again", j.Name)
		}
	}
	jobOf(t, task, "0", 3)
}

func TestAJobThatLostItsLabelsGetsThemBackAndStillCounts(t *testing.T) {
	task, job := startTask(t, "relabelled", testutil.MaxRetry(2))
	waitTask(t, task, "attempt 1 recorded", func(t *v1alpha1.Task) bool { return t.Status.Attempts == 1 && len(t.Status.Active) == 1 })

	patch := client.MergeFrom(job.DeepCopy())
	delete(job.Labels, v1alpha1.LabelManagedBy)
	delete(job.Labels, v1alpha1.LabelRun)
	must(t, k8s.Patch(ctx, &job, patch))
	eventually(t, "the labels restored", func() (bool, string) {
		j := getJob(t, &job)
		return j.Labels[v1alpha1.LabelManagedBy] == v1alpha1.ManagedByValue && j.Labels[v1alpha1.LabelRun] == "0", labelsString(j.Labels)
	})
	restored := getJob(t, &job)
	must(t, testutil.CompleteJob(ctx, k8s, restored, fakeClock.Now()))
	done := waitTask(t, task, "phase Succeeded", phaseIs(ok))
	if done.Status.Attempts != 1 || len(jobsOf(t, task)) != 1 {
		t.Fatalf("want the one relabelled Job to count: %s, %d Jobs", statusSummary(done), len(jobsOf(t, task)))
	}
}

func TestATaskInATerminatingNamespaceStartsNothingAndDoesNotRetry(t *testing.T) {
	ns := newNamespace(t)
	task := newTask(ns, "doomed", manual)
	// The namespace stays Terminating: the test API server runs no
	// namespace controller, so the Task outlives the namespace's deletion.
	must(t, k8s.Create(ctx, task))
	waitCached(t, task)
	must(t, k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))

	r := manualReconciler(nil)
	res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)})
	if err != nil || res != (reconcile.Result{}) {
		t.Fatalf("reconcile = %+v, %v; want no error and no requeue", res, err)
	}
	if n := len(jobsOf(t, task)); n != 0 {
		t.Fatalf("%d Jobs in a terminating namespace", n)
	}
}

// deleteJob deletes a Job as kubectl does (in the background; a Job's
// default is to orphan its pods, which the test API server, with no garbage
// collector, would never finish).
func deleteJob(t *testing.T, job *batchv1.Job) {
	t.Helper()
	must(t, k8s.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)))
}

func labelsString(l map[string]string) string {
	var b strings.Builder
	for k, v := range l {
		b.WriteString(k + "=" + v + " ")
	}
	return b.String()
}

// The pass a Job's delete brings may read the Task from a cache that is
// behind the status write that recorded the attempt: from such a Task the
// attempt looks never started. It must not create the deleted Job again
// (the same attempt twice); it looks again once its cache has caught up,
// and then counts the attempt as deleted. (Seen in `make test-stress`
// without the speed shortcuts: the Task back to Running for a minute.)
func TestAPassFromABehindCacheDoesNotCreateAJustDeletedJobAgain(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "deleted-early", manual)
	before := getTask(t, task) // as a lagging cache may still show it
	reconcileUntil(t, task, "attempt 1 recorded", func(x *v1alpha1.Task) bool { return x.Status.Attempts == 1 && len(x.Status.Active) == 1 })
	job := jobsOf(t, task)[0]

	r := manualReconciler(staleTask{Client: manualClient, Task: before})
	deleteJob(t, &job)
	r.SawJobDeleted(&job) // as the Job watch does, before it wakes the Task
	eventually(t, "the Job gone from the manual cache", func() (bool, string) {
		var list batchv1.JobList
		must(t, manualClient.List(ctx, &list, client.InNamespace(ns)))
		return len(list.Items) == 0, itoa(len(list.Items)) + " Jobs"
	})
	res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)})
	must(t, err)
	if n := len(jobsOf(t, task)); n != 0 {
		t.Fatalf("a pass from the behind cache created the deleted Job again (%d Jobs)", n)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > time.Second {
		t.Fatalf("requeued after %s, want at most a second", res.RequeueAfter)
	}

	// Caught up: the attempt counts as deleted, the run fails, no Job.
	failed := reconcileUntil(t, task, "phase Failed", func(x *v1alpha1.Task) bool { return x.Status.Phase == v1alpha1.PhaseFailed })
	if c := condition(failed, v1alpha1.ConditionFailed); !strings.Contains(c.Message, string(v1alpha1.AttemptJobDeleted)) {
		t.Fatalf("Failed condition %s: %s, want it naming JobDeleted", c.Reason, c.Message)
	}
	if n := len(jobsOf(t, task)); n != 0 {
		t.Fatalf("%d Jobs, want none", n)
	}
}
