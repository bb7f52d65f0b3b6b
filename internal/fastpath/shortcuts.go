package fastpath

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// Shortcuts is the in-process state both controllers share for speed,
// made once and handed to each (cmd/manager). A nil *Shortcuts is the off
// switch: every method is then a no-op or returns what the cache says, so
// the controllers never branch on the switch themselves (there is no
// method that says whether it is on).
type Shortcuts struct {
	jobs    createdJobs
	writes  ownWrites
	records queueRecords
	// queueWake carries the queues whose line a Task's status write
	// changed; admittedWake the Tasks whose attempt a queue just admitted.
	queueWake    chan event.TypedGenericEvent[*v1alpha1.TaskQueue]
	admittedWake chan event.TypedGenericEvent[*v1alpha1.Task]
	// recordStartDelay: see RecordStartDelay.
	recordStartDelay time.Duration
	// lineBound bounds the line writes in flight (linewrites.go).
	lineBound lineBound
}

// RecordStartDelay is how long the status write that would only record
// attempts that just started waits for their end (plan.RecordStartAt): a
// run shorter than that costs one status write instead of two, and a
// running Task shows Running at most this plus a second after its Job.
const RecordStartDelay = 2 * time.Second

// wakeBuffer bounds the wake-ups in flight between the controllers; when
// it is full the cache's watch events still wake the other side, only
// later.
const wakeBuffer = 1024

// New returns the shortcuts, all on, or nil (off) when on is false.
func New(on bool) *Shortcuts {
	if !on {
		return nil
	}
	return &Shortcuts{
		queueWake:        make(chan event.TypedGenericEvent[*v1alpha1.TaskQueue], wakeBuffer),
		admittedWake:     make(chan event.TypedGenericEvent[*v1alpha1.Task], wakeBuffer),
		recordStartDelay: RecordStartDelay,
		lineBound:        newLineBound(),
	}
}

// WithRecordStartDelay sets how long the record of a just-started attempt
// waits (0: not at all) and returns s. The envtest suites turn it off:
// their clock stands still unless a test moves it, and this wait ends only
// when time passes.
func (s *Shortcuts) WithRecordStartDelay(d time.Duration) *Shortcuts {
	if s != nil {
		s.recordStartDelay = d
	}
	return s
}

// RecordStartDelay is how long the record of a just-started attempt waits;
// 0 with the shortcuts off.
func (s *Shortcuts) RecordStartDelay() time.Duration {
	if s == nil {
		return 0
	}
	return s.recordStartDelay
}

// RecordLater reports whether a pass that created Jobs leaves its status
// write to the pass their create events bring (at RecordPriority):
// jobsSayItAll is plan.RecordLater, whether those Jobs carry everything the
// pass decided. Without shortcuts every pass writes its own status.
func (s *Shortcuts) RecordLater(jobsSayItAll bool) bool { return s != nil && jobsSayItAll }

// PutInLine puts a Task whose status write changed what it waits for in
// its queue's line (put: internal/waitline's Lines.Put) and wakes the
// queue at once: under a burst the cache, and so the Task watch that
// does both without shortcuts, lags by seconds.
func (s *Shortcuts) PutInLine(task *v1alpha1.Task, put func(*v1alpha1.Task)) {
	if s == nil {
		return
	}
	put(task)
	s.WakeQueue(task.Namespace, task.Spec.QueueName)
}

// TaskWatches adds the Task controller's shortcut watches to b: handlers
// (new Tasks at start priority, its own status writes seen) on Tasks, the
// Tasks the queue controller hands over (HandAdmitted), and those woken
// for a line write's place (LineWakes). Without
// shortcuts b is returned as it is.
func (s *Shortcuts) TaskWatches(b *builder.Builder, handlers ...handler.EventHandler) *builder.Builder {
	if s == nil {
		return b
	}
	for _, h := range handlers {
		b = b.Watches(&v1alpha1.Task{}, h)
	}
	return b.WatchesRawSource(s.AdmittedTasks()).WatchesRawSource(s.LineWakes())
}

// QueueWatches adds the queue controller's shortcut watch to b: the
// queues WakeQueue hands over. Without shortcuts b is returned as it is.
func (s *Shortcuts) QueueWatches(b *builder.Builder) *builder.Builder {
	if s == nil {
		return b
	}
	return b.WatchesRawSource(s.QueueWakes())
}

// RememberCreated remembers a Job this process created.
func (s *Shortcuts) RememberCreated(job *batchv1.Job, now time.Time) {
	if s != nil {
		s.jobs.add(job, now)
	}
}

// Created returns a Job this process created less than a minute ago and
// the cache does not show yet, or nil.
func (s *Shortcuts) Created(key types.NamespacedName, now time.Time) *batchv1.Job {
	if s == nil {
		return nil
	}
	return s.jobs.get(key, now)
}

// SeenJobs forgets the created Jobs the cache now shows.
func (s *Shortcuts) SeenJobs(jobs []batchv1.Job) {
	if s != nil {
		s.jobs.seen(jobs)
	}
}

// RememberWrite remembers task as a successful status write returned it.
func (s *Shortcuts) RememberWrite(task *v1alpha1.Task, now time.Time) {
	if s != nil {
		s.writes.record(task, now)
	}
}

// ForgetWrite drops the remembered write of a Task (after a refused one).
func (s *Shortcuts) ForgetWrite(uid types.UID) {
	if s != nil {
		s.writes.forget(uid)
	}
}

// CacheShows forgets the remembered write of task once the cache shows
// it (the Task informer's update events call it).
func (s *Shortcuts) CacheShows(task *v1alpha1.Task) {
	if s != nil {
		s.writes.seen(task)
	}
}

// Latest is the Task a pass starts from: the cached one, or the one this
// process's last status write returned while the cache is only behind it.
func (s *Shortcuts) Latest(cached *v1alpha1.Task) *v1alpha1.Task {
	if s == nil {
		return cached
	}
	return s.writes.latest(cached)
}

// Peek is Latest for the queue controller, which only looks: no copy
// (never change the result), nothing forgotten.
func (s *Shortcuts) Peek(cached *v1alpha1.Task) *v1alpha1.Task {
	if s == nil {
		return cached
	}
	return s.writes.peek(cached)
}

// RememberRecord remembers a queue's admission record as this process
// wrote it.
func (s *Shortcuts) RememberRecord(tq *v1alpha1.TaskQueue) {
	if s != nil {
		s.records.store(tq)
	}
}

// LatestRecord is the TaskQueue a queue pass starts from: the cached one,
// or the one this process's last record write returned while the cache is
// only behind it (records.go).
func (s *Shortcuts) LatestRecord(cached *v1alpha1.TaskQueue) *v1alpha1.TaskQueue {
	if s == nil {
		return cached
	}
	return s.records.latest(cached)
}

// ForgetRecord makes the next pass of tq start from the cache: its record
// write was refused.
func (s *Shortcuts) ForgetRecord(tq *v1alpha1.TaskQueue) {
	if s != nil {
		s.records.forget(tq)
	}
}

// Admitted is the Job names a queue admitted: its cached record, plus what
// this process's last write of it added.
func (s *Shortcuts) Admitted(tq *v1alpha1.TaskQueue) []string {
	if s == nil {
		return tq.Status.Admitted
	}
	return s.records.admitted(tq)
}

// WakeQueue hands the queue controller the queue ns/name at once (a status
// write of this process changed who waits in it); a full buffer drops it.
func (s *Shortcuts) WakeQueue(ns, name string) {
	if s == nil || name == "" {
		return
	}
	tq := &v1alpha1.TaskQueue{}
	tq.Namespace, tq.Name = ns, name
	select {
	case s.queueWake <- event.TypedGenericEvent[*v1alpha1.TaskQueue]{Object: tq}:
	default:
	}
}

// HandAdmitted hands the Task controller a Task whose attempt was just
// admitted, so its Job is created at once; a full buffer drops it.
func (s *Shortcuts) HandAdmitted(task *v1alpha1.Task) {
	if s == nil {
		return
	}
	select {
	case s.admittedWake <- event.TypedGenericEvent[*v1alpha1.Task]{Object: task}:
	default:
	}
}

// QueueWakes is the source of WakeQueue's wake-ups, for the queue
// controller's builder.
func (s *Shortcuts) QueueWakes() source.Source {
	return source.Channel(s.queueWake, &handler.TypedEnqueueRequestForObject[*v1alpha1.TaskQueue]{})
}

// AdmittedTasks is the source of HandAdmitted's Tasks, at AdmitPriority,
// for the Task controller's builder.
func (s *Shortcuts) AdmittedTasks() source.Source {
	return source.Channel(s.admittedWake, AdmittedHandler)
}

// ControllerOptions are opts for either controller: without shortcuts one
// plain work queue, no priorities.
func (s *Shortcuts) ControllerOptions(opts controller.Options) controller.Options {
	if s == nil {
		opts.UsePriorityQueue = ptr.To(false)
	}
	return opts
}
