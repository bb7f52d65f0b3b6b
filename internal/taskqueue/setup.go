package taskqueue

import (
	"context"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/fastpath"
	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/waitline"
)

// SetupWithManager registers the queue controller with mgr. Its
// passes are driven by events only (the watches below, and the Task
// controller's wake-ups when the shortcuts are on); the indexes it lists by
// are internal/index's. The controller starts once its Task watch has
// seen every Task, so the lines are whole before the first pass.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named("taskqueue").
		For(&v1alpha1.TaskQueue{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.Task{}, taskToQueue{lines: r.Lines, shortcuts: r.Shortcuts}).
		Watches(&batchv1.Job{}, jobToQueue{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles, RateLimiter: opts.RateLimiter, UsePriorityQueue: opts.UsePriorityQueue})
	return r.Shortcuts.QueueWatches(b).Complete(r)
}

// taskToQueue keeps the Task's queue's line (waitline) and wakes the
// queue when what the queue decides from changes: the attempts the Task
// waits for, its priority, suspend, queue name (both queues), or the Task
// going. It puts the Task in the line before it wakes the queue, so the
// pass sees the event that woke it. Each Task is read through the
// shortcuts (Peek): a status write of this process that the cache does
// not show yet is not undone by an older event.
type taskToQueue struct {
	lines     *waitline.Lines
	shortcuts *fastpath.Shortcuts
}

func (h taskToQueue) Create(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	t := e.Object.(*v1alpha1.Task)
	h.lines.Put(h.shortcuts.Peek(t))
	if len(t.Status.Queued) > 0 {
		addQueue(q, t.Namespace, t.Spec.QueueName)
	}
}

func (h taskToQueue) Update(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	o, n := e.ObjectOld.(*v1alpha1.Task), e.ObjectNew.(*v1alpha1.Task)
	h.lines.Put(h.shortcuts.Peek(n))
	if o.Spec.QueueName == n.Spec.QueueName && o.Spec.Priority == n.Spec.Priority &&
		ptr.Deref(o.Spec.Suspend, false) == ptr.Deref(n.Spec.Suspend, false) &&
		o.DeletionTimestamp.IsZero() == n.DeletionTimestamp.IsZero() &&
		slices.Equal(index.QueuedJobNames(o.Status.Queued), index.QueuedJobNames(n.Status.Queued)) {
		return
	}
	addQueue(q, o.Namespace, o.Spec.QueueName)
	addQueue(q, n.Namespace, n.Spec.QueueName)
}

func (h taskToQueue) Delete(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	t := e.Object.(*v1alpha1.Task)
	h.lines.Remove(t.Namespace, t.Name)
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
	if runs.HoldsPlace(o) != runs.HoldsPlace(n) || o.Labels[v1alpha1.LabelQueue] != n.Labels[v1alpha1.LabelQueue] {
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
