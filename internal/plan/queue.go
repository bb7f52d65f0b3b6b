package plan

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/scheduler"
	"github.com/taskops/task-operator/internal/status"
)

// MaxQueued is how many places in its queue's line one Task may hold
// (status.queued): a further new run while they wait is skipped (a cron
// slot counts as missed).
const MaxQueued = 10

// Queue is what a pass saw of the TaskQueue a Task names (spec.queueName).
type Queue struct {
	Name string
	// Found: the TaskQueue exists.
	Found bool
	// Suspended: the TaskQueue admits nothing new.
	Suspended bool
	// Admitted holds the Job names the queue's admission record lists,
	// sorted (status.admitted as stored).
	Admitted []string
}

// admits reports whether the attempt whose Job is name may start: always
// without a queue.
func (q *Queue) admits(name string) bool {
	if q == nil {
		return true
	}
	_, ok := slices.BinarySearch(q.Admitted, name)
	return ok
}

// Dropped is a queued new run that ends before its Job was ever created:
// cancelled, or replaced by a newer run. The status records it as a run.
type Dropped struct {
	Queued  v1alpha1.QueuedAttempt
	Result  v1alpha1.RunResult
	Reason  v1alpha1.Reason
	Message string
}

// takePending reads the queued new runs the status remembers; a cron slot
// queued past its starting deadline is skipped (counted as missed).
func (d *decision) takePending() {
	pending, missed, deadline := pastDeadline(d.task, pendingRuns(d.task, d.rs), d.now)
	d.pending, d.p.QueuedMissed = pending, missed
	d.wake.add(deadline)
}

// pendingRuns are the new runs the status remembers as queued and that
// have no Job yet. A queued retry is not among them: its run has Jobs, so
// the retry planner finds it again each pass. A queued new run has nothing
// but the status: the scheduler considered its slot or token once.
func pendingRuns(task *v1alpha1.Task, rs []runs.Run) []v1alpha1.QueuedAttempt {
	var out []v1alpha1.QueuedAttempt
	for _, q := range task.Status.Queued {
		if runs.Find(rs, q.RunID) == nil {
			out = append(out, q)
		}
	}
	return out
}

// pastDeadline splits the pending runs into those a cron Task may still
// start and the slots queued longer than startingDeadlineSeconds, which are
// skipped and counted as missed. wake is when the next one passes its
// deadline.
func pastDeadline(task *v1alpha1.Task, pending []v1alpha1.QueuedAttempt, now time.Time) (keep, missed []v1alpha1.QueuedAttempt, wake time.Time) {
	deadline := task.Spec.StartingDeadlineSeconds
	var w earliest
	for _, q := range pending {
		if q.ScheduledTime == nil || deadline == nil {
			keep = append(keep, q)
			continue
		}
		// As for a slot that was never queued: it may start up to the
		// deadline after it, inclusive.
		last := q.ScheduledTime.Add(time.Duration(max(*deadline, 0)) * time.Second)
		if now.After(last) {
			missed = append(missed, q)
			continue
		}
		keep = append(keep, q)
		w.add(last.Add(time.Second))
	}
	return keep, missed, w.t
}

// pendingStates are the pending runs as the scheduler sees them: known (never
// planned again) and active (Forbid skips a slot while one waits; Replace
// replaces it).
func pendingStates(pending []v1alpha1.QueuedAttempt) []scheduler.RunState {
	out := make([]scheduler.RunState, 0, len(pending))
	for _, q := range pending {
		out = append(out, scheduler.RunState{ID: q.RunID, Active: true})
	}
	return out
}

// dropPending removes the pending runs ids names (replaced) or all of them
// (cancelled), as Dropped records.
func dropPending(pending []v1alpha1.QueuedAttempt, drop func(id string) (bool, Dropped)) (keep []v1alpha1.QueuedAttempt, dropped []Dropped) {
	for _, q := range pending {
		if ok, d := drop(q.RunID); ok {
			d.Queued = q
			dropped = append(dropped, d)
			continue
		}
		keep = append(keep, q)
	}
	return keep, dropped
}

// gate holds back the starts the queue has not admitted: they wait in
// status.queued, keeping the time they first waited (their place in the
// line). Starts come oldest run first, so a Task's retries queue before its
// new runs; beyond MaxQueued a new cron slot is missed and other new runs
// wait for a place in the next pass.
func gate(task *v1alpha1.Task, q *Queue, starts []Start, now time.Time) (admitted []Start, queued []v1alpha1.QueuedAttempt, missed []v1alpha1.QueuedAttempt) {
	if q == nil {
		return starts, nil, nil
	}
	since := map[string]metav1.MicroTime{}
	for _, w := range task.Status.Queued {
		since[w.JobName] = w.Since
	}
	for _, s := range starts {
		name := jobs.Name(task, s.RunID, s.Attempt)
		if q.admits(name) {
			admitted = append(admitted, s)
			continue
		}
		w := v1alpha1.QueuedAttempt{RunID: s.RunID, Attempt: s.Attempt, JobName: name}
		if s.Attempt == 1 {
			// A new run has nothing but the status until its Job exists:
			// its values and trigger wait here (a retry's are on its
			// run's Jobs).
			w.Params, w.Trigger = s.Params, s.Trigger
		}
		if s.Scheduled != nil {
			w.ScheduledTime = status.Time(*s.Scheduled) // a slot: whole seconds
		}
		if t, ok := since[name]; ok {
			w.Since = t
		} else {
			w.Since = metav1.NewMicroTime(readyAt(task, s, now))
		}
		if len(queued) == MaxQueued {
			if s.Scheduled != nil {
				missed = append(missed, w)
			}
			continue
		}
		queued = append(queued, w)
	}
	return admitted, queued, missed
}

// readyAt is when a start became ready: its place in the line within a
// priority. A cron slot's run is ready at its slot. The initial run of a
// one-shot Task is ready when the Task was created: creation times have
// one-second resolution, so within that second the pass's own time keeps
// the order in which Tasks arrived, and a pass that comes later (a backlog
// after a restart) still ranks the Task by its creation. Anything else (a
// retry, whose pass comes when it falls due; a run-now) is ready now.
func readyAt(task *v1alpha1.Task, s Start, now time.Time) time.Time {
	switch {
	case s.Scheduled != nil:
		return *s.Scheduled
	case s.RunID == runs.OneShot && s.Attempt == 1 && !task.CreationTimestamp.IsZero():
		if end := task.CreationTimestamp.Add(time.Second - time.Microsecond); now.After(end) {
			return end
		}
	}
	return now
}

// QueueProblem is why a queued Task's attempts cannot be admitted now,
// beyond waiting their turn: the queue is missing or suspended ("" when it
// admits).
func (q *Queue) Problem() (v1alpha1.Reason, string) {
	switch {
	case q == nil:
		return "", ""
	case !q.Found:
		return v1alpha1.ReasonQueueNotFound, fmt.Sprintf("TaskQueue %q does not exist; the Task starts once it does", q.Name)
	case q.Suspended:
		return v1alpha1.ReasonQueueSuspended, fmt.Sprintf("TaskQueue %q is suspended", q.Name)
	}
	return "", ""
}
