package reconciler

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Fairness between namespaces. Every namespace's Tasks share one work
// queue. Without care, a namespace that creates a thousand Tasks at once
// puts a thousand first passes in line, and a Task created just after in
// another namespace waits behind all of them. So a new Task goes to the
// front part of the line (fairStartPriority) only while its namespace has
// fewer than fairShare new Tasks waiting; beyond that, its namespace's new
// Tasks wait at startPriority, behind every other namespace's new Tasks
// but still before any recording pass. A flood thus delays another
// namespace's new Task by at most fairShare passes of the flood (plus the
// passes already running), whatever its size.
//
// Only the first pass of a new Task is ordered this way: it is what a
// flood is made of, and what a user waits for. The bound holds with the
// fast path on, and only then: fairness is an order of the work queue,
// and the only queue that orders is the fast path's priority queue. With
// --fast-path=false the queue is controller-runtime's plain FIFO, so a
// flood delays another namespace's new Task by its own size. That switch
// exists to prove the shortcuts change no outcome (make test-no-fast-path),
// not to run a shared cluster with; a cluster that must bound a tenant
// does so with a quota on Tasks (docs/security.md).
const fairShare = 16

// newTasksWaiting holds, per namespace, the new Tasks queued for their
// first pass and not taken yet. Safe for concurrent use; the zero value is
// ready.
type newTasksWaiting struct {
	mu      sync.Mutex
	waiting map[string]map[string]struct{}
}

// add records that the new Task key was queued and reports whether its
// namespace is within its fair share.
func (w *newTasksWaiting) add(key types.NamespacedName) (withinShare bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.waiting == nil {
		w.waiting = map[string]map[string]struct{}{}
	}
	ns := w.waiting[key.Namespace]
	if ns == nil {
		ns = map[string]struct{}{}
		w.waiting[key.Namespace] = ns
	}
	ns[key.Name] = struct{}{}
	return len(ns) <= fairShare
}

// taken records that a pass of key began: it no longer waits.
func (w *newTasksWaiting) taken(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ns := w.waiting[key.Namespace]
	if ns == nil {
		return
	}
	delete(ns, key.Name)
	if len(ns) == 0 {
		delete(w.waiting, key.Namespace)
	}
}
