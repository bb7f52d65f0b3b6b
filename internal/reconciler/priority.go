package reconciler

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Queue priorities. A pass that starts work (a new or edited Task, a due
// cron slot or retry) runs before one that mostly records what a Job did:
// in a burst or a cron slot of many Tasks every Job is created first and
// the status writes follow, instead of each Job waiting behind the status
// writes of the Jobs before it. Recording waits only while there is work
// to start, and loses nothing: the pass reads the Jobs as they are then.
//
// A Task whose queue just admitted its attempt goes first of all
// (admitPriority): its place is held from that moment, so every delay
// before its Job exists is a place left idle.
const (
	admitPriority  = 1
	startPriority  = 0  // controller-runtime's default
	recordPriority = -1 // above handler.LowPriority (-100), the initial list
)

// recordingHandler enqueues the owner Task of a Job event at
// recordPriority.
type recordingHandler struct{ inner handler.EventHandler }

func (h recordingHandler) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.inner.Create(ctx, e, atRecordPriority(q))
}

func (h recordingHandler) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.inner.Update(ctx, e, atRecordPriority(q))
}

func (h recordingHandler) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.inner.Delete(ctx, e, atRecordPriority(q))
}

func (h recordingHandler) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.inner.Generic(ctx, e, atRecordPriority(q))
}

// atRecordPriority makes a priority queue add at recordPriority unless
// told otherwise; any other queue is returned as it is.
func atRecordPriority(q workqueue.TypedRateLimitingInterface[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return recordQueue{pq}
	}
	return q
}

type recordQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
}

func (q recordQueue) Add(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, item)
}

func (q recordQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.Priority == nil {
		o.Priority = ptr.To(recordPriority)
	}
	q.PriorityQueue.AddWithOpts(o, items...)
}
