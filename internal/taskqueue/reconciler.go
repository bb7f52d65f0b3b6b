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
	"slices"
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
	// Line reads the waiting Tasks without copying them (index.WaitingLine);
	// nil: through the cache's field index.
	Line *index.WaitingLine
}

// +kubebuilder:rbac:groups=batch.taskops.io,resources=taskqueues/status,verbs=get;patch

// Reconcile decides one TaskQueue pass and writes its status once, with
// optimistic locking: the write is what takes a place, so a pass that lost
// a race takes none and runs again from the winner's record. The write
// carries only what changed (recordPatch).
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

	// The pass replaces the record's slice and changes the conditions in
	// place: a copy of the conditions is all the old status needs (the
	// record can hold 10000 names, which are not copied).
	old := tq.Status
	old.Conditions = slices.Clone(tq.Status.Conditions)
	st := &tq.Status
	st.Admitted = d.Admitted
	st.Running = d.Running()
	st.Queued = int32(len(d.Line))
	st.AdmittedTotal += int64(len(d.Admit))
	st.ObservedGeneration = tq.Generation
	setQueueReady(tq, r.Clock.Now())
	if !equality.Semantic.DeepEqual(old, *st) {
		if !guards.Held(r.Lease) {
			return guards.StandDown(ctx)
		}
		base := *tq
		base.Status = old
		if err := r.Client.Status().Patch(ctx, tq, recordPatch(&base, st)); err != nil {
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

// observe reads what the decision needs, from the cache, by the queue's
// two indexes (internal/index): the Tasks waiting in it, and the Jobs
// holding its places. It never reads the queue's finished history, so a
// pass costs the attempts waiting and running. A name of the record that
// holds no place by the index is looked up by name: in the cache (a
// finished Job: its place frees), else, unless a Task waits for it, at the
// API server before it is released: the cache may not show a Job just
// created yet, and releasing its place would let the cap be exceeded.
func (r *Reconciler) observe(ctx context.Context, tq *v1alpha1.TaskQueue) (admission.Input, map[string]*v1alpha1.Task, error) {
	in := admission.Input{
		MaxRunning: tq.Spec.MaxRunning, Suspended: ptr.Deref(tq.Spec.Suspend, false),
		Admitted: tq.Status.Admitted, Jobs: map[string]admission.JobState{},
	}
	tasks, err := r.waitingTasks(ctx, tq)
	if err != nil {
		return in, nil, err
	}
	var jobList batchv1.JobList
	if err := r.Client.List(ctx, &jobList, ctrl.InNamespace(tq.Namespace), ctrl.MatchingFields{index.QueuePlaces: tq.Name}, ctrl.UnsafeDisableDeepCopy); err != nil {
		return in, nil, fmt.Errorf("listing the queue's Jobs: %w", err)
	}
	for i := range jobList.Items {
		in.Jobs[jobList.Items[i].Name] = admission.JobState{}
	}
	// The record's names that hold no place by the index: few (attempts
	// admitted whose Job is not in the cache yet, or finished), so the
	// line is checked against them rather than kept as a set of its own.
	unplaced := map[string]bool{}
	for _, name := range tq.Status.Admitted {
		if _, ok := in.Jobs[name]; !ok {
			unplaced[name] = false // true once a Task is seen waiting for it
		}
	}
	in.Waiting = make([]admission.Waiting, 0, len(tasks))
	for _, t := range tasks {
		if !t.DeletionTimestamp.IsZero() {
			continue // a deleted Task waits for nothing
		}
		for _, q := range t.Status.Queued {
			if ptr.Deref(t.Spec.Suspend, false) && !runs.IsRunNow(q.RunID) {
				continue // a suspended Task waits only for its run-now runs
			}
			in.Waiting = append(in.Waiting, admission.Waiting{Task: t.Name, JobName: q.JobName, Priority: t.Spec.Priority, Since: q.Since.Time})
			if _, ok := unplaced[q.JobName]; ok {
				unplaced[q.JobName] = true
			}
		}
	}
	for _, name := range tq.Status.Admitted {
		waited, ok := unplaced[name]
		if !ok {
			continue
		}
		delete(unplaced, name) // once, should the record name it twice
		job := &batchv1.Job{}
		key := ctrl.ObjectKey{Namespace: tq.Namespace, Name: name}
		err := r.Client.Get(ctx, key, job)
		if apierrors.IsNotFound(err) {
			if waited {
				continue // not created yet: the Task waits for it
			}
			err = r.APIReader.Get(ctx, key, job)
		}
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return in, nil, fmt.Errorf("reading admitted Job %s: %w", name, err)
		case index.TaskControlled(job):
			in.Jobs[name] = admission.JobState{Finished: !runs.HoldsPlace(job)}
		}
	}
	in.Exists = func(name string) bool {
		job := &batchv1.Job{}
		return r.Client.Get(ctx, ctrl.ObjectKey{Namespace: tq.Namespace, Name: name}, job) == nil && index.TaskControlled(job)
	}
	return in, tasks, nil
}

// waitingTasks are the Tasks waiting in the queue, by name: those the
// cache's index shows, and those this process has just put in line by a
// write the cache does not show yet (under a burst the cache lags by
// seconds, and a place given meanwhile would go to an attempt behind
// them). Each is the newest of the two (fastpath Peek); never change one.
func (r *Reconciler) waitingTasks(ctx context.Context, tq *v1alpha1.TaskQueue) (map[string]*v1alpha1.Task, error) {
	listed, err := r.listWaiting(ctx, tq)
	if err != nil {
		return nil, err
	}
	tasks := make(map[string]*v1alpha1.Task, len(listed))
	for _, t := range listed {
		t = r.Shortcuts.Peek(t)
		tasks[t.Name] = t
	}
	for _, mine := range r.Shortcuts.WaitingIn(tq.Namespace, tq.Name) {
		if _, listed := tasks[mine.Name]; listed {
			continue
		}
		cached := &v1alpha1.Task{}
		if err := r.Client.Get(ctx, ctrl.ObjectKeyFromObject(mine), cached); err != nil {
			continue // gone, or not in the cache yet: its next write wakes the queue again
		}
		if t := r.Shortcuts.Peek(cached); t.Spec.QueueName == tq.Name {
			tasks[t.Name] = t
		}
	}
	return tasks, nil
}

// listWaiting reads the Tasks waiting in the queue from the cache: through
// the informer's own index when the manager wired one (Line: the cached
// objects themselves), else through the cache's field index (copies).
func (r *Reconciler) listWaiting(ctx context.Context, tq *v1alpha1.TaskQueue) ([]*v1alpha1.Task, error) {
	if r.Line != nil {
		tasks, err := r.Line.In(tq.Namespace, tq.Name)
		if err != nil {
			return nil, fmt.Errorf("reading the queue's waiting line: %w", err)
		}
		return tasks, nil
	}
	var taskList v1alpha1.TaskList
	if err := r.Client.List(ctx, &taskList, ctrl.InNamespace(tq.Namespace), ctrl.MatchingFields{index.QueueWaiting: tq.Name}, ctrl.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the queue's Tasks: %w", err)
	}
	out := make([]*v1alpha1.Task, len(taskList.Items))
	for i := range taskList.Items {
		out[i] = &taskList.Items[i]
	}
	return out, nil
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
