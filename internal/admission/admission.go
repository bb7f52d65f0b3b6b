// Package admission is the decision of one TaskQueue pass: which attempts
// hold a place, which are released, and which waiting attempts are
// admitted next, in priority order, first come first served within a
// priority. It is pure: a function of the queue's stored admission record,
// what its Jobs say and what its Tasks wait for, table-tested without an
// API server. The queue reconciler (internal/taskqueue) only
// reads the inputs and writes the result.
//
// The admission record (TaskQueue status.admitted) is the cap's single
// source of truth: a place is taken by writing a Job name into it, with
// optimistic locking on the one TaskQueue object, and an attempt's Job is
// created only once its name is there. Two writers (two reconciles, an old
// and a new leader) therefore never both fill the last place: the second
// write fails with a conflict and is decided again from the first's result.
package admission

import (
	"cmp"
	"container/heap"
	"maps"
	"slices"
	"time"
)

// Waiting is an attempt a Task of the queue waits to start
// (Task status.queued).
type Waiting struct {
	// Task is the Task's name, JobName the attempt's Job.
	Task    string
	JobName string
	// Priority is the Task's spec.priority; Since when the attempt became
	// ready to start.
	Priority int32
	Since    time.Time
}

// JobState is what one Job of the queue's attempts says.
type JobState struct {
	// Finished: the Job completed, failed, or was stopped by the operator
	// (suspended) and its pods are gone; its place is free.
	Finished bool
}

// Input is what a queue pass observed.
type Input struct {
	MaxRunning int32
	Suspended  bool
	// Admitted is the admission record as stored.
	Admitted []string
	// Jobs holds, by name, the queue's Jobs: those labelled with the
	// queue, plus every Job the record lists that the pass could find
	// (a Job missing here is known not to exist).
	Jobs map[string]JobState
	// Waiting are the attempts the queue's Tasks wait to start.
	Waiting []Waiting
	// Exists, when set, reports whether a Job of the given name exists
	// although Jobs does not hold it (a finished one). A waiting attempt
	// whose Job exists is not admitted: the Task's status that lists it
	// is older than the Job (its pass created the Job and has not yet
	// recorded that). It is asked only about attempts about to be
	// admitted, so the observer need not look up every waiting one.
	Exists func(jobName string) bool
}

// Decision is the new admission record and what changed.
type Decision struct {
	// Admitted is the new record, sorted: the places held.
	Admitted []string
	// Admit are the attempts admitted this pass, in admission order.
	Admit []Waiting
	// Released are the places freed this pass; Adopted the active Jobs
	// holding a place the record did not list (a Task moved into the
	// queue while running, or a queue re-created).
	Released []string
	Adopted  []string
	// Line is who still waits, in no particular order (only its length
	// is written): putting the whole line in order would cost every pass
	// O(W log W) for W waiting, where only the first few are admitted.
	Line []Waiting
}

// Running is how many places are held.
func (d Decision) Running() int32 { return int32(len(d.Admitted)) }

// Decide makes the decision of one queue pass. A place is held by an
// attempt the record lists until its Job finished, or until it is known
// to have no Job and no Task waits for it any more (cancelled, or its Task
// deleted, suspended or moved to another queue); an active Job of the
// queue the record misses holds a place too, even above the cap (lowering
// maxRunning, or a Task moved into the queue while running, stops
// nothing). Then, unless the queue is suspended, the waiting attempts are
// admitted in order while places are free.
func Decide(in Input) Decision {
	var d Decision
	// The record's names without a Job, and whether a Task waits for
	// them: only those need the waiting attempts looked through (a set of
	// the whole line would cost every pass a map of W entries).
	unstarted := map[string]bool{}
	for _, name := range in.Admitted {
		if _, exists := in.Jobs[name]; !exists {
			unstarted[name] = false
		}
	}
	for _, w := range in.Waiting {
		if _, ok := unstarted[w.JobName]; ok {
			unstarted[w.JobName] = true
		}
	}
	held := map[string]bool{}
	for _, name := range in.Admitted {
		job, exists := in.Jobs[name]
		switch {
		case exists && !job.Finished, !exists && unstarted[name]:
			held[name] = true
		default:
			d.Released = append(d.Released, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(in.Jobs)) {
		if !in.Jobs[name].Finished && !held[name] {
			held[name] = true
			d.Adopted = append(d.Adopted, name)
		}
	}

	line := make([]Waiting, 0, len(in.Waiting))
	for _, w := range in.Waiting {
		if _, exists := in.Jobs[w.JobName]; !exists && !held[w.JobName] {
			line = append(line, w)
		}
	}
	free := int(in.MaxRunning) - len(held)
	for free > 0 && len(line) > 0 && !in.Suspended {
		n := min(free, len(line))
		orderFirst(line, n)
		for _, w := range line[:n] {
			if in.Exists != nil && in.Exists(w.JobName) {
				continue // already created: waits for nothing
			}
			d.Admit = append(d.Admit, w)
			held[w.JobName] = true
			free--
		}
		line = line[n:]
	}
	d.Line = line
	d.Admitted = slices.Sorted(maps.Keys(held))
	return d
}

// orderFirst moves the first n attempts of line in admission order to its
// front, in that order, in O(W log n) for W attempts: a bounded max-heap
// of the n best seen so far, then a sort of those n.
func orderFirst(line []Waiting, n int) {
	if n >= len(line)/2 {
		slices.SortFunc(line, Order)
		return
	}
	h := firstN(line[:n])
	heap.Init(&h)
	for i := n; i < len(line); i++ {
		if Order(line[i], line[0]) < 0 {
			line[0], line[i] = line[i], line[0]
			heap.Fix(&h, 0)
		}
	}
	slices.SortFunc(line[:n], Order)
}

// firstN is a max-heap by admission order: its root is the last of the
// n first, the one a better attempt replaces.
type firstN []Waiting

func (h firstN) Len() int           { return len(h) }
func (h firstN) Less(i, j int) bool { return Order(h[i], h[j]) > 0 }
func (h firstN) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *firstN) Push(any)          { panic("firstN has a fixed size") }
func (h *firstN) Pop() any          { panic("firstN has a fixed size") }

// Order is admission order: higher priority first, then first come first
// served, then by Job name so equal times are decided the same way by
// every pass.
func Order(a, b Waiting) int {
	if c := cmp.Compare(b.Priority, a.Priority); c != 0 {
		return c
	}
	if c := a.Since.Compare(b.Since); c != 0 {
		return c
	}
	return cmp.Compare(a.JobName, b.JobName)
}
