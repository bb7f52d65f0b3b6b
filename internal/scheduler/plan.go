package scheduler

import (
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
)

// RunState is what the planner needs of one run that exists.
type RunState struct {
	ID string
	// Active: running or waiting out its backoff. A run paused by suspend
	// is not active.
	Active bool
}

// Input is everything the run planner decides from.
type Input struct {
	Task *v1alpha1.Task
	// Known holds every run id the Task ever had: those with Jobs and those
	// only the status still remembers (their Jobs were pruned). A known run
	// is never started again.
	Known map[string]bool
	// Runs are the runs with Jobs, with their activity.
	Runs []RunState
	// Schedule is the parsed spec.schedule of a cron Task (nil for one-shot).
	Schedule *Schedule
	Now      time.Time
}

// NewRun is a run to start now with its first attempt.
type NewRun struct {
	ID        string
	Scheduled *time.Time
}

// Plan says which runs start and stop now.
type Plan struct {
	// Start are the runs to start now, in order.
	Start []NewRun
	// Replace are the active runs to stop first (concurrencyPolicy Replace).
	Replace []string
	// RunNowToken is the hash of the run-now token to record as consumed
	// (status.lastRunNowToken); empty leaves the status as it is.
	RunNowToken string
	// RunNowWaiting is true when a new run-now token waits for the active
	// run to end (Forbid).
	RunNowWaiting bool
	// Cron bookkeeping: the slot that fell due (started or skipped), the
	// slots missed, and the next slot.
	Slots *Slots
}

// IsRunNow reports whether a run id was started by a run-now token. Such a
// run keeps retrying while the Task is suspended.
func IsRunNow(runID string) bool { return len(runID) > 0 && runID[0] == 'm' }

// PlanRuns decides which runs start now: the initial run of a one-shot Task,
// a new run-now token, and (for cron Tasks) the due slot, each following
// suspend and concurrencyPolicy.
func PlanRuns(in Input) Plan {
	var p Plan
	spec := &in.Task.Spec
	suspended := spec.Suspend != nil && *spec.Suspend
	active := activeRuns(in.Runs)

	if in.Schedule == nil && !in.Known[jobs.RunIDOneShot] && !suspended {
		p.Start = append(p.Start, NewRun{ID: jobs.RunIDOneShot})
	}
	planRunNow(in, active, &p)
	return p
}

// planRunNow starts one run for a new run-now token. A token already there
// when the operator first saw the Task (status never written) is recorded
// without a run, so a Task created with the annotation runs once, not twice.
func planRunNow(in Input, active []string, p *Plan) {
	token, ok := in.Task.Annotations[v1alpha1.AnnotationRunNow]
	if !ok || token == "" {
		return
	}
	hash := jobs.TokenHash(token)
	id := jobs.RunNowRunID(token)
	st := &in.Task.Status
	switch {
	case hash == st.LastRunNowToken:
		return
	case in.Known[id]:
		// Started before the status recorded the token (a crash or a lost
		// write): record it now, start nothing.
		p.RunNowToken = hash
		return
	case st.ObservedGeneration == 0:
		p.RunNowToken = hash
		return
	}
	// The one-shot initial run about to start this pass is not active yet;
	// counting it would make Forbid wait for a run it just started.
	switch policyOf(in.Task) {
	case v1alpha1.ForbidConcurrent:
		if len(active) > 0 {
			p.RunNowWaiting = true
			return
		}
	case v1alpha1.ReplaceConcurrent:
		p.Replace = append(p.Replace, active...)
	}
	p.Start = append(p.Start, NewRun{ID: id})
	p.RunNowToken = hash
}

func activeRuns(rs []RunState) []string {
	var ids []string
	for _, r := range rs {
		if r.Active {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

func policyOf(t *v1alpha1.Task) v1alpha1.ConcurrencyPolicy {
	if t.Spec.ConcurrencyPolicy == "" {
		return v1alpha1.ForbidConcurrent
	}
	return t.Spec.ConcurrencyPolicy
}
