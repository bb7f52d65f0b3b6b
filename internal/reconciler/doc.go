// Package reconciler is the Task controller: it turns Tasks into Jobs. The
// TaskQueue controller is internal/taskqueue; internal/operator wires the
// two, with the indexes (internal/index) and speed shortcuts
// (internal/fastpath) they share.
// The decisions are pure and live elsewhere (internal/plan decides a pass,
// internal/status computes the status, internal/retry and
// internal/scheduler are the planners the plan chains); this package reads
// what they need and carries out what they say.
//
// # One pass, in stages
//
// Reconcile (reconciler.go) reads the Task and hands it to reconcileDelete
// (delete.go) or reconcileNormal, whose numbered stages are the whole pass,
// each reading only what the stages before it left. The stages return
// their errors; Reconcile ends every pass through guards.Settle, once: a
// lapsed lease stands down, a conflict is a quiet requeue.
//
//  1. observe (observe.go: an ordered list of observers, each filling its
//     part of the plan's input): the time, read once; the Task's
//     Jobs as runs, from the cache; the attempts the status records whose
//     Job the cache does not show (deleted, or its labels removed); the
//     pods of attempts whose start check is due, the output of an
//     attempt being failed for its deadline while its pods still exist,
//     the Retry-After a failed http attempt reported, the TaskQueue the
//     Task names (its admission record, from the cache) and the
//     namespace's opt-in when the policy flag asks for it, and the
//     holiday lists a cron Task names (a ConfigMap, TaskCalendars).
//  2. decide: plan.Decide, once, into one plan value.
//  3. act (act.go: an ordered list of actions): labels put back, attempts
//     stopped, outputs and Retry-After kept on Jobs, Jobs created
//     (start.go), old runs' Jobs pruned.
//  4. read outputs (outputs.go): what the pods of newly finished attempts
//     said, for the status messages; the one stage that comes back to the
//     API server, because which outputs the status lacks is known only
//     from the runs as the pass left them.
//  5. decide the status and the notifications it makes due, pure
//     (plan.Record: the status, the notifications it makes due and when
//     to write it; pass.go recording), then in order:
//     5a. the lease re-checked: a pass that finds it lapsed writes nothing
//     (guards.ErrLeaseLapsed); 5b. the finalizer added, on the first write;
//     5c. the notification Jobs of the orders created (notify.go), before
//     the status that records them, so a crash in between leaves a Job the
//     next pass finds by its name; a refused one is fed back and the
//     status decided again, never edited; 5d. one status patch with
//     optimistic locking, only when it changed (writeStatus; a conflict is
//     a quiet requeue).
//  6. report (report.go): events and metrics from comparing the old and
//     the written status, so a repeated pass never repeats them, and the
//     Task's own gauges from the written status; then the
//     Task expires or is looked at again at the plan's exact time
//     (requeueAt).
//
// # Files
//
//   - reconciler.go: TaskReconciler, Reconcile, the stages, the status
//     write (the lease and conflict guards both controllers use are
//     internal/guards);
//   - pass.go: what one pass carries from stage to stage;
//   - observe.go, missing.go, act.go, start.go, outputs.go, report.go: the
//     stages;
//   - pods.go: reading an attempt's pods (the operator caches none) and
//     what they said;
//   - queue.go: the TaskQueue a Task names, as a pass sees it; refused.go:
//     why the Job controller could not create an attempt's pods (its
//     FailedCreate event: a quota waits, anything else is broken);
//     policy.go: the --service-accounts-opt-in check;
//   - queuewatch.go: the TaskQueue events that wake Tasks (an admission,
//     a queue appearing, going or suspended) and the wake-up a status
//     write hands the queue controller;
//   - deletedjobs.go: the Jobs this process saw deleted lately, so a pass
//     from a cache that is behind never creates one again;
//   - jobrefused.go: a Job the API server refuses for a reason the spec
//     does not decide (JobRefused, a quota on Jobs), rechecked slowly;
//   - notify.go: the notification Jobs of ended runs (spec.notify), tried
//     again while the API server refuses them for a reason that may pass,
//     and their events;
//   - calendar.go, calendarwatch.go: the holiday lists a cron Task names:
//     spec.skipDatesFrom, read when it plans where the namespace grants
//     it (the operator has no read of ConfigMaps of its own), and
//     spec.skipCalendars (cluster-scoped TaskCalendars, cached), whose
//     edits wake the Tasks naming them;
//   - fairness.go: new Tasks of a namespace beyond its fair share wait
//     behind other namespaces' (the work queue's order);
//   - delete.go: a deleted Task's pass (its steps in order: observe,
//     notify, delete the Jobs, release the finalizer);
//   - setup.go: the controller and its watches; cache.go:
//     what the manager caches, trimmed; intern.go: the strings cached
//     objects share; podlogs.go: the pod log reader.
//
// # Shortcuts taken for speed
//
// Several in-process shortcuts make a burst of Tasks cheaper; each only
// saves requests or time, none is needed for correctness (the
// deterministic Job names and optimistic locking are), and one switch
// turns them all off (a nil TaskReconciler.Shortcuts, --fast-path=false).
// internal/fastpath holds and lists them.
package reconciler
