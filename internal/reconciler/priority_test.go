package reconciler

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestJobEventsQueueBehindWorkToStart(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	recorded := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "recorded"}}
	started := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "started"}}

	atRecordPriority(q).Add(recorded) // a Job event, first
	q.Add(started)                    // a new Task, after it

	first, prio, _ := q.GetWithPriority()
	if first != started || prio != startPriority {
		t.Fatalf("first out: %v at %d, want %v at %d", first, prio, started, startPriority)
	}
	second, prio, _ := q.GetWithPriority()
	if second != recorded || prio != recordPriority {
		t.Fatalf("second out: %v at %d, want %v at %d", second, prio, recorded, recordPriority)
	}
}

func TestAJobEventDoesNotLowerATaskAlreadyQueuedToStart(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "t"}}
	q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(startPriority)}, req)
	atRecordPriority(q).Add(req)
	if _, prio, _ := q.GetWithPriority(); prio != startPriority {
		t.Fatalf("priority %d, want %d", prio, startPriority)
	}
}
