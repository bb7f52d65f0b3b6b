// Package taskqueue is the TaskQueue controller: it keeps each queue's
// admission record (internal/admission decides who is admitted) and its
// Ready condition. reconciler.go is the pass (observe, decide, one status
// write, hand the admitted Tasks over); setup.go its watches. The Task
// controller (internal/reconciler) reads the record and starts the
// admitted attempts; internal/operator wires the two.
package taskqueue

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/admission"
	"github.com/taskops/task-operator/internal/fastpath"
	"github.com/taskops/task-operator/internal/guards"
	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/runs"
)

// Reconciler keeps a TaskQueue's admission record: it releases the
// places of finished attempts and admits the waiting ones in order
// (internal/admission decides). Passes are driven by events only: a Job of
// the queue finishing, a Task of the queue starting to wait or going, the
// queue's spec changing. No poll loop: each of those is what frees a place
// or adds to the line.
type Reconciler struct {
	Client    ctrl.Client
	APIReader ctrl.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Lease     guards.Lease

	// Shortcuts are the speed shortcuts shared with the Task controller
	// (internal/fastpath): the Tasks it just put in line count before the
	// cache shows them, the records written here reach its passes at once,
	// and so do the Tasks admitted. nil: none.
	Shortcuts *fastpath.Shortcuts
}

// +kubebuilder:rbac:groups=batch.taskops.io,resources=taskqueues/status,verbs=get;patch

// Reconcile decides one TaskQueue pass and writes its status once, with
// optimistic locking: the write is what takes a place, so a pass that lost
// a race takes none and runs again from the winner's record.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if !guards.Held(r.Lease) {
		return guards.StandDown(ctx)
	}
	tq := &v1alpha1.TaskQueue{}
	if err := r.Client.Get(ctx, req.NamespacedName, tq); err != nil {
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	in, tasks, err := r.observe(ctx, tq)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("observe: %w", err)
	}
	d := admission.Decide(in)

	old := tq.Status.DeepCopy()
	st := &tq.Status
	st.Admitted = d.Admitted
	st.Running = d.Running()
	st.Queued = int32(len(d.Line))
	st.AdmittedTotal += int64(len(d.Admit))
	st.ObservedGeneration = tq.Generation
	setQueueReady(tq, r.Clock.Now())
	if !equality.Semantic.DeepEqual(*old, *st) {
		if !guards.Held(r.Lease) {
			return guards.StandDown(ctx)
		}
		base := tq.DeepCopy()
		base.Status = *old
		if err := r.Client.Status().Patch(ctx, tq, ctrl.MergeFromWithOptions(base, ctrl.MergeFromWithOptimisticLock{})); err != nil {
			return guards.OnConflict(ctx, fmt.Errorf("writing the admission record: %w", err))
		}
		r.Shortcuts.RememberRecord(tq)
	}
	for _, w := range d.Admit {
		log.FromContext(ctx).V(1).Info("admitted", "job", w.JobName, "priority", w.Priority, "since", w.Since, "running", st.Running, "queued", st.Queued)
		t := &v1alpha1.Task{}
		t.Namespace, t.Name = tq.Namespace, w.Task
		r.Shortcuts.HandAdmitted(t) // when dropped, the TaskQueue watch brings the pass, a little later
		if task := tasks[w.Task]; task != nil && r.Recorder != nil {
			r.Recorder.Eventf(task, tq, "Normal", string(v1alpha1.EventAdmitted), "Admit",
				"attempt %s admitted by TaskQueue %s (%d of %d places held)", w.JobName, tq.Name, st.Running, tq.Spec.MaxRunning)
		}
	}
	return reconcile.Result{}, nil
}

// observe reads what the decision needs, from the cache: the queue's
// Tasks and what they wait for, and the queue's Jobs (by label). A listed
// place whose Job the cache does not show and that no Task waits for is
// read from the API server before it is released: the cache may not show
// a Job just created yet, and releasing its place would let the cap be
// exceeded.
func (r *Reconciler) observe(ctx context.Context, tq *v1alpha1.TaskQueue) (admission.Input, map[string]*v1alpha1.Task, error) {
	in := admission.Input{
		MaxRunning: tq.Spec.MaxRunning, Suspended: ptr.Deref(tq.Spec.Suspend, false),
		Admitted: tq.Status.Admitted, Jobs: map[string]admission.JobState{},
	}
	var taskList v1alpha1.TaskList
	if err := r.Client.List(ctx, &taskList, ctrl.InNamespace(tq.Namespace), ctrl.MatchingFields{index.TaskQueue: tq.Name}, ctrl.UnsafeDisableDeepCopy); err != nil {
		return in, nil, fmt.Errorf("listing the queue's Tasks: %w", err)
	}
	tasks := make(map[string]*v1alpha1.Task, len(taskList.Items))
	waited := map[string]bool{}
	for i := range taskList.Items {
		t := &taskList.Items[i]
		t = r.Shortcuts.Peek(t)
		tasks[t.Name] = t
		if !t.DeletionTimestamp.IsZero() {
			continue // a deleted Task waits for nothing
		}
		for _, q := range t.Status.Queued {
			if ptr.Deref(t.Spec.Suspend, false) && !runs.IsRunNow(q.RunID) {
				continue // a suspended Task waits only for its run-now runs
			}
			in.Waiting = append(in.Waiting, admission.Waiting{Task: t.Name, JobName: q.JobName, Priority: t.Spec.Priority, Since: q.Since.Time})
			waited[q.JobName] = true
		}
	}
	var jobList batchv1.JobList
	if err := r.Client.List(ctx, &jobList, ctrl.InNamespace(tq.Namespace), ctrl.MatchingFields{index.JobQueue: tq.Name}, ctrl.UnsafeDisableDeepCopy); err != nil {
		return in, nil, fmt.Errorf("listing the queue's Jobs: %w", err)
	}
	for i := range jobList.Items {
		if job := &jobList.Items[i]; index.TaskControlled(job) {
			in.Jobs[job.Name] = jobState(job)
		}
	}
	for _, name := range tq.Status.Admitted {
		if _, ok := in.Jobs[name]; ok || waited[name] {
			continue
		}
		job := &batchv1.Job{}
		err := r.APIReader.Get(ctx, ctrl.ObjectKey{Namespace: tq.Namespace, Name: name}, job)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return in, nil, fmt.Errorf("reading admitted Job %s: %w", name, err)
		case index.TaskControlled(job):
			in.Jobs[name] = jobState(job)
		}
	}
	return in, tasks, nil
}

// jobState is whether a Job's attempt still holds its place: while it is
// active, and, once stopped, until its pods are gone (a stopped attempt's
// pods still run for their grace period, and a Job someone resumed after a
// stop runs again: it is Active, see runs.AttemptOf).
func jobState(job *batchv1.Job) admission.JobState {
	a := runs.AttemptOf(job, 0)
	podsLeft := job.Status.Active > 0 || ptr.Deref(job.Status.Terminating, 0) > 0
	return admission.JobState{Finished: a.Phase != runs.Active && !(a.Phase == runs.Stopped && podsLeft)}
}

// setQueueReady sets the queue's Ready condition: True while it admits.
func setQueueReady(tq *v1alpha1.TaskQueue, now time.Time) {
	c := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: string(v1alpha1.ReasonAdmitting),
		Message: fmt.Sprintf("admits up to %d attempts at a time", tq.Spec.MaxRunning), ObservedGeneration: tq.Generation,
		LastTransitionTime: metav1.NewTime(now.UTC().Truncate(time.Second))}
	if ptr.Deref(tq.Spec.Suspend, false) {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, string(v1alpha1.ReasonQueueSuspended), "spec.suspend is true: admits nothing new; active attempts finish"
	}
	meta.SetStatusCondition(&tq.Status.Conditions, c)
}
