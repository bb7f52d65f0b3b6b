package reconciler

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// reconcileDelete stops a deleted Task's Jobs and their pods, then lets the
// Task go. Jobs are deleted with propagationPolicy Background, so their
// pods follow without the finalizer waiting on them. In a namespace being
// deleted the namespace controller removes the Jobs anyway, so a failure
// there never blocks the namespace.
func (r *TaskReconciler) reconcileDelete(ctx context.Context, task *v1alpha1.Task) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(task, v1alpha1.Finalizer) {
		return reconcile.Result{}, nil
	}
	if err := r.deleteJobs(ctx, task); err != nil {
		if !r.namespaceTerminating(ctx, task.Namespace) {
			r.event(task, nil, eventWarning, v1alpha1.EventCleanupFailed, "DeleteJobs", "could not delete the Task's Jobs: "+err.Error())
			return reconcile.Result{}, err
		}
		log.FromContext(ctx).Info("namespace is terminating; leaving the Jobs to it", "error", err.Error())
	}
	base := task.DeepCopy()
	controllerutil.RemoveFinalizer(task, v1alpha1.Finalizer)
	return reconcile.Result{}, ctrl.IgnoreNotFound(r.Client.Patch(ctx, task, ctrl.MergeFrom(base)))
}

// deleteJobs deletes every Job the Task controls.
func (r *TaskReconciler) deleteJobs(ctx context.Context, task *v1alpha1.Task) error {
	jobs, err := r.listJobs(ctx, task)
	if err != nil {
		return err
	}
	for i := range jobs {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: jobs[i].Namespace, Name: jobs[i].Name}}
		err := r.Client.Delete(ctx, job, ctrl.PropagationPolicy(metav1.DeletePropagationBackground),
			ctrl.Preconditions{UID: &jobs[i].UID})
		if ctrl.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// namespaceTerminating reports whether a namespace is being deleted.
func (r *TaskReconciler) namespaceTerminating(ctx context.Context, name string) bool {
	ns := &corev1.Namespace{}
	if err := r.APIReader.Get(ctx, ctrl.ObjectKey{Name: name}, ns); err != nil {
		return true // gone, or unreadable: never block on it
	}
	return !ns.DeletionTimestamp.IsZero()
}
