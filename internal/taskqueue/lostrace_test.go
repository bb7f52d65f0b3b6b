package taskqueue

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

// A record write built on a stale base can be refused as Invalid (the
// JSON patch misses a position before the lock is checked): against a
// real API server, that refusal counts as the lost race it is, and a
// refusal of a patch wrong on the current queue does not.
func TestARecordWriteOnAStaleBaseIsALostRaceNotAnError(t *testing.T) {
	_, c, stop, err := testutil.StartAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx := context.Background()
	r := &Reconciler{Client: c, APIReader: c}

	tq := testutil.NewTaskQueue("default", "q", 3)
	if err := c.Create(ctx, tq); err != nil {
		t.Fatal(err)
	}
	setAdmitted := func(names ...string) {
		t.Helper()
		tq.Status.Admitted, tq.Status.Running, tq.Status.ObservedGeneration = names, int32(len(names)), tq.Generation
		if err := c.Status().Update(ctx, tq); err != nil {
			t.Fatal(err)
		}
	}
	setAdmitted("a", "b", "c")
	base := tq.DeepCopy() // what a pass read
	setAdmitted("a")      // another pass won the race since

	want := base.Status
	want.Admitted, want.Running = []string{"a", "b"}, 2 // "c" released: a removal past the stored list's end
	err = c.Status().Patch(ctx, base.DeepCopy(), recordPatch(base, &want))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("the stale patch: want the API server's 422 Invalid (the case this guards), got %v", err)
	}
	if !r.lostRace(ctx, base, err) {
		t.Errorf("a refusal on a stale base must count as a lost race: %v", err)
	}

	// The same kind of refusal on the current queue (the base's
	// resourceVersion is the stored one) is a wrong patch: an error.
	lying := tq.DeepCopy()
	lying.Status.Admitted = []string{"a", "b", "c"}
	err = c.Status().Patch(ctx, lying.DeepCopy(), recordPatch(lying, &want))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("the wrong patch: want 422 Invalid, got %v", err)
	}
	if r.lostRace(ctx, lying, err) {
		t.Errorf("a wrong patch on the current queue must stay an error: %v", err)
	}
	if r.lostRace(ctx, base, apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("taskqueues").GroupResource(), "q")) {
		t.Error("only an Invalid refusal can be a lost race")
	}
}
