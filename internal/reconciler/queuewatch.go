package reconciler

import (
	"context"
	"slices"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/fastpath"
	"github.com/taskops/task-operator/internal/index"
)

// wakeQueue puts the Task in its queue's line as its status write left it
// and tells the queue controller at once, when the write changed what the
// Task waits for: under a burst the cache (and so the Task watch) lags by
// seconds. A speed shortcut: off, the watch does both.
func (r *TaskReconciler) wakeQueue(task *v1alpha1.Task, old *v1alpha1.TaskStatus) {
	if r.Shortcuts.On() && !slices.Equal(index.QueuedJobNames(task.Status.Queued), index.QueuedJobNames(old.Queued)) {
		r.Lines.Put(task)
		r.Shortcuts.WakeQueue(task.Namespace, task.Spec.QueueName)
	}
}

// queueToTasks wakes the Tasks a TaskQueue change concerns: those whose
// attempt it just admitted (their Job is created next), and, when the
// queue appears, goes or is suspended or resumed, every Task naming it
// (their status says so).
type queueToTasks struct{ c client.Reader }

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
		var list v1alpha1.TaskList
		err := h.c.List(ctx, &list, client.InNamespace(n.Namespace), client.MatchingFields{index.QueuedJob: name}, client.UnsafeDisableDeepCopy)
		if err != nil || len(list.Items) == 0 {
			// The queue admitted from a Task this cache does not show
			// waiting for that name yet (its status write is still on
			// its way): without the speed shortcuts' wake-up nothing
			// else would take that Task again, so take every Task of
			// the queue (a rare, bounded cost).
			h.all(ctx, n, q)
			return
		}
		for i := range list.Items {
			fastpath.AddAdmitted(q, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
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
