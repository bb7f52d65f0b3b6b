package reconciler

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// A fire is many starts due at once: a cron slot shared by many Tasks, a
// burst of new Tasks, retries falling due together. While one burns, a
// status write that would only record a Job a pass created (the Task
// shows Running) competes at the API server with the creates the other
// Tasks' runs still wait for, and every such write makes a later Job
// later. So records wait for the fire: a record-only pass writes nothing
// while one burns and its Task is handed back the moment it is over, or
// after maxRecordWait at the latest; a pass that has more to say (a run
// ended, an attempt failed, a spec problem) writes at once. The queue's
// priorities (priority.go) already put starts before records; this also
// holds when the workers are idle enough to take a record while starts
// are still due, as they are without a client-side rate limit.
//
// The bookkeeping is process-local and only paces writes: losing it (a
// restart) loses nothing, since the next pass recomputes the status from
// the Jobs. Its clock is the wall clock (how long a record has waited),
// not the pass clock decisions are made with.

// fireMin is how many due or running starts make a fire. With fewer, the
// workers (32 by default) take them all at once and a record delays none.
const fireMin = 32

// maxRecordWait bounds how long a record waits for a fire: a Task that
// stays Running shows it at most this long after its pass first deferred.
const maxRecordWait = 3 * time.Second

// staleDue is how long after a start fell due its pass is still waited
// for; after that it no longer counts (the Task went, or its requeue was
// merged into a pass that already ran).
const staleDue = 5 * time.Second

// fireBuffer bounds the deferred Tasks handed back at once; beyond it the
// safety requeue (maxRecordWait) brings them.
const fireBuffer = 4096

type fire struct {
	mu sync.Mutex
	// due holds the starts expected: a Task's next slot or retry, or a new
	// Task's first pass.
	due map[types.NamespacedName]dueStart
	// running counts the passes creating Jobs right now.
	running int
	// deferred holds the Tasks whose record waits, with when it first did.
	deferred map[types.NamespacedName]time.Time
	// wake hands deferred Tasks back to the controller (at record
	// priority) when the fire is over.
	wake chan event.TypedGenericEvent[*v1alpha1.Task]
	wall func() time.Time
}

type dueStart struct {
	at      time.Time // pass clock: when the start falls due
	staleAt time.Time // wall clock
}

func newFire(wall func() time.Time) *fire {
	return &fire{due: map[types.NamespacedName]dueStart{}, deferred: map[types.NamespacedName]time.Time{},
		wake: make(chan event.TypedGenericEvent[*v1alpha1.Task], fireBuffer), wall: wall}
}

// expect notes that key's pass is due at at (zero: no start expected);
// now is the pass clock.
func (f *fire) expect(key types.NamespacedName, at, now time.Time) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if at.IsZero() {
		delete(f.due, key)
		return
	}
	f.due[key] = dueStart{at: at, staleAt: f.wall().Add(max(at.Sub(now), 0) + staleDue)}
}

// begin notes that key's pass runs at now: a start it was due for is no
// longer waited for.
func (f *fire) begin(key types.NamespacedName, now time.Time) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := f.due[key]; ok && !now.Before(d.at) {
		delete(f.due, key)
		f.flushLocked(now)
	}
}

// forget drops a Task that is gone.
func (f *fire) forget(key types.NamespacedName) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.due, key)
	delete(f.deferred, key)
}

// starting and started bracket a pass's Job creates.
func (f *fire) starting() {
	if f == nil {
		return
	}
	f.mu.Lock()
	f.running++
	f.mu.Unlock()
}

func (f *fire) started(now time.Time) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.running--
	f.flushLocked(now)
}

// waitRecord reports whether key's record-only status write waits for
// the fire: while one burns, and not longer than maxRecordWait.
func (f *fire) waitRecord(key types.NamespacedName, now time.Time) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.burningLocked(now) {
		delete(f.deferred, key)
		return false
	}
	first, ok := f.deferred[key]
	switch {
	case !ok:
		f.deferred[key] = f.wall()
		return true
	case f.wall().Sub(first) >= maxRecordWait:
		delete(f.deferred, key)
		return false
	}
	return true
}

// burningLocked reports whether at least fireMin starts are due or
// running; it drops the stale ones it meets.
func (f *fire) burningLocked(now time.Time) bool {
	n := f.running
	if n >= fireMin {
		return true
	}
	wall := f.wall()
	for key, d := range f.due {
		if wall.After(d.staleAt) {
			delete(f.due, key)
			continue
		}
		if !now.Before(d.at) {
			if n++; n >= fireMin {
				return true
			}
		}
	}
	return false
}

// flushLocked hands the deferred Tasks back once the fire is over.
func (f *fire) flushLocked(now time.Time) {
	if len(f.deferred) == 0 || f.burningLocked(now) {
		return
	}
	for key := range f.deferred {
		t := &v1alpha1.Task{}
		t.Namespace, t.Name = key.Namespace, key.Name
		select {
		case f.wake <- event.TypedGenericEvent[*v1alpha1.Task]{Object: t}:
			delete(f.deferred, key)
		default:
			return // full: the safety requeue brings the rest
		}
	}
}
