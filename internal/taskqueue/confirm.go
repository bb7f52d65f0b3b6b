package taskqueue

// What a pass confirms at the API server before it gives a place away or
// takes one the record does not give: its cache, and the line in memory
// filled from it, can be older than the record another replica wrote.

import (
	"context"
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/admission"
	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/waitline"
)

// waitsAtServer reports whether a Task waits, as the API server has it, for
// the admitted attempt whose Job is name, when neither the cache nor the
// API server has that Job and the line in memory has no Task waiting for
// it.
//
// The line is this process's view of the Tasks, and it can be older than
// the record: a record written by another replica (an old leader next to a
// new one, a process that started after the admission) lists attempts
// whose Task status this cache has not shown yet. Releasing such a place
// would give it to the next attempt while the admitted Task creates its
// Job: one attempt more than maxRunning (the racing-reconcilers test found
// it). So a place is released for "no Task waits for it" only on the API
// server's word.
//
// The Job name leads to its Task (jobs.TaskOf), one read; a Task whose name
// was cut in its Job names cannot be found that way, and then the
// namespace's Tasks are listed, a page at a time. Either read happens once
// per place given up without a Job (a Task deleted, cancelled, suspended or
// moved while admitted), never per pass.
func (r *Reconciler) waitsAtServer(ctx context.Context, tq *v1alpha1.TaskQueue, name string) (bool, error) {
	if taskName, ok := jobs.TaskOf(name); ok {
		task := &v1alpha1.Task{}
		err := r.APIReader.Get(ctx, ctrl.ObjectKey{Namespace: tq.Namespace, Name: taskName}, task)
		switch {
		case apierrors.IsNotFound(err):
			return false, nil // deleted: nobody waits
		case err != nil:
			return false, err
		case !jobs.Owns(task, name):
			return false, nil // re-created under the name: a new Task waits for its own Jobs
		}
		return waitsFor(task, tq.Name, name), nil
	}
	for page := ""; ; {
		list := &v1alpha1.TaskList{}
		if err := r.APIReader.List(ctx, list, ctrl.InNamespace(tq.Namespace), ctrl.Limit(500), ctrl.Continue(page)); err != nil {
			return false, err
		}
		if slices.ContainsFunc(list.Items, func(t v1alpha1.Task) bool { return waitsFor(&t, tq.Name, name) }) {
			return true, nil
		}
		if page = list.Continue; page == "" {
			return false, nil
		}
	}
}

// waitsFor reports whether task waits in queue for the attempt whose Job
// is name, by the line's own rule (waitline.WaitsOf: not while it is
// deleted, only run-now runs while it is suspended).
func waitsFor(task *v1alpha1.Task, queue, name string) bool {
	return task.Spec.QueueName == queue &&
		slices.ContainsFunc(waitline.WaitsOf(task), func(w admission.Waiting) bool { return w.JobName == name })
}

// unlistedJob is the state of a Job that holds a place by this cache but
// that the record does not list, as the API server has it (exists false:
// gone). A pass adopts such a Job (a Task moved into the queue while
// running), which takes a place even above the cap, so it must still hold
// one: this cache can show a Job active that has finished since and whose
// place another replica, or this one from a newer record, already gave to
// the next attempt, and adopting it would list one place too many until
// the cache catches up. One read per such Job and pass: Jobs the queue
// admitted come here only while this cache's record is older than its
// Jobs, and such a pass's write is refused anyway.
func (r *Reconciler) unlistedJob(ctx context.Context, job *batchv1.Job) (state admission.JobState, exists bool, err error) {
	live := &batchv1.Job{}
	switch err := r.APIReader.Get(ctx, ctrl.ObjectKeyFromObject(job), live); {
	case apierrors.IsNotFound(err):
		return admission.JobState{}, false, nil
	case err != nil:
		return admission.JobState{}, false, fmt.Errorf("reading Job %s: %w", job.Name, err)
	}
	return admission.JobState{Finished: !index.TaskControlled(live) || !runs.HoldsPlace(live)}, true, nil
}
