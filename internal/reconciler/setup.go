package reconciler

import (
	"context"
	"maps"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// CacheOptions keeps the manager's cache small: only the operator's own
// Jobs, no managed fields, and no pods at all (they are read directly and
// rarely).
func CacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&batchv1.Job{}: {Label: labels.SelectorFromSet(labels.Set{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue})},
		},
	}
}

// IndexJobs adds the index the reconciler lists a Task's Jobs by.
func IndexJobs(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &batchv1.Job{}, ownedJobsIndex, JobControllerUID)
}

// SetupWithManager registers the reconciler and the Job index with mgr.
func (r *TaskReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if err := IndexJobs(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("task").
		For(&v1alpha1.Task{}, builder.WithPredicates(taskChanged)).
		Owns(&batchv1.Job{}).
		WithOptions(opts).
		Complete(r)
}

// taskChanged lets through the Task updates a pass must act on: spec
// (generation), annotations (run-now; any annotation change also serves as
// a manual "look again"), finalizers and deletion. The operator's own
// status writes are skipped: they never need a pass.
var taskChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetGeneration() != n.GetGeneration() ||
			!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
			!n.GetDeletionTimestamp().IsZero() ||
			!slices.Equal(o.GetFinalizers(), n.GetFinalizers())
	},
}
