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
// token found while the status was never written and no Job exists
// (present at creation) is only recorded, as is one a Job records as seen:
// it stopped that Job (a pass whose status write was lost), or the Task
// carried it when the Job was made (jobs.Build), so it predates the Job.
// Otherwise a token cancels, also before the first status write: the user
// set it after the Task's Jobs were made.
func cancelToken(task *v1alpha1.Task, rs []runs.Run) (hash string, cancels bool) {
	token := task.Annotations[v1alpha1.AnnotationCancel]
	if token == "" {
		return "", false
	}
	hash = runs.TokenHash(token)
	if hash == task.Status.LastCancelToken {
		return "", false
	}
	if task.Status.ObservedGeneration == 0 && len(rs) == 0 {
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
