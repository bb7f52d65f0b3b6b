package fastpath

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

// Queue priorities. A pass that starts work (a new or edited Task, a due
// cron slot or retry) runs before one that mostly records what a Job did:
// in a burst or a cron slot of many Tasks every Job is created first and
// the status writes follow, instead of each Job waiting behind the status
// writes of the Jobs before it. Recording waits only while there is work
// to start, and loses nothing: the pass reads the Jobs as they are then.
//
// A Task whose queue just admitted its attempt goes first of all
// (AdmitPriority): its place is held from that moment, so every delay
// before its Job exists is a place left idle.
//
// Among the records, a Job that just finished goes first (FinishPriority):
// it ends a run, so its pass is what the user waits for (Ready, the next
// retry, a notification), while the record of a Job just created only
// shows what already runs. In a burst, without it a finished Job's pass
// queued behind the records of every Job created before it (the figures:
// docs/performance-history.md); and a Task whose Job finishes before
// its creation was recorded gets one status write for both, since the
// queue keeps one item per Task at the higher priority.
//
// A Task woken for a line write's place (LineWakePriority, linewrites.go)
// goes next: the place is held for it from the wake-up, and while a flood
// of new Tasks joins one queue the line may hold fewer Tasks than the
// places that free, so that write is what the next admission waits for.
// A queue has at most LineWrites such Tasks at once, so they cannot
// starve other work.
//
// A new Task whose namespace has fewer than fairShare new Tasks waiting
// goes before other starts (FairStartPriority, internal/reconciler/fairness.go), so one
// namespace's flood cannot starve another's.
const (
	AdmitPriority     = 3
	LineWakePriority  = 2
	FairStartPriority = 1
	StartPriority     = 0  // controller-runtime's default
	FinishPriority    = -1 // a Job of the Task finished
	RecordPriority    = -2 // any other Job event; above handler.LowPriority (-100), the initial list
)

// RecordingHandler enqueues the owner Task of a Job event at
// RecordPriority, or at FinishPriority for the update that finished the
// Job.
type RecordingHandler struct{ Owner handler.EventHandler }

func (h RecordingHandler) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.Owner.Create(ctx, e, AtRecordPriority(q))
}

func (h RecordingHandler) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if finishedNow(e) {
		h.Owner.Update(ctx, e, AtPriority(q, FinishPriority))
		return
	}
	h.Owner.Update(ctx, e, AtRecordPriority(q))
}

// finishedNow reports whether e is the update in which a Job finished.
func finishedNow(e event.UpdateEvent) bool {
	old, ok1 := e.ObjectOld.(*batchv1.Job)
	job, ok2 := e.ObjectNew.(*batchv1.Job)
	return ok1 && ok2 && JobUpdatePriority(old, job) == FinishPriority
}

// JobUpdatePriority is the priority at which a Job's update from old to
// job queues its Task's pass: FinishPriority for the update in which the
// Job finished, RecordPriority for any other.
func JobUpdatePriority(old, job *batchv1.Job) int {
	if runs.JobFinished(job) && !runs.JobFinished(old) {
		return FinishPriority
	}
	return RecordPriority
}

func (h RecordingHandler) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.Owner.Delete(ctx, e, AtRecordPriority(q))
}

func (h RecordingHandler) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.Owner.Generic(ctx, e, AtRecordPriority(q))
}

// AtRecordPriority makes a priority queue add at RecordPriority unless
// told otherwise; any other queue is returned as it is.
func AtRecordPriority(q workqueue.TypedRateLimitingInterface[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	return AtPriority(q, RecordPriority)
}

// AtPriority makes a priority queue add at prio unless told otherwise;
// any other queue is returned as it is.
func AtPriority(q workqueue.TypedRateLimitingInterface[reconcile.Request], prio int) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		return priorityQueueAt{pq, prio}
	}
	return q
}

type priorityQueueAt struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	prio int
}

func (q priorityQueueAt) Add(item reconcile.Request) {
	q.AddWithOpts(priorityqueue.AddOpts{}, item)
}

func (q priorityQueueAt) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if o.Priority == nil {
		o.Priority = ptr.To(q.prio)
	}
	q.PriorityQueue.AddWithOpts(o, items...)
}

// LineWakeHandler enqueues the Tasks woken for a line write's place
// (LineWakes) at LineWakePriority.
var LineWakeHandler = wakeHandler(LineWakePriority)

// AdmittedHandler enqueues the Tasks the queue controller hands over
// (Shortcuts.HandAdmitted) at AdmitPriority (AddAdmitted says why).
var AdmittedHandler = wakeHandler(AdmitPriority)

// wakeHandler enqueues the Tasks of a channel of wake-ups at prio.
func wakeHandler(prio int) handler.TypedFuncs[*v1alpha1.Task, reconcile.Request] {
	return handler.TypedFuncs[*v1alpha1.Task, reconcile.Request]{
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[*v1alpha1.Task], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			AtPriority(q, prio).Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(e.Object)})
		},
	}
}

// AddAdmitted enqueues a Task whose attempt was just admitted at
// AdmitPriority: its place is already taken, so its Job goes before the
// first passes of Tasks that only join the line (a burst of queued Tasks
// would otherwise keep the admitted ones waiting behind them). A plain
// queue (shortcuts off) just adds it.
func AddAdmitted(q workqueue.TypedRateLimitingInterface[reconcile.Request], req reconcile.Request) {
	AtPriority(q, AdmitPriority).Add(req)
}
