// Package waitline keeps every TaskQueue's line of waiting attempts in
// memory, in admission order (admission.Order), so that a queue pass reads
// the head of its line and its length without going through every Task
// that waits: the pass's cost follows the places it fills, not the line
// (docs/queues.md, "The line in memory"). It is the queue's in-memory
// state, in the manner of Kueue's queue manager: one value, shared by the
// two controllers.
//
// What fills it: the queue controller's watch of Tasks puts each Task's
// waiting attempts in (Put, Remove) before it wakes the queue, so a pass
// woken by a Task's event sees that event; with the speed shortcuts on,
// the Task controller also puts a Task in as its status write returned it,
// and the watch reads each Task through the shortcuts (the newer of the
// cache's and this process's last write), so a write counts before the
// cache shows it. Everything in it can be rebuilt from the Tasks: a new
// process starts from the watch's initial list.
package waitline

import (
	"slices"
	"sync"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/admission"
	"github.com/taskops/task-operator/internal/runs"
)

// Lines is every queue's line. The zero value is not usable: New. A nil
// *Lines holds nothing and ignores what it is given.
type Lines struct {
	mu     sync.Mutex
	queues map[queueKey]*line
	// tasks is what each Task waits for, and in which queue: what a Put
	// replaces.
	tasks map[types.NamespacedName]placed
}

type queueKey struct{ namespace, name string }

// line is one queue's waiting attempts, in admission order, and by Job
// name.
type line struct {
	order *btree.BTreeG[admission.Waiting]
	jobs  map[string]admission.Waiting
}

type placed struct {
	queue queueKey
	waits []admission.Waiting
}

// degree is the B-tree's: nodes of up to 63 attempts.
const degree = 32

func less(a, b admission.Waiting) bool { return admission.Order(a, b) < 0 }

// New returns empty lines.
func New() *Lines {
	return &Lines{queues: map[queueKey]*line{}, tasks: map[types.NamespacedName]placed{}}
}

// WaitsOf is what a Task waits for in its queue: each attempt its status
// lists as queued, none while it is being deleted, and only its run-now
// runs while it is suspended (a suspended Task keeps its place in line
// but asks for no admission of scheduled runs).
func WaitsOf(task *v1alpha1.Task) []admission.Waiting {
	if task.Spec.QueueName == "" || !task.DeletionTimestamp.IsZero() {
		return nil
	}
	suspended := ptr.Deref(task.Spec.Suspend, false)
	var out []admission.Waiting
	for _, q := range task.Status.Queued {
		if suspended && !runs.IsRunNow(q.RunID) {
			continue
		}
		out = append(out, admission.Waiting{Task: task.Name, JobName: q.JobName, Priority: task.Spec.Priority, Since: q.Since.Time})
	}
	return out
}

// Put sets what task waits for (WaitsOf), replacing what it waited for
// before, in whatever queue.
func (l *Lines) Put(task *v1alpha1.Task) {
	if l == nil {
		return
	}
	key := types.NamespacedName{Namespace: task.Namespace, Name: task.Name}
	waits := WaitsOf(task)
	l.mu.Lock()
	defer l.mu.Unlock()
	old, had := l.tasks[key]
	if !had && len(waits) == 0 {
		return // the common case: a Task that waits in no queue
	}
	if had && old.queue == (queueKey{task.Namespace, task.Spec.QueueName}) && slices.Equal(old.waits, waits) {
		return // an event that changed nothing the line holds
	}
	if had {
		l.take(old)
	}
	if len(waits) == 0 {
		delete(l.tasks, key)
		return
	}
	p := placed{queue: queueKey{task.Namespace, task.Spec.QueueName}, waits: waits}
	ln := l.queues[p.queue]
	if ln == nil {
		ln = &line{order: btree.NewG(degree, less), jobs: map[string]admission.Waiting{}}
		l.queues[p.queue] = ln
	}
	for _, w := range waits {
		ln.order.ReplaceOrInsert(w)
		ln.jobs[w.JobName] = w
	}
	l.tasks[key] = p
}

// Remove forgets a Task that is gone.
func (l *Lines) Remove(namespace, name string) {
	if l == nil {
		return
	}
	key := types.NamespacedName{Namespace: namespace, Name: name}
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, had := l.tasks[key]; had {
		l.take(old)
		delete(l.tasks, key)
	}
}

// take removes a Task's attempts from their line; l is locked.
func (l *Lines) take(p placed) {
	ln := l.queues[p.queue]
	if ln == nil {
		return
	}
	for _, w := range p.waits {
		ln.order.Delete(w)
		if ln.jobs[w.JobName] == w {
			delete(ln.jobs, w.JobName)
		}
	}
	if ln.order.Len() == 0 {
		delete(l.queues, p.queue)
	}
}

// Waiter is the Task that waits in namespace's queue for the attempt
// whose Job is job, if the line holds one.
func (l *Lines) Waiter(namespace, queue, job string) (task string, ok bool) {
	if l == nil {
		return "", false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := l.queues[queueKey{namespace, queue}]
	if ln == nil {
		return "", false
	}
	w, ok := ln.jobs[job]
	return w.Task, ok
}

// Line is a queue's line as it is now, for one pass: a copy-on-write
// snapshot (O(1) to take), so events that change the line meanwhile do
// not change what the pass decides from. Waits answers only about the
// names in ask (the record's names and the queue's Jobs: what
// admission.Decide asks about).
func (l *Lines) Line(namespace, queue string, ask []string) admission.Line {
	if l == nil {
		return admission.Line{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := l.queues[queueKey{namespace, queue}]
	if ln == nil {
		return admission.Line{}
	}
	waiting := map[string]bool{}
	for _, name := range ask {
		if _, ok := ln.jobs[name]; ok {
			waiting[name] = true
		}
	}
	tree := ln.order.Clone()
	return admission.Line{
		Len:   tree.Len(),
		Waits: func(job string) bool { return waiting[job] },
		InOrder: func(yield func(admission.Waiting) bool) {
			tree.Ascend(func(w admission.Waiting) bool { return yield(w) })
		},
	}
}

// Handler keeps l up to date with the Tasks an informer sees, for a cache
// that has no queue controller of its own (a test's second cache): the
// queue controller's watch does this itself, before it wakes the queue.
func (l *Lines) Handler() toolscache.ResourceEventHandlerFuncs {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if t, ok := obj.(*v1alpha1.Task); ok {
				l.Put(t)
			}
		},
		UpdateFunc: func(_, obj any) {
			if t, ok := obj.(*v1alpha1.Task); ok {
				l.Put(t)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if t, ok := obj.(*v1alpha1.Task); ok {
				l.Remove(t.Namespace, t.Name)
			}
		},
	}
}
