// Package reconciler is the operator's only I/O: it turns Tasks into Jobs.
// The decisions are pure and live elsewhere (internal/plan decides a pass,
// internal/status computes the status, internal/retry and
// internal/scheduler are the planners the plan chains); this package reads
// what they need and carries out what they say.
//
// # One pass, in stages
//
// Reconcile (reconciler.go) reads the Task and hands it to reconcileDelete
// (delete.go) or reconcileNormal, whose numbered stages are the whole pass,
// each reading only what the stages before it left:
//
//  1. observe (observe.go, missing.go): the time, read once; the Task's
//     Jobs as runs, from the cache; the attempts the status records whose
//     Job the cache does not show (deleted, or its labels removed); the
//     pods of attempts whose start check is due, the output of an
//     attempt being failed for its deadline while its pods still exist,
//     the Retry-After a failed http attempt reported, the TaskQueue the
//     Task names (its admission record, from the cache) and the
//     namespace's opt-in when the policy flag asks for it.
//  2. decide: plan.Decide, once, into one plan value.
//  3. act (act.go): labels put back, attempts stopped, outputs and
//     Retry-After kept on Jobs, Jobs created, old runs' Jobs pruned.
//  4. read outputs (outputs.go): what the pods of newly finished attempts
//     said, for the status messages; the one stage that comes back to the
//     API server, because which outputs the status lacks is known only
//     from the runs as the pass left them.
//  5. status.Compute, then the notification Jobs of the runs this status
//     ends (notify.go: created before the status that records them, so a
//     crash in between leaves a Job the next pass finds by its name), then
//     one status patch with optimistic locking, only when it changed
//     (writeStatus; a conflict is a quiet requeue, onConflict).
//  6. report (report.go): events and metrics from comparing the old and
//     the written status, so a repeated pass never repeats them, and the
//     Task's own gauges from the written status; then the
//     Task expires or is looked at again at the plan's exact time
//     (requeueAt).
//
// # Files
//
//   - reconciler.go: TaskReconciler, Reconcile, the stages, the status
//     write, the lease check;
//   - pass.go: what one pass carries from stage to stage;
//   - observe.go, missing.go, act.go, outputs.go, report.go: the stages;
//   - pods.go: reading an attempt's pods (the operator caches none) and
//     what they said;
//   - queue.go: the TaskQueue a Task names, as a pass sees it; refused.go:
//     why the Job controller could not create an attempt's pods (its
//     FailedCreate event: a quota waits, anything else is broken);
//     policy.go: the --service-accounts-opt-in check;
//   - taskqueue.go, taskqueue_setup.go: the queue reconciler, which keeps
//     each TaskQueue's admission record (internal/admission decides), its
//     watches and the indexes both controllers read queues by;
//   - notify.go: the notification Jobs of ended runs (spec.notify) and
//     their events;
//   - delete.go: a deleted Task's Jobs, behind the finalizer;
//   - setup.go: the controller, its watches and the Job index; cache.go:
//     what the manager caches, trimmed; podlogs.go: the pod log reader.
//
// # Shortcuts taken for speed
//
// Four in-process shortcuts make a burst of Tasks cheaper; each only saves
// requests, and none is needed for correctness (the deterministic Job
// names and optimistic locking are):
//
//   - recent.go: the Jobs this process created, until the cache shows them,
//     so the next pass does not try to create them again (AlreadyExists).
//   - ownwrites.go: each Task as this process's last status write left it,
//     until the cache shows it, so the next pass does not compute from an
//     outdated status and lose the write to a conflict; the queue
//     reconciler reads its Tasks through it too (peek), and a write that
//     changes what a Task waits for wakes its queue at once (wakeQueue),
//     so under a burst, when the cache lags by seconds, a freed place goes
//     to the head of the line, not to whoever the cache knew of.
//   - priority.go and plan.RecordLater: Job events queue at a lower
//     priority than work to start (new Tasks too, even those of the
//     initial list: setup.go), and a pass that created Jobs leaves the
//     status write to the pass their events bring, so in a burst every Job
//     is created before the status writes follow. Among Job events the one
//     that finishes a Job goes first (finishPriority), so an outcome does
//     not wait behind the records of other Tasks' new Jobs.
//   - cache.go: the Job cache keeps only the fields runs.AttemptOf reads,
//     so thousands of finished Jobs cost little memory.
package reconciler
