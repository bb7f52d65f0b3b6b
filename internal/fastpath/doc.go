// Package fastpath holds every speed shortcut the two controllers
// (internal/reconciler's Task and TaskQueue reconcilers) take, and their
// one off switch: a *Shortcuts made once by cmd/manager and handed to
// both, nil when off (--fast-path=false; TASK_OPERATOR_FAST_PATH=false in
// the reconciler's envtest suite and the reconcile fuzz target, which
// `make test` runs once that way).
//
// Every shortcut only saves requests or time under load; none is needed
// for correctness, which rests on deterministic Job names, optimistic
// locking on every status and record write, and each pass reading what
// exists. With the switch off every hook here is a no-op (a nil receiver)
// and the controllers call them all the same: they never ask whether the
// shortcuts are on (test/layers holds them to it), so the claim is tested
// by running them off. What each saves:
//
//   - created Jobs (jobs.go; Shortcuts.RememberCreated, Created,
//     SeenJobs): the Jobs this process created, until the cache shows
//     them. A pass that runs before the cache caught up would otherwise
//     create the Job again and be refused (AlreadyExists): two requests.
//   - own status writes (writes.go; RememberWrite, Latest, Peek,
//     CacheShows): each Task as this process's last status write left it,
//     until the cache shows that write. A pass that starts from a stale
//     cache would otherwise compute from old data and be refused (409
//     Conflict) and requeued; the Task controller puts a Task it just put
//     in line in its queue's line (internal/waitline) at once, and the
//     queue controller's watch reads each Task through Peek, so an older
//     event does not undo that.
//     Both memories keep stamped values (stamped.go) that go stale after
//     their TTL.
//   - queue records (records.go; RememberRecord, Admitted, LatestRecord,
//     ForgetRecord): each queue's admission record as last written, so
//     the Task pass woken right after an admission sees it before the
//     cache does, and the queue's next pass starts from it instead of
//     having its record write refused on the cache's older version.
//   - wake-ups (shortcuts.go; WakeQueue, HandAdmitted): a Task's status
//     write that changes its place in line wakes its queue at once, and an
//     admission hands the Task to its controller at once, instead of both
//     waiting for the cache's watch events (seconds, in a burst).
//   - priorities (priority.go): one priority queue per controller in which
//     admitted attempts go first, then Tasks woken for a line write's
//     place (linewrites.go), then new Tasks (a namespace within its
//     fair share ahead of the rest: internal/reconciler/fairness.go), then
//     finished Jobs, then the other Job events; and a pass that created
//     Jobs leaves its status write to the pass their events bring
//     (plan.RecordLater). Without shortcuts the queue is a plain FIFO.
//   - the line writes in flight (linewrites.go; TakeLineWrite,
//     LinePassEnded, LineWakes): at most LineWrites status writes that
//     put a Task in one queue's line are sent at once; a pass that finds
//     no place ends without its write and the Task is woken when one
//     frees, so a thousand Tasks joining a line do not slow the admitted
//     attempts' Job creates, and no worker waits for a place.
//   - the record of a start (shortcuts.go; RecordStartDelay): a write that
//     would only say attempts just started waits up to RecordStartDelay
//     for their end (plan.RecordStartAt), so a short run costs one status
//     write instead of two; a longer one shows Running after the delay.
//   - the trimmed Job cache (internal/reconciler/cache.go): only the fields
//     the operator reads (memory, not requests).
//
// The figures that justified them (the burst's Job finished to Task Ready
// p99, 17.1 s with one priority for every Job event and 1.61 s with the
// finish priority; the pre-created burst's start to 1000th Job, 13.6 x T0
// before new Tasks went at start priority) are in
// docs/performance-history.md; the suites run with the switch off are in
// docs/development.md.
package fastpath
