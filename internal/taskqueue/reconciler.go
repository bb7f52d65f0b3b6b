// Package taskqueue is the TaskQueue controller: it keeps each queue's
// admission record (internal/admission decides who is admitted) and its
// Ready condition. reconciler.go is the pass (observe, decide, one status
// write, hand the admitted Tasks over); confirm.go what a pass checks at
// the API server before it gives a place away or takes one the record does
// not give; recordpatch.go the record's write; setup.go its watches, which
// also keep the queues' lines in memory (internal/waitline). The Task
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
	"github.com/taskops/task-operator/internal/waitline"
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
	// Lines is every queue's line of waiting attempts, in order, in
	// memory (internal/waitline): the watch of Tasks fills it, a pass reads
	// the head of its queue's line.
	Lines *waitline.Lines
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
	tq = r.Shortcuts.LatestRecord(tq)
	in, err := r.observe(ctx, tq)
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
	st.Queued = int32(d.Queued)
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
			r.Shortcuts.ForgetRecord(&base)
			if r.lostRace(ctx, &base, err) {
				err = apierrors.NewConflict(v1alpha1.GroupVersion.WithResource("taskqueues").GroupResource(), tq.Name, err)
			}
			return guards.OnConflict(ctx, fmt.Errorf("writing the admission record: %w", err))
		}
		r.Shortcuts.RememberRecord(tq)
	}
	for _, w := range d.Admit {
		log.FromContext(ctx).V(1).Info("admitted", "job", w.JobName, "priority", w.Priority, "since", w.Since, "running", st.Running, "queued", st.Queued)
		t := &v1alpha1.Task{}
		t.Namespace, t.Name = tq.Namespace, w.Task
		r.Shortcuts.HandAdmitted(t) // when dropped, the TaskQueue watch brings the pass, a little later
		// The event names the Task as the cache holds it (t is the
		// Task controller's now: never written again here).
		if task := (&v1alpha1.Task{}); r.Recorder != nil && r.Client.Get(ctx, ctrl.ObjectKeyFromObject(t), task) == nil {
			r.Recorder.Eventf(task, tq, "Normal", string(v1alpha1.EventAdmitted), "Admit",
				"attempt %s admitted by TaskQueue %s (%d of %d places held)", w.JobName, tq.Name, st.Running, tq.Spec.MaxRunning)
		}
	}
	return reconcile.Result{}, nil
}

// observe reads what the decision needs: the queue's line (in memory,
// internal/waitline: the head and the few names asked about, never the
// whole line), and the Jobs holding its places, from the cache by the
// queue's index (internal/index). It never reads the queue's finished
// history, so a pass costs the attempts running, not those waiting. A name
// of the record that holds no place by the index is looked up by name: in
// the cache (a finished Job: its place frees), else, unless a Task waits
// for it, at the API server before it is released: the cache may not show
// a Job just created yet, and releasing its place would let the cap be
// exceeded. For the same reason "no Task waits for it" is the API
// server's word too (waitsAtServer), not only the line's.
func (r *Reconciler) observe(ctx context.Context, tq *v1alpha1.TaskQueue) (admission.Input, error) {
	in := admission.Input{
		MaxRunning: tq.Spec.MaxRunning, Suspended: ptr.Deref(tq.Spec.Suspend, false),
		Admitted: tq.Status.Admitted, Jobs: map[string]admission.JobState{}, WaitsUnseen: map[string]bool{},
	}
	var jobList batchv1.JobList
	if err := r.Client.List(ctx, &jobList, ctrl.InNamespace(tq.Namespace), ctrl.MatchingFields{index.QueuePlaces: tq.Name}, ctrl.UnsafeDisableDeepCopy); err != nil {
		return in, fmt.Errorf("listing the queue's Jobs: %w", err)
	}
	ask := slices.Clone(tq.Status.Admitted)
	listed := make(map[string]bool, len(tq.Status.Admitted))
	for _, name := range tq.Status.Admitted {
		listed[name] = true
	}
	for i := range jobList.Items {
		job := &jobList.Items[i]
		state, exists := admission.JobState{}, true
		if !listed[job.Name] {
			var err error
			if state, exists, err = r.unlistedJob(ctx, job); err != nil {
				return in, err
			}
		}
		if exists {
			in.Jobs[job.Name] = state
		}
		ask = append(ask, job.Name)
	}
	in.Line = r.Lines.Line(tq.Namespace, tq.Name, ask)
	looked := map[string]bool{}
	for _, name := range tq.Status.Admitted {
		if _, placed := in.Jobs[name]; placed || looked[name] {
			continue
		}
		looked[name] = true // once, should the record name it twice
		job := &batchv1.Job{}
		key := ctrl.ObjectKey{Namespace: tq.Namespace, Name: name}
		err := r.Client.Get(ctx, key, job)
		if apierrors.IsNotFound(err) {
			if in.Line.Has(name) {
				continue // not created yet: the Task waits for it
			}
			err = r.APIReader.Get(ctx, key, job)
		}
		switch {
		case apierrors.IsNotFound(err):
			waits, err := r.waitsAtServer(ctx, tq, name)
			if err != nil {
				return in, fmt.Errorf("looking for the Task waiting for admitted Job %s: %w", name, err)
			}
			if waits {
				in.WaitsUnseen[name] = true
			}
		case err != nil:
			return in, fmt.Errorf("reading admitted Job %s: %w", name, err)
		case index.TaskControlled(job):
			in.Jobs[name] = admission.JobState{Finished: !runs.HoldsPlace(job)}
		}
	}
	in.Exists = func(name string) bool {
		job := &batchv1.Job{}
		return r.Client.Get(ctx, ctrl.ObjectKey{Namespace: tq.Namespace, Name: name}, job) == nil && index.TaskControlled(job)
	}
	return in, nil
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
