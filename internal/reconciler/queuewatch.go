package reconciler

import (
	"context"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/fastpath"
	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/waitline"
)

// wakeQueue hands the Task to its queue's line and controller at once
// (fastpath.PutInLine), when its status write changed what it waits for.
func (r *TaskReconciler) wakeQueue(task *v1alpha1.Task, old *v1alpha1.TaskStatus) {
	if !slices.Equal(index.QueuedJobNames(task.Status.Queued), index.QueuedJobNames(old.Queued)) {
		r.Shortcuts.PutInLine(task, r.Lines.Put)
	}
}

// queueToTasks wakes the Tasks a TaskQueue change concerns: those whose
// attempt it just admitted (their Job is created next), and, when the
// queue appears, goes or is suspended or resumed, every Task naming it
// (their status says so).
type queueToTasks struct {
	c client.Reader
	// lines are the queues' lines in memory (internal/waitline): with the
	// speed shortcuts on they hold a Task as its status write returned,
	// before this cache shows it.
	lines *waitline.Lines
}

func (h queueToTasks) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.all(ctx, e.Object, q)
}

func (h queueToTasks) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	o, n := e.ObjectOld.(*v1alpha1.TaskQueue), e.ObjectNew.(*v1alpha1.TaskQueue)
	if ptr.Deref(o.Spec.Suspend, false) != ptr.Deref(n.Spec.Suspend, false) {
		h.all(ctx, n, q)
		return
	}
	for _, name := range n.Status.Admitted {
		if _, was := slices.BinarySearch(o.Status.Admitted, name); was {
			continue
		}
		if !h.wakeAdmitted(ctx, n, name, q) {
			// Nothing here knows the attempt: the Task that waits for it
			// is on its way to this cache (its status write is not seen
			// yet). Without the speed shortcuts' hand-over nothing else
			// would take that Task again, so take every Task of the
			// queue (rare: bounded by the queue's Tasks).
			h.all(ctx, n, q)
			return
		}
	}
}

// wakeAdmitted enqueues, at AdmitPriority, the Task waiting for the
// attempt the queue tq just admitted as Job name, and reports whether it
// knows where that attempt stands: a Task waits for it (in the queue's
// line in memory, or by this cache's index), or its Job exists (it
// started: nobody to wake). Under a burst the Task that was admitted has
// often started its Job and left the line before this event arrives;
// taking every Task of a queue of thousands for it cost thousands of
// passes that decide nothing (docs/performance-history.md, "The long line's
// tail, followed").
func (h queueToTasks) wakeAdmitted(ctx context.Context, tq *v1alpha1.TaskQueue, name string, q workqueue.TypedRateLimitingInterface[reconcile.Request]) bool {
	if task, ok := h.lines.Waiter(tq.Namespace, tq.Name, name); ok {
		fastpath.AddAdmitted(q, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: tq.Namespace, Name: task}})
		return true
	}
	var list v1alpha1.TaskList
	if err := h.c.List(ctx, &list, client.InNamespace(tq.Namespace), client.MatchingFields{index.QueuedJob: name}, client.UnsafeDisableDeepCopy); err == nil && len(list.Items) > 0 {
		for i := range list.Items {
			fastpath.AddAdmitted(q, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return true
	}
	return h.c.Get(ctx, client.ObjectKey{Namespace: tq.Namespace, Name: name}, &batchv1.Job{}) == nil
}

func (h queueToTasks) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.all(ctx, e.Object, q)
}

func (queueToTasks) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (h queueToTasks) all(ctx context.Context, tq client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueueTasksBy(ctx, h.c, q, tq.GetNamespace(), index.TaskQueue, tq.GetName())
}

// enqueueTasksBy enqueues the Tasks of namespace ns whose field index
// field holds value (a queue's, a holiday list's).
func enqueueTasksBy(ctx context.Context, c client.Reader, q workqueue.TypedRateLimitingInterface[reconcile.Request], ns, field, value string) {
	var list v1alpha1.TaskList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{field: value}, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	for i := range list.Items {
		q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
}
