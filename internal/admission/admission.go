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
	"iter"
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

// Line is the attempts waiting in a queue, as the pass saw them. The
// queue's line is kept in order in memory (internal/waitline), so a pass
// reads its first attempts and its length without going through every
// waiting attempt: its cost follows the places it fills, not the line.
type Line struct {
	// Len is how many attempts wait.
	Len int
	// Waits reports whether an attempt waits; it is asked only about the
	// record's names and the queue's Jobs. nil: none waits.
	Waits func(jobName string) bool
	// InOrder yields the waiting attempts in admission order (Order).
	// nil: none.
	InOrder iter.Seq[Waiting]
}

// LineOf is the Line of the attempts ws, in any order (sorted here: for
// tests, and lines read without the in-memory line).
func LineOf(ws ...Waiting) Line {
	sorted := slices.SortedFunc(slices.Values(ws), Order)
	byJob := make(map[string]bool, len(ws))
	for _, w := range ws {
		byJob[w.JobName] = true
	}
	return Line{Len: len(ws), Waits: func(job string) bool { return byJob[job] }, InOrder: slices.Values(sorted)}
}

// Has reports whether an attempt waits (Waits, nil meaning none).
func (l Line) Has(jobName string) bool { return l.Waits != nil && l.Waits(jobName) }

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
	// Line is the attempts the queue's Tasks wait to start.
	Line Line
	// WaitsUnseen are attempts of the record that a Task waits for
	// although Line does not show it (the line is this process's view of
	// the Tasks, which can be older than the record another replica
	// wrote): held like those in line.
	WaitsUnseen map[string]bool
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
	// Queued is how many attempts still wait: the line, less those
	// admitted now and those that wait for nothing (their Job exists, or
	// holds a place).
	Queued int
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
// admitted in order while places are free. It reads the line only up to
// the last attempt it admits: O(maxRunning + admitted) map lookups.
func Decide(in Input) Decision {
	var d Decision
	held := map[string]bool{}
	for _, name := range in.Admitted {
		job, exists := in.Jobs[name]
		switch {
		case exists && !job.Finished, !exists && (in.Line.Has(name) || in.WaitsUnseen[name]):
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

	// The waiting attempts whose Job exists or that hold a place wait
	// for nothing: not in line.
	notInLine := 0
	for name := range in.Jobs {
		if in.Line.Has(name) {
			notInLine++
		}
	}
	for name := range held {
		if _, exists := in.Jobs[name]; !exists && in.Line.Has(name) {
			notInLine++
		}
	}
	free := int(in.MaxRunning) - len(held)
	if free > 0 && !in.Suspended && in.Line.InOrder != nil {
		for w := range in.Line.InOrder {
			if _, exists := in.Jobs[w.JobName]; exists || held[w.JobName] {
				continue // counted in notInLine
			}
			if in.Exists != nil && in.Exists(w.JobName) {
				notInLine++ // already created: waits for nothing
				continue
			}
			d.Admit = append(d.Admit, w)
			held[w.JobName] = true
			if free--; free == 0 {
				break
			}
		}
	}
	d.Queued = max(in.Line.Len-notInLine-len(d.Admit), 0)
	d.Admitted = slices.Sorted(maps.Keys(held))
	return d
}

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
