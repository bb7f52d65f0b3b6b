package reconciler

// Shortcuts taken for speed, and their off switch.
//
// Every shortcut below only saves requests or time under load; none is
// needed for correctness, which rests on deterministic Job names,
// optimistic locking on every status and record write, and each pass
// reading what exists. TaskReconciler.NoShortcuts (the manager's
// --fast-path=false, and TASK_OPERATOR_FAST_PATH=false in the reconciler's
// envtest suite and the reconcile fuzz target, which `make test` runs once
// that way) turns all of them off at once, so that claim is tested:
//
//   - recent.go: the Jobs this process created, until the cache shows
//     them (saves an AlreadyExists round trip per pass that runs before
//     the cache caught up);
//   - ownwrites.go: each Task as this process's last status write left it
//     (saves a 409 Conflict and a requeue per pass that starts from a
//     stale cache); the queue controller peeks at it too;
//   - queueRecords (taskqueue.go): each queue's admission record as last
//     written, for the same reason on the queue side;
//   - queueWake and admittedWake (taskqueue_setup.go): a Task's status
//     write that changes its place in line wakes its queue at once, and an
//     admission hands the Task to its controller at once, instead of both
//     waiting for the cache's watch events;
//   - priority.go, newTaskHandler (setup.go) and plan.RecordLater: one
//     priority queue per controller in which starting work goes before
//     recording it, and a pass that created Jobs leaves the status write
//     to the pass their events bring;
//   - cache.go: the Job cache keeps only the fields the operator reads.
//
// The priority queue also carries the fairness between namespaces
// (fairness.go): without shortcuts the queue is a plain FIFO, fair in
// arrival order only.
//
// What each saved, measured, is in docs/performance.md.

// created is the memory of Jobs this process created, nil (remembering
// nothing: every method is a no-op on nil) without shortcuts.
func (r *TaskReconciler) created() *recentJobs {
	if r.NoShortcuts {
		return nil
	}
	return &r.recent
}

// writes is the memory of this process's last status write per Task, nil
// (remembering nothing) without shortcuts.
func (r *TaskReconciler) writes() *ownWrites {
	if r.NoShortcuts {
		return nil
	}
	return &r.written
}
