package reconciler

import (
	"context"
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/notify"
)

// notificationWait bounds how long a deleted Task waits for its
// notifications to be sent: a notification Job's own deadline plus time
// for the Job controller to mark it finished. A notification is part of
// the run's outcome that someone was promised; a CI job that deletes its
// Task right after `kubectl wait` must not lose it. Past the bound the
// Task goes anyway: a delete never hangs on a webhook.
const notificationWait = jobs.NotificationDeadline + 30*time.Second

// reconcileDelete stops a deleted Task's Jobs and their pods, then lets the
// Task go. Attempt Jobs are deleted at once (propagationPolicy Background,
// so their pods follow without the finalizer waiting on them); a
// notification Job that has not finished is left to send, up to
// notificationWait after the delete, and its end brings the next pass. A
// notification due but without its Job yet (the API server refused it for
// a while) is created now and waited for likewise, or tried again until
// its deadline (notifyOnDelete). In a namespace being deleted nothing
// waits: the namespace controller removes the Jobs anyway, so the
// finalizer never blocks the namespace.
func (r *TaskReconciler) reconcileDelete(ctx context.Context, task *v1alpha1.Task) (reconcile.Result, error) {
	if !controllerutil.ContainsFinalizer(task, v1alpha1.Finalizer) {
		return reconcile.Result{}, nil
	}
	d := &deletion{r: r, task: task, now: r.Clock.Now(), waitUntil: task.DeletionTimestamp.Add(notificationWait)}
	for _, step := range deletionSteps {
		if done, err := step(d, ctx); err != nil || done {
			return d.result, err
		}
	}
	return d.result, nil
}

// deletion is what the steps of a deleted Task's pass carry.
type deletion struct {
	r    *TaskReconciler
	task *v1alpha1.Task
	now  time.Time
	// waitUntil bounds the wait for notifications (notificationWait).
	waitUntil time.Time
	// jobs are the Task's Jobs; terminating: its namespace is being
	// deleted.
	jobs        []batchv1.Job
	terminating bool
	// sending are the notification Jobs that may still send; againAt is
	// when to try again to create one the API server refused for a while.
	sending []string
	againAt time.Time
	// wait: the Task waits for sending (or for againAt).
	wait    bool
	deleted []string
	result  reconcile.Result
}

// deletionSteps are a deleted Task's pass, in order; a step that ends the
// pass says done (d.result is then its result).
var deletionSteps = []func(d *deletion, ctx context.Context) (done bool, err error){
	(*deletion).observe,
	(*deletion).notify,
	(*deletion).deleteJobs,
	(*deletion).release,
}

// observe reads the Task's Jobs, whether its namespace is being deleted,
// and its notification Jobs that have not finished.
func (d *deletion) observe(ctx context.Context) (bool, error) {
	jobList, err := d.r.listJobs(ctx, d.task)
	if err != nil {
		return true, fmt.Errorf("delete: listing Jobs: %w", err)
	}
	d.jobs, d.terminating = jobList, d.r.namespaceTerminating(ctx, d.task.Namespace)
	d.sending = unsentNotifications(d.task, jobList)
	return false, nil
}

// notify creates the notifications the Task still owes (notifyOnDelete),
// unless its namespace is being deleted, and decides whether to wait.
func (d *deletion) notify(ctx context.Context) (bool, error) {
	if !d.terminating {
		created, at := d.r.notifyOnDelete(ctx, d.task, d.jobs, d.now)
		d.sending, d.againAt = append(d.sending, created...), at
	}
	d.wait = (len(d.sending) > 0 && !d.terminating && d.now.Before(d.waitUntil)) || !d.againAt.IsZero()
	return false, nil
}

// deleteJobs deletes the Task's Jobs, but those that may still send a
// notification while the Task waits for them; then, if it waits, the
// pass ends until they finished, the bound passed or againAt.
func (d *deletion) deleteJobs(ctx context.Context) (bool, error) {
	keep := map[string]bool{}
	if d.wait {
		for _, name := range d.sending {
			keep[name] = true
		}
	}
	deleted, err := d.r.deleteJobs(ctx, d.jobs, keep)
	d.deleted = deleted
	if err != nil {
		if !d.terminating {
			d.r.event(d.task, nil, eventWarning, v1alpha1.EventCleanupFailed, "DeleteJobs", "could not delete the Task's Jobs: "+err.Error())
			return true, fmt.Errorf("delete: %w", err)
		}
		log.FromContext(ctx).Info("namespace is terminating; leaving the Jobs to it", "error", err.Error())
	}
	if d.wait {
		log.FromContext(ctx).Info("deleted Task waits for its notifications", "jobs", d.sending, "until", d.waitUntil)
		d.result = requeueAt(earliest(d.waitUntil, d.againAt), d.now)
		return true, nil
	}
	return false, nil
}

// release removes the finalizer, and the Task goes. Only this finalizer
// goes, and only from the version read: a merge patch of
// metadata.finalizers replaces the whole list, so without the lock a
// finalizer another controller added meanwhile would be lost. A conflict
// runs the pass again (guards.Settle).
func (d *deletion) release(ctx context.Context) (bool, error) {
	controllerutil.RemoveFinalizer(d.task, v1alpha1.Finalizer)
	patch, err := finalizersPatch(d.task)
	if err != nil {
		return true, err
	}
	if err := d.r.Client.Patch(ctx, d.task, patch); err != nil {
		if err = ctrl.IgnoreNotFound(err); err != nil {
			return true, fmt.Errorf("delete: removing the finalizer: %w", err)
		}
		return true, nil
	}
	d.r.event(d.task, nil, eventNormal, v1alpha1.EventDeleted, "Delete", deletedNote(d.deleted, d.sending, d.wait, d.terminating))
	return true, nil
}

// notifyOnDelete creates the notification Jobs a deleted Task still owes
// (Pending, no Job yet) and returns their names, to be waited for like
// any unsent one, and when to try again those the API server refused for
// a reason that may pass (zero: none), until their deadline. A refusal
// that will not pass, or one past the deadline, gives the notification up;
// the Task keeps no status to record it in, so the event says so.
func (r *TaskReconciler) notifyOnDelete(ctx context.Context, task *v1alpha1.Task, jobList []batchv1.Job, now time.Time) (created []string, againAt time.Time) {
	for _, order := range notify.Orders(task, task.Status.History, notify.FromJobs(task.UID, jobList)) {
		job := jobs.BuildNotification(task, order.Document, order.Targets, r.Jobs)
		try := r.createNotification(ctx, task, job, order.RunID)
		rec := recordOf(task.Status.History, order.RunID)
		switch {
		case try.Job != "":
			created = append(created, try.Job)
		case !try.Final && !notify.PastDeadline(rec, now, r.notificationDeadline()):
			againAt = earliest(againAt, now.Add(notify.RetryAfter(rec, now)))
		default:
			r.event(task, nil, eventWarning, v1alpha1.EventNotificationFailed, "Notify",
				fmt.Sprintf("run %s: notification not sent (the Task is deleted): %s", order.RunID, try.Refusal))
		}
	}
	return created, againAt
}

// unsentNotifications are the Task's notification Jobs that have not
// finished: each may still tell its webhooks about a run.
func unsentNotifications(task *v1alpha1.Task, jobList []batchv1.Job) []string {
	var out []string
	for _, n := range notify.FromJobs(task.UID, jobList) {
		if !n.Finished {
			out = append(out, n.Name)
		}
	}
	return out
}

// deletedNote is the Deleted event's text: what the finalizer cleaned up.
func deletedNote(deleted, sending []string, waited, terminating bool) string {
	var b strings.Builder
	switch len(deleted) {
	case 0:
		b.WriteString("the Task had no Jobs left to delete")
	default:
		fmt.Fprintf(&b, "deleted %d Jobs (%s)", len(deleted), strings.Join(deleted, ", "))
	}
	switch {
	case len(sending) > 0 && terminating:
		fmt.Fprintf(&b, "; the namespace is being deleted, so %d unfinished notification Jobs were not waited for", len(sending))
	case len(sending) > 0 && !waited:
		fmt.Fprintf(&b, "; %d notification Jobs had not finished %s after the delete and were deleted", len(sending), notificationWait)
	}
	return b.String()
}

// deleteJobs deletes the Task's Jobs except those named in keep, and
// returns the names it deleted.
func (r *TaskReconciler) deleteJobs(ctx context.Context, jobList []batchv1.Job, keep map[string]bool) ([]string, error) {
	var deleted []string
	for i := range jobList {
		if keep[jobList[i].Name] {
			continue
		}
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: jobList[i].Namespace, Name: jobList[i].Name}}
		err := r.Client.Delete(ctx, job, ctrl.PropagationPolicy(metav1.DeletePropagationBackground),
			ctrl.Preconditions{UID: &jobList[i].UID})
		if ctrl.IgnoreNotFound(err) != nil {
			return deleted, fmt.Errorf("deleting job %s: %w", job.Name, err)
		}
		deleted = append(deleted, job.Name)
	}
	return deleted, nil
}

// namespaceTerminating reports whether a namespace is being deleted.
func (r *TaskReconciler) namespaceTerminating(ctx context.Context, name string) bool {
	ns := &corev1.Namespace{}
	if err := r.APIReader.Get(ctx, ctrl.ObjectKey{Name: name}, ns); err != nil {
		return true // gone, or unreadable: never block on it
	}
	return !ns.DeletionTimestamp.IsZero()
}
