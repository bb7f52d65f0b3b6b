package reconciler_test

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

// What another party (or a later edit) does must not change a result CI
// has already acted on. The table of these cases is in
// docs/reliability.md ("What another party can do to a Task's children").

// Raising maxRetry on a Task whose run failed for good reopens nothing:
// the history that recorded the failure decides, not the Jobs alone.
func TestRaisingMaxRetryAfterARunFailedStartsNoAttempt(t *testing.T) {
	ns := newNamespace(t)
	task := newTask(ns, "no-reopen", manual, testutil.MaxRetry(0))
	must(t, k8s.Create(ctx, task))
	reconcileUntil(t, task, "the first Job", func(*v1alpha1.Task) bool { return len(jobsOf(t, task)) == 1 })
	job := jobsOf(t, task)[0]
	must(t, testutil.FailJob(ctx, k8s, &job, fakeClock.Now(), "BackoffLimitExceeded", "exit 3"))
	reconcileUntil(t, task, "phase Failed", phaseIs(v1alpha1.PhaseFailed))

	edited := getTask(t, task)
	edited.Spec.MaxRetry = 2
	must(t, k8s.Update(ctx, edited))
	reconcileUntil(t, task, "the edit seen", func(x *v1alpha1.Task) bool { return x.Status.ObservedGeneration == edited.Generation })
	eventually(t, "the edit in the manual cache", func() (bool, string) {
		var cached v1alpha1.Task
		err := manualClient.Get(ctx, client.ObjectKeyFromObject(task), &cached)
		return err == nil && cached.Spec.MaxRetry == 2 && cached.Status.ObservedGeneration == edited.Generation, errString(err)
	})
	fakeClock.SetTime(fakeClock.Now().Add(time.Minute)) // past any backoff
	r := manualReconciler(nil)
	for range 3 {
		reconcileOnce(t, r, task)
	}
	got := getTask(t, task)
	if n := len(jobsOf(t, task)); n != 1 || got.Status.Phase != v1alpha1.PhaseFailed || got.Status.Attempts != 1 {
		t.Fatalf("maxRetry 0 -> 2 on a failed run: %d Jobs, %s", n, statusSummary(got))
	}
}
