package reconciler_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/internal/testutil/opsuite"
)

// manual marks a Task for hand-driven reconcilers only.
var manual = opsuite.Manual

// crashBeforeStatus is a client whose status writes fail, like an
// operator that dies between creating a Job and recording it.
func crashBeforeStatus() client.Client { return crashingClient{manualClient} }

type crashingClient struct{ client.Client }

func (c crashingClient) Status() client.SubResourceWriter { return failingStatus{c.Client.Status()} }

type failingStatus struct{ client.SubResourceWriter }

func (failingStatus) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return errors.New("simulated crash before the status write")
}

// reconcileUntil runs passes of a fresh reconciler until the stored Task
// satisfies ok, as the workqueue would re-run passes while the cache
// catches up; a conflict with a concurrent pass is retried the same way.
func reconcileUntil(t *testing.T, task *v1alpha1.Task, what string, ok func(*v1alpha1.Task) bool) *v1alpha1.Task {
	t.Helper()
	r := manualReconciler(nil)
	var got *v1alpha1.Task
	eventually(t, what, func() (bool, string) {
		_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)})
		got = getTask(t, task)
		return err == nil && ok(got), errString(err) + "; " + statusSummary(got)
	})
	return got
}

// waitCached waits until the hand-driven reconcilers' cache has the Task:
// a real pass only ever runs after its informer saw the object.
func waitCached(t *testing.T, task *v1alpha1.Task) {
	t.Helper()
	eventually(t, "the Task in the manual cache", func() (bool, string) {
		err := manualClient.Get(ctx, client.ObjectKeyFromObject(task), &v1alpha1.Task{})
		return err == nil, errString(err)
	})
}

func attemptsAre(n int32, phase v1alpha1.TaskPhase) func(*v1alpha1.Task) bool {
	return func(x *v1alpha1.Task) bool { return x.Status.Attempts == n && x.Status.Phase == phase }
}

func TestALostStatusWriteAfterJobCreationMakesNoSecondJob(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "crashy", manual, testutil.MaxRetry(1))

	waitCached(t, task)
	crashing := manualReconciler(crashBeforeStatus())
	// The pass that creates the Job leaves the status write to the next
	// pass; the next ones try and fail.
	failed := 0
	for i := 0; i < 3; i++ {
		if _, err := crashing.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)}); err != nil {
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("no pass of the crashing reconciler tried to write the status")
	}
	if got := getTask(t, task); got.Status.CurrentRun != "" {
		t.Fatalf("status was written: %s", statusSummary(got))
	}
	if n := len(jobsOf(t, task)); n != 1 {
		t.Fatalf("%d Jobs after three crashed passes, want 1", n)
	}

	got := reconcileUntil(t, task, "attempt 1 running", attemptsAre(1, v1alpha1.PhaseRunning))
	if len(jobsOf(t, task)) != 1 {
		t.Fatalf("after the restart: %s, %d Jobs", statusSummary(got), len(jobsOf(t, task)))
	}

	// The same after a failed attempt: the retry is neither lost nor doubled.
	job := jobsOf(t, task)[0]
	must(t, testutil.FailJob(ctx, k8s, &job, fakeClock.Now().Add(-time10s), "BackoffLimitExceeded", "x"))
	eventually(t, "the crashing reconciler to start attempt 2", func() (bool, string) {
		_, _ = crashing.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)})
		n := len(jobsOf(t, task))
		return n == 2, itoa(n) + " Jobs"
	})
	got = reconcileUntil(t, task, "attempt 2 running", attemptsAre(2, v1alpha1.PhaseRunning))
	if len(jobsOf(t, task)) != 2 {
		t.Fatalf("after the second restart: %s, %d Jobs", statusSummary(got), len(jobsOf(t, task)))
	}
}

func TestTwoReconcilersRacingCreateOneJobPerAttempt(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "racy", manual, testutil.MaxRetry(3))

	race := func() {
		var wg sync.WaitGroup
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := manualReconciler(nil)
				for j := 0; j < 5; j++ {
					_, _ = r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)})
				}
			}()
		}
		wg.Wait()
	}
	for attempt := int32(1); attempt <= 4; attempt++ {
		race()
		reconcileUntil(t, task, "attempt running", attemptsAre(attempt, v1alpha1.PhaseRunning))
		if n := len(jobsOf(t, task)); n != int(attempt) {
			t.Fatalf("attempt %d: %d Jobs", attempt, n)
		}
		job := jobOf(t, task, "0", int(attempt))
		// Failed an hour ago: every backoff has passed.
		must(t, testutil.FailJob(ctx, k8s, job, fakeClock.Now().Add(-time.Hour), "BackoffLimitExceeded", "x"))
	}
	race()
	reconcileUntil(t, task, "the Task failed for good", attemptsAre(4, v1alpha1.PhaseFailed))
	if n := len(jobsOf(t, task)); n != 4 {
		t.Fatalf("%d Jobs for 4 attempts", n)
	}
}

func TestAWipedStatusIsRebuiltFromTheJobs(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "amnesia", manual, testutil.MaxRetry(2))
	reconcileUntil(t, task, "attempt 1 running", attemptsAre(1, v1alpha1.PhaseRunning))
	job := jobsOf(t, task)[0]
	must(t, testutil.FailJob(ctx, k8s, &job, fakeClock.Now().Add(-time10s), "BackoffLimitExceeded", "x"))
	before := reconcileUntil(t, task, "attempt 2 running", attemptsAre(2, v1alpha1.PhaseRunning))

	wiped := before.DeepCopy()
	wiped.Status = v1alpha1.TaskStatus{}
	must(t, k8s.Status().Update(ctx, wiped))
	after := reconcileUntil(t, task, "the status rebuilt", attemptsAre(2, v1alpha1.PhaseRunning))
	if after.Status.CurrentRun != "0" || len(jobsOf(t, task)) != 2 {
		t.Fatalf("rebuilt: %s, %d Jobs", statusSummary(after), len(jobsOf(t, task)))
	}
	if len(after.Status.History) != 1 || after.Status.History[0].Attempts != 2 {
		t.Fatalf("rebuilt history: %+v", after.Status.History)
	}
}
