package plan

import (
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/params"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/scheduler"
	"github.com/taskops/task-operator/internal/status"
)

// planRuns is stage 4: each run's next step, which new runs start (or
// replace the active ones), and, for a queued Task, which of the starts
// its queue admitted. The starts are simulated on the runs, so stage 5
// sees them.
func (d *decision) planRuns(schedule *scheduler.Schedule) {
	task, now, p := d.task, d.now, &d.p
	steps := retry.Steps(task, d.rs, now)
	known := knownRuns(task, d.rs)
	for _, q := range d.pending {
		known[q.RunID] = true
	}
	for _, dr := range p.Dropped {
		known[dr.Queued.RunID] = true // ended this pass, never to start again
	}
	p.Schedule = scheduler.PlanRuns(scheduler.Input{
		Task: task, Known: known, Runs: append(runStates(d.rs, steps), pendingStates(d.pending)...), ConsumedTokens: consumedTokens(d.rs),
		Schedule: schedule, Triggers: d.chainTriggers(known), Now: now,
	})
	p.RunNowToken = p.Schedule.RunNowToken
	if p.RunNowToken == "" {
		p.RunNowToken = task.Status.LastRunNowToken
	}

	// Replace stops the active runs, queued ones included.
	var replaced []Dropped
	d.pending, replaced = dropPending(d.pending, func(id string) (bool, Dropped) {
		return contains(p.Schedule.Replace, id), Dropped{Result: v1alpha1.RunResultStopped, Reason: v1alpha1.AttemptReplaced, Message: "replaced while queued: " + replacedMessage}
	})
	p.Dropped = append(p.Dropped, replaced...)
	for _, id := range p.Schedule.Replace {
		if run := runs.Find(d.rs, id); run != nil {
			d.stop(id, run.Latest(), v1alpha1.AttemptReplaced, replacedMessage)
		}
	}

	// The starts, oldest run first: next attempts of existing runs, the
	// queued new runs, then the scheduler's new runs.
	for _, run := range d.rs {
		if step := steps[run.ID]; step.Kind == retry.StartAttempt && !contains(p.Schedule.Replace, run.ID) {
			// A retry keeps its run's values, whatever the spec or the
			// run-params annotation say now.
			p.Start = append(p.Start, Start{RunID: run.ID, Attempt: step.Attempt, Scheduled: run.Scheduled, Params: run.Params(), Trigger: run.Trigger()})
		}
	}
	suspended := task.Spec.Suspend != nil && *task.Spec.Suspend
	var held []v1alpha1.QueuedAttempt
	for _, q := range d.pending {
		if suspended && !runs.IsRunNow(q.RunID) {
			// Keeps its place (and the time it first waited) but asks for
			// no admission until the Task is resumed. A run-now run is
			// exempt from suspend, queued or not.
			held = append(held, q)
			continue
		}
		var at *time.Time
		if q.ScheduledTime != nil {
			at = &q.ScheduledTime.Time
		}
		p.Start = append(p.Start, Start{RunID: q.RunID, Attempt: q.Attempt, Scheduled: at, Params: q.Params, Trigger: q.Trigger})
	}
	for _, nr := range p.Schedule.Start {
		values, err := d.runParams(nr.ID)
		if err != nil {
			// No Job: the run fails at once, and the token (or the
			// upstream runs) that asked for it is consumed all the same.
			q := v1alpha1.QueuedAttempt{RunID: nr.ID, Attempt: 1, JobName: jobs.Name(task, nr.ID, 1), Trigger: nr.Trigger}
			if nr.Scheduled != nil {
				q.ScheduledTime = status.Time(*nr.Scheduled)
			}
			p.Dropped = append(p.Dropped, Dropped{Queued: q, Result: v1alpha1.RunResultFailed, Reason: v1alpha1.ReasonInvalidParams, Message: err.Error()})
			continue
		}
		p.Start = append(p.Start, Start{RunID: nr.ID, Attempt: 1, Scheduled: nr.Scheduled, Params: values, Trigger: nr.Trigger})
	}

	// A backfill's slots, after the scheduler's (backfill.go).
	d.planBackfill(schedule, steps, known)

	// A queued Task's starts wait for admission (queue.go).
	var overflow []v1alpha1.QueuedAttempt
	p.Start, p.Queued, overflow = gate(task, d.in.Queue, p.Start, now)
	p.QueuedMissed = append(p.QueuedMissed, overflow...)
	p.Queued = append(held, p.Queued...)
	d.consumeTriggers() // spec.after's runs taken: started, queued, failed (chain.go)
	for _, s := range p.Start {
		d.rs = runs.AddAttempt(d.rs, s.RunID, s.Scheduled, runs.Attempt{
			Number: s.Attempt, JobName: jobs.Name(task, s.RunID, s.Attempt), Phase: runs.Active,
			Created: now, Generation: task.Generation, Params: s.Params,
		})
	}
}

// runParams are a new run's values: a run-now run's from the run-params
// annotation of the same Task version as its token, a chained run's from
// its upstream runs' results (chain.go), run 0's and a cron slot's the
// defaults.
func (d *decision) runParams(runID string) (map[string]string, error) {
	task := d.task
	if t, ok := d.chained(runID); ok {
		return t.Params, t.ParamsErr
	}
	if runs.IsRunNow(runID) {
		return params.Resolve(task.Spec.Params, task.Annotations[v1alpha1.AnnotationRunParams])
	}
	return params.Defaults(task.Spec.Params)
}
