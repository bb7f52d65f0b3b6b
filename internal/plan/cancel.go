package plan

import (
	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
)

// cancelMessage is the stop message of an attempt a cancel token stopped.
const cancelMessage = "a new batch.taskops.io/cancel token"

// cancelToken reads the cancel annotation: the hash of a token the status
// has not consumed yet ("" when there is none), and whether it cancels. A
// token on the operator's very first pass (no status yet: present at
// creation, or a status wiped since) is only recorded, as is one a Job
// already records as consumed (a pass whose status write was lost).
func cancelToken(task *v1alpha1.Task, rs []runs.Run) (hash string, cancels bool) {
	token := task.Annotations[v1alpha1.AnnotationCancel]
	if token == "" {
		return "", false
	}
	hash = runs.TokenHash(token)
	if hash == task.Status.LastCancelToken {
		return "", false
	}
	if task.Status.ObservedGeneration == 0 {
		return hash, false
	}
	for _, r := range rs {
		for _, a := range r.Attempts {
			if a.CancelToken == hash {
				return hash, false
			}
		}
	}
	return hash, true
}

// cancelRuns are the stops of a cancel: the last attempt of every run that
// has not finished (running, waiting out its backoff, due to retry, or
// paused by suspend).
func cancelRuns(task *v1alpha1.Task, rs []runs.Run, steps map[string]retry.Step) []Stop {
	var stops []Stop
	for _, r := range rs {
		if steps[r.ID].Finished() {
			continue
		}
		stops = append(stops, Stop{RunID: r.ID, Attempt: r.Latest().Number, Reason: v1alpha1.AttemptCancelled, Message: cancelMessage})
	}
	return stops
}

// cancel is stage 2: a new cancel token stops every unfinished run, queued
// ones too; the scheduler then sees them finished, so a run-now in the
// same pass starts anew.
func (d *decision) cancel() {
	hash, cancels := cancelToken(d.task, d.rs)
	if hash == "" {
		return
	}
	d.p.CancelToken = hash
	if !cancels {
		return
	}
	var dropped []Dropped
	d.pending, dropped = dropPending(d.pending, func(string) (bool, Dropped) {
		return true, Dropped{Result: v1alpha1.RunResultCancelled, Reason: v1alpha1.ReasonCancelled, Message: "cancelled while queued: " + cancelMessage}
	})
	d.p.Dropped = append(d.p.Dropped, dropped...)
	for _, s := range cancelRuns(d.task, d.rs, retry.Steps(d.task, d.rs, d.now)) {
		d.stop(s.RunID, runs.Find(d.rs, s.RunID).Latest(), s.Reason, s.Message)
	}
}
