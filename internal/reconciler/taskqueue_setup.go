package reconciler

import (
	"context"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/fastpath"
)

// The indexes queues are read by.
const (
	// taskQueueIndex indexes Tasks by spec.queueName.
	taskQueueIndex = ".spec.queueName"
	// queuedJobIndex indexes Tasks by the Job names they wait to have
	// admitted (status.queued), so an admission wakes exactly their Tasks.
	queuedJobIndex = ".status.queued.jobName"
	// jobQueueIndex indexes Jobs by the queue that admitted them (label).
	jobQueueIndex = ".metadata.labels.queue"
)

// IndexQueues adds the indexes queues are read by.
func IndexQueues(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &v1alpha1.Task{}, taskQueueIndex, func(o client.Object) []string {
		if q := o.(*v1alpha1.Task).Spec.QueueName; q != "" {
			return []string{q}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &v1alpha1.Task{}, queuedJobIndex, func(o client.Object) []string {
		return queuedJobNames(o.(*v1alpha1.Task).Status.Queued)
	}); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &batchv1.Job{}, jobQueueIndex, func(o client.Object) []string {
		if q := o.GetLabels()[v1alpha1.LabelQueue]; q != "" {
			return []string{q}
		}
		return nil
	})
}

// wakeQueue tells the queue controller at once that a status write of this
// process changed what a Task waits for: under a burst the cache (and so
// the Task watch) lags by seconds.
func (r *TaskReconciler) wakeQueue(task *v1alpha1.Task, old *v1alpha1.TaskStatus) {
	if !slices.Equal(queuedJobNames(task.Status.Queued), queuedJobNames(old.Queued)) {
		r.Shortcuts.WakeQueue(task.Namespace, task.Spec.QueueName)
	}
}

// setupQueues registers the queue controller, next to the Task controller
// it shares the cache, the client and the lease with.
func (r *TaskReconciler) setupQueues(mgr ctrl.Manager, opts controller.Options) error {
	qr := &QueueReconciler{Client: r.Client, APIReader: r.APIReader, Recorder: r.Recorder, Clock: r.Clock, Lease: r.Lease, Shortcuts: r.Shortcuts}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("taskqueue").
		For(&v1alpha1.TaskQueue{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.Task{}, taskToQueue{}).
		Watches(&batchv1.Job{}, jobToQueue{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles, RateLimiter: opts.RateLimiter, UsePriorityQueue: opts.UsePriorityQueue})
	if r.Shortcuts.On() {
		b = b.WatchesRawSource(r.Shortcuts.QueueWakes())
	}
	return b.Complete(qr)
}

// taskToQueue wakes a Task's queue when what the queue decides from
// changes: the attempts the Task waits for, its priority, suspend, queue
// name (both queues), or the Task going.
type taskToQueue struct{}

func (taskToQueue) Create(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	t := e.Object.(*v1alpha1.Task)
	if len(t.Status.Queued) > 0 {
		addQueue(q, t.Namespace, t.Spec.QueueName)
	}
}

func (taskToQueue) Update(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	o, n := e.ObjectOld.(*v1alpha1.Task), e.ObjectNew.(*v1alpha1.Task)
	if o.Spec.QueueName == n.Spec.QueueName && o.Spec.Priority == n.Spec.Priority &&
		ptr.Deref(o.Spec.Suspend, false) == ptr.Deref(n.Spec.Suspend, false) &&
		o.DeletionTimestamp.IsZero() == n.DeletionTimestamp.IsZero() &&
		slices.Equal(queuedJobNames(o.Status.Queued), queuedJobNames(n.Status.Queued)) {
		return
	}
	addQueue(q, o.Namespace, o.Spec.QueueName)
	addQueue(q, n.Namespace, n.Spec.QueueName)
}

func (taskToQueue) Delete(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	t := e.Object.(*v1alpha1.Task)
	addQueue(q, t.Namespace, t.Spec.QueueName)
}

func (taskToQueue) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

// jobToQueue wakes a Job's queue when the Job finishes (its place frees)
// or goes. A Job's creation changes nothing: its place was taken when it
// was admitted.
type jobToQueue struct{}

func (jobToQueue) Create(context.Context, event.CreateEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (jobToQueue) Update(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	o, n := e.ObjectOld.(*batchv1.Job), e.ObjectNew.(*batchv1.Job)
	if jobState(o) != jobState(n) || o.Labels[v1alpha1.LabelQueue] != n.Labels[v1alpha1.LabelQueue] {
		addQueue(q, o.Namespace, o.Labels[v1alpha1.LabelQueue])
		addQueue(q, n.Namespace, n.Labels[v1alpha1.LabelQueue])
	}
}

func (jobToQueue) Delete(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	addQueue(q, e.Object.GetNamespace(), e.Object.GetLabels()[v1alpha1.LabelQueue])
}

func (jobToQueue) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func addQueue(q workqueue.TypedRateLimitingInterface[reconcile.Request], ns, name string) {
	if name != "" {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
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
		err := h.c.List(ctx, &list, client.InNamespace(n.Namespace), client.MatchingFields{queuedJobIndex: name}, client.UnsafeDisableDeepCopy)
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
	var list v1alpha1.TaskList
	if err := h.c.List(ctx, &list, client.InNamespace(tq.GetNamespace()), client.MatchingFields{taskQueueIndex: tq.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		return
	}
	for i := range list.Items {
		q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
}
