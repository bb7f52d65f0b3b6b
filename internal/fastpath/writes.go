package fastpath

import (
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// ownWritesTTL bounds how long a write is remembered: an entry goes when
// the cache shows its write (seen), and the TTL only catches the writes
// the cache never shows as such (the Task changed again before the watch
// delivered it, or was deleted).
const ownWritesTTL = 30 * time.Second

// ownWrites remembers the last status write per Task until the cache shows
// it. Job events bring passes for a Task right after its status write; if
// the cache still holds the Task from before that write, the pass computes
// the status from outdated data and its patch is refused (409 Conflict):
// a wasted request and a requeue. Starting from the Task as the write left
// it avoids that. It is only a shortcut: the optimistic lock still guards
// every write, and a refused one makes the next pass use the cache. A nil
// *ownWrites remembers nothing (shortcuts off).
type ownWrites struct {
	mu sync.Mutex
	m  map[types.UID]stamped[*v1alpha1.Task] // as the status patch returned it
	// shown is the last few Task versions the cache showed that nothing
	// here waited for. Under load the watch can deliver a write before
	// the patch's answer is read, and a write remembered after the cache
	// showed it would stay until its TTL (and, for a Task's last write,
	// with nothing left to look at it, until the next write of any Task):
	// record skips a version listed here. The window it covers is the time
	// between an answer arriving and its record, so a few hundred are
	// plenty.
	shown [shownVersions]version
	next  int
}

// shownVersions is the size of ownWrites.shown.
const shownVersions = 256

// version names one version of one Task.
type version struct {
	uid types.UID
	rv  string
}

// record remembers task, as a successful status write returned it.
func (w *ownWrites) record(task *v1alpha1.Task, now time.Time) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for uid, e := range w.m {
		if e.stale(now, ownWritesTTL) {
			forget(&w.m, uid)
		}
	}
	if slices.Contains(w.shown[:], version{task.UID, task.ResourceVersion}) {
		return // the cache showed it already
	}
	remember(&w.m, task.UID, task.DeepCopy(), now)
}

// seen forgets the write of a Task once the cache shows it: from then on
// the cache is as new, and the copy would only hold memory.
func (w *ownWrites) seen(task *v1alpha1.Task) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.m[task.UID]; ok && e.v.ResourceVersion == task.ResourceVersion {
		forget(&w.m, task.UID)
		return
	}
	w.shown[w.next] = version{task.UID, task.ResourceVersion}
	w.next = (w.next + 1) % shownVersions
}

// forget drops what is remembered of a Task (after a refused write).
func (w *ownWrites) forget(uid types.UID) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	forget(&w.m, uid)
}

// latest returns the Task a pass should start from: the cached one, or
// the one the last status write returned when the cache is only behind it.
// The cache counts as behind when everything a pass acts on - generation
// (spec), labels, annotations (run-now), finalizers, deletion - is the same
// in both; then the only difference can be the status this process wrote.
// If the cache is in fact ahead (say, another writer changed the status),
// the optimistic lock refuses the write and the next pass uses the cache.
func (w *ownWrites) latest(cached *v1alpha1.Task) *v1alpha1.Task {
	if w == nil {
		return cached
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[cached.UID]
	if !ok {
		return cached
	}
	mine := e.v
	switch {
	case mine.ResourceVersion == cached.ResourceVersion:
		forget(&w.m, cached.UID) // the cache caught up
		return cached
	case mine.Generation != cached.Generation ||
		!maps.Equal(mine.Labels, cached.Labels) ||
		!maps.Equal(mine.Annotations, cached.Annotations) ||
		!slices.Equal(mine.Finalizers, cached.Finalizers) ||
		!mine.DeletionTimestamp.Equal(cached.DeletionTimestamp):
		forget(&w.m, cached.UID) // changed since: the cache is newer
		return cached
	}
	return mine.DeepCopy()
}

// peek is latest for readers that only look: the queue reconciler reads
// what each of its Tasks waits for, and a Task's status write that put an
// attempt in line must count at once, not when the cache shows it (under
// a burst the cache lags by seconds, and a place given meanwhile would go
// to an attempt behind it). It returns the remembered Task without a copy
// (never change it) and leaves the entries as they are.
func (w *ownWrites) peek(cached *v1alpha1.Task) *v1alpha1.Task {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.m[cached.UID]
	if !ok || e.v.ResourceVersion == cached.ResourceVersion || e.v.Generation != cached.Generation ||
		!maps.Equal(e.v.Annotations, cached.Annotations) || !e.v.DeletionTimestamp.Equal(cached.DeletionTimestamp) {
		return cached
	}
	return e.v
}
