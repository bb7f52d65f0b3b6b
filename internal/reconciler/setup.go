package reconciler

import (
	"context"
	"maps"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/fastpath"
)

// SetupWithManager registers the Task controller with mgr (the indexes it
// lists by are internal/index's; internal/operator wires both controllers).
func (r *TaskReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	owner := handler.EnqueueRequestsFromMapFunc(controllingTask)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("task").
		For(&v1alpha1.Task{}, builder.WithPredicates(taskChanged)).
		// As Owns(&batchv1.Job{}) would, at a lower priority (internal/fastpath).
		// Each deleted Job is remembered before its Task's pass (deletedjobs.go).
		Watches(&batchv1.Job{}, rememberDeletes{next: fastpath.RecordingHandler{Owner: owner}, r: r}, builder.WithPredicates(jobChanged)).
		// An admission starts work: the default priority (queuewatch.go).
		Watches(&v1alpha1.TaskQueue{}, queueToTasks{c: mgr.GetCache(), lines: r.Lines}).
		// An edited holiday calendar (calendarwatch.go).
		Watches(&v1alpha1.TaskCalendar{}, calendarToTasks{c: mgr.GetCache()}).
		// A run of a Task others run after ended (chain.go).
		Watches(&v1alpha1.Task{}, upstreamToTasks{c: mgr.GetCache()}).
		WithOptions(opts)
	// With the shortcuts: new Tasks once more, at start priority; this
	// process's status writes as the cache shows them; and the Tasks the
	// queue controller just admitted, handed over directly.
	return r.Shortcuts.TaskWatches(b, r.newTaskHandler(), r.ownWritesSeen()).Complete(r)
}

// controllingTask maps a Job to the Task that controls it, as
// handler.EnqueueRequestForOwner with OnlyControllerOwner does (any
// version of the Task's group), without its REST mapping of the owner's
// kind on every Job event (a Task is namespaced; the mapping was 2% of a
// burst's CPU).
func controllingTask(_ context.Context, obj client.Object) []reconcile.Request {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Controller == nil || !*ref.Controller || ref.Kind != "Task" {
			continue
		}
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != v1alpha1.GroupVersion.Group {
			continue
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}}}
	}
	return nil
}

// newTaskHandler enqueues each new Task (no status yet) at start
// priority, or above it while its namespace is within its fair share
// (fairness.go). For's handler enqueues the Tasks of the initial list (every
// Task when the operator starts) at handler.LowPriority, so that after a
// restart real events go first; but a Task that never ran is work to
// start, and without this the create events of the Jobs its neighbours
// got (record priority) would overtake it, and Tasks created before the
// operator started would wait behind every record (docs/performance-history.md,
// "pre-created burst"). The queue keeps one item per Task, at the higher
// priority.
func (r *TaskReconciler) newTaskHandler() handler.TypedFuncs[client.Object, reconcile.Request] {
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			t, ok := e.Object.(*v1alpha1.Task)
			if !ok || t.Status.ObservedGeneration != 0 || !t.DeletionTimestamp.IsZero() {
				return
			}
			req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(t)}
			prio := fastpath.StartPriority
			if r.newTasks.add(req.NamespacedName) {
				prio = fastpath.FairStartPriority
			}
			fastpath.AtPriority(q, prio).Add(req)
		},
	}
}

// ownWritesSeen enqueues nothing: it tells the shortcuts which status
// writes the cache now shows, so their copies go at once instead of
// staying until a TTL or a later write.
func (r *TaskReconciler) ownWritesSeen() handler.TypedFuncs[client.Object, reconcile.Request] {
	return handler.TypedFuncs[client.Object, reconcile.Request]{
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[client.Object], _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if t, ok := e.ObjectNew.(*v1alpha1.Task); ok {
				r.Shortcuts.CacheShows(t)
			}
		},
	}
}

// taskChanged lets through the Task updates a pass must act on: spec
// (generation), annotations (run-now; any annotation change also serves as
// a manual "look again") and deletion. The operator's own writes are
// skipped: its status writes and its finalizer (added right before the
// first status write) never need a pass; a finalizer someone removed is
// added back by the next pass.
var taskChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetGeneration() != n.GetGeneration() ||
			!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
			!n.GetDeletionTimestamp().IsZero()
	},
}

// jobChanged lets through the Job updates that change what a pass reads of
// a Job: what the cache keeps of it (trimJob, cache.go), its resource
// version apart. The Job controller writes a Job several times per pod
// (finalizer bookkeeping in status.uncountedTerminatedPods, for one); a
// pass for those would observe the same attempt and decide the same.
var jobChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*batchv1.Job)
		n, ok2 := e.ObjectNew.(*batchv1.Job)
		if !ok1 || !ok2 {
			return true
		}
		return !sameTrimmedJob(o, n)
	},
}

// sameTrimmedJob reports whether a and b hold the same after trimJob,
// resource versions apart. The spec is compared by the three fields trimJob
// keeps of it: a reflective comparison of the whole JobSpec walked every
// field of its (empty) pod template on every Job event.
func sameTrimmedJob(a, b *batchv1.Job) bool {
	ta, _ := trimJob(a)
	tb, _ := trimJob(b)
	ja, jb := ta.(*batchv1.Job), tb.(*batchv1.Job)
	ma, mb := ja.ObjectMeta, jb.ObjectMeta
	ma.ResourceVersion, mb.ResourceVersion = "", ""
	return ptr.Equal(ja.Spec.Completions, jb.Spec.Completions) && ptr.Equal(ja.Spec.Suspend, jb.Spec.Suspend) &&
		ptr.Equal(ja.Spec.ManagedBy, jb.Spec.ManagedBy) &&
		equality.Semantic.DeepEqual(ja.Status, jb.Status) && equality.Semantic.DeepEqual(ma, mb)
}
