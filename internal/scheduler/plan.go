package scheduler

import (
	"math"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
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
	// ConsumedTokens are the run-now token hashes the Jobs record as
	// consumed (see v1alpha1.AnnotationRunNowToken).
	ConsumedTokens map[string]bool
	// Schedule is the parsed spec.schedule of a cron Task (nil for one-shot).
	Schedule *Schedule
	// Triggers are the runs finished upstream runs ask for (spec.after,
	// internal/chain), oldest first.
	Triggers []NewRun
	Now      time.Time
}

// NewRun is a run to start now with its first attempt.
type NewRun struct {
	ID        string
	Scheduled *time.Time
	// Trigger lists the upstream runs that start it (spec.after).
	Trigger []v1alpha1.TriggerRef
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
	// SkippedSlot says why Slots.Due did not start (empty when it started
	// or none was due).
	SkippedSlot string
}

// PlanRuns decides which runs start now: the initial run of a one-shot Task,
// a new run-now token, and (for cron Tasks) the due slot, each following
// suspend and concurrencyPolicy.
func PlanRuns(in Input) Plan {
	var p Plan
	spec := &in.Task.Spec
	suspended := spec.Suspend != nil && *spec.Suspend
	active := activeRuns(in.Runs)

	// A Task that runs after others (spec.after) has no initial run.
	if in.Schedule == nil && len(spec.After) == 0 && !in.Known[runs.OneShot] && !suspended {
		p.Start = append(p.Start, NewRun{ID: runs.OneShot})
	}
	if in.Schedule != nil {
		planSlot(in, active, suspended, &p)
	}
	planRunNow(in, active, &p)
	planTriggers(in, active, suspended, &p)
	return p
}

// planTriggers starts the runs finished upstream runs ask for, oldest
// first, each under concurrencyPolicy beside the runs active and those
// starting this pass: Forbid starts one when nothing runs and leaves the
// rest waiting; Replace starts only the newest (the older ones are
// consumed with it); Allow starts them all, up to MaxActiveRuns.
// Suspended, they all wait. A trigger that waits is not consumed: only
// those in p.Start are.
func planTriggers(in Input, active []string, suspended bool, p *Plan) {
	ts := in.Triggers
	if suspended || len(ts) == 0 {
		return
	}
	if policyOf(in.Task) == v1alpha1.ReplaceConcurrent {
		ts = ts[len(ts)-1:]
	} else {
		for _, s := range p.Start {
			active = append(active, s.ID)
		}
	}
	for _, t := range ts {
		if p.startUnderPolicy(in.Task, active, t, MaxActiveRuns) != "" {
			return
		}
		active = append(active, t.ID)
	}
}

// planSlot starts the run of the cron slot that fell due, at most one per
// slot and only the newest after downtime. The slot is reported in
// p.Slots whether it starts or is skipped (too late, suspended, Forbid), so
// the status records it and it is never considered again.
func planSlot(in Input, active []string, suspended bool, p *Plan) {
	slots := in.Schedule.Due(lastSlot(in), startingDeadline(in.Task), in.Now)
	p.Slots = &slots
	if slots.Due.IsZero() {
		return
	}
	id := runs.ScheduledID(slots.Due)
	switch {
	case in.Known[id]:
		// Started by a pass whose status write was lost.
		return
	case slots.SkipDate:
		p.SkippedSlot = SkipDate
		return
	case slots.TooLate, suspended, specEditedSinceLastPass(in.Task):
		p.SkippedSlot = SkipReason(slots.TooLate, suspended)
		return
	case streakStops(in.Task):
		p.SkippedSlot = SkipTooManyFailures
		return
	}
	due := slots.Due
	p.SkippedSlot = p.startUnderPolicy(in.Task, active, NewRun{ID: id, Scheduled: &due}, MaxActiveRuns)
}

// MaxActiveRuns bounds the active runs of a Task under concurrencyPolicy
// Allow: a slot that falls due while this many run is skipped (counted
// and reported like a Forbid skip). Without a bound, a frequent schedule
// whose runs outlast its period piles up Jobs without end, and the
// status (status.active lists at most 100 Jobs) could not record them.
const MaxActiveRuns = 100

// Why a due slot did not start.
const (
	SkipTooLate   = "TooLate"
	SkipSuspended = "Suspended"
	SkipEdited    = "SpecEdited"
	SkipForbidden = "Forbidden"
	// SkipTooManyActive: under Allow, MaxActiveRuns runs are active.
	SkipTooManyActive = "TooManyActive"
	// SkipTooManyFailures: spec.suspendAfterFailures consecutive runs
	// failed.
	SkipTooManyFailures = "TooManyFailures"
	// SkipDate: the slot's date is a skip date (spec.skipDates,
	// spec.skipDatesFrom). Not missed.
	SkipDate = "SkipDate"
)

// SkipReason names why a slot was skipped before concurrency was looked at.
func SkipReason(tooLate, suspended bool) string {
	switch {
	case tooLate:
		return SkipTooLate
	case suspended:
		return SkipSuspended
	}
	return SkipEdited
}

// lastSlot is the newest slot already considered: the status's
// lastScheduleTime, or a scheduled run the status has not recorded yet
// (its write was lost), or the Task's creation.
func lastSlot(in Input) time.Time {
	last := in.Task.CreationTimestamp.Time
	if t := in.Task.Status.LastScheduleTime; t != nil && t.After(last) {
		last = t.Time
	}
	for id := range in.Known {
		if t, ok := runs.SlotOf(id); ok && t.After(last) {
			last = t
		}
	}
	return last
}

// specEditedSinceLastPass reports a spec change the status has not seen
// yet. Slots that fell due before such a pass are skipped, so editing the
// schedule (or anything else) never starts a run retroactively. A Task's
// first pass is not an edit: its slots since creation count.
func specEditedSinceLastPass(t *v1alpha1.Task) bool {
	return t.Status.ObservedGeneration != 0 && t.Status.ObservedGeneration != t.Generation
}

func startingDeadline(t *v1alpha1.Task) *time.Duration {
	if t.Spec.StartingDeadlineSeconds == nil {
		return nil
	}
	d := time.Duration(*t.Spec.StartingDeadlineSeconds) * time.Second // at most a year: no overflow
	return &d
}

// planRunNow starts one run for a new run-now token. A token already there
// on the operator's very first pass (no status, no Job yet) is recorded
// without a run, so a Task created with the annotation runs once, not
// twice; the Jobs of that pass carry the record too.
func planRunNow(in Input, active []string, p *Plan) {
	token, ok := in.Task.Annotations[v1alpha1.AnnotationRunNow]
	if !ok || token == "" {
		return
	}
	hash := runs.TokenHash(token)
	id := runs.RunNowID(token)
	st := &in.Task.Status
	switch {
	case hash == st.LastRunNowToken:
		return
	case in.Known[id] || in.ConsumedTokens[hash]:
		// Consumed by a pass whose status write was lost: record it now,
		// start nothing.
		p.RunNowToken = hash
		return
	case st.ObservedGeneration == 0 && len(in.Runs) == 0:
		p.RunNowToken = hash
		return
	}
	// The one-shot initial run about to start this pass is not active yet;
	// counting it would make Forbid wait for a run it just started. A
	// run-now is one run a user asked for: MaxActiveRuns does not bound it.
	if p.startUnderPolicy(in.Task, active, NewRun{ID: id}, math.MaxInt) == SkipForbidden {
		p.RunNowWaiting = true
		return
	}
	p.RunNowToken = hash
}

// startUnderPolicy starts run as spec.concurrencyPolicy lets it beside the
// active runs: Forbid makes it wait (SkipForbidden), Replace stops them
// first, Allow starts it beside them unless maxActive run already
// (SkipTooManyActive). "" when it starts.
func (p *Plan) startUnderPolicy(t *v1alpha1.Task, active []string, run NewRun, maxActive int) string {
	switch besideActive(t, active) {
	case waitForActive:
		return SkipForbidden
	case replaceActive:
		p.Replace = append(p.Replace, active...)
	case startBeside:
		if len(active) >= maxActive {
			return SkipTooManyActive
		}
	}
	p.Start = append(p.Start, run)
	return ""
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

// besideActive says what spec.concurrencyPolicy makes of a new run (a
// slot or a run-now) while the runs active are running: nothing active
// starts it; Forbid waits for them; Replace replaces them; Allow starts it
// beside them (the caller bounds how many).
func besideActive(t *v1alpha1.Task, active []string) concurrency {
	switch {
	case len(active) == 0:
		return startAlone
	case policyOf(t) == v1alpha1.ForbidConcurrent:
		return waitForActive
	case policyOf(t) == v1alpha1.ReplaceConcurrent:
		return replaceActive
	}
	return startBeside
}

// concurrency is what besideActive decided.
type concurrency int

const (
	startAlone concurrency = iota
	waitForActive
	replaceActive
	startBeside
)

func policyOf(t *v1alpha1.Task) v1alpha1.ConcurrencyPolicy {
	if t.Spec.ConcurrencyPolicy == "" {
		return v1alpha1.ForbidConcurrent
	}
	return t.Spec.ConcurrencyPolicy
}

// streakStops reports whether the stored status's failure streak stops
// the Task's slots. A spec change resumes the Task: the status of the new
// generation starts the count over (internal/status), and until it is
// written the stored count is of an older spec.
func streakStops(task *v1alpha1.Task) bool {
	return task.Status.ObservedGeneration == task.Generation && TooManyFailures(&task.Spec, task.Status.ConsecutiveFailures)
}

// TooManyFailures reports whether a cron Task's failure streak stops its
// slots: consecutive failed runs reached spec.suspendAfterFailures.
func TooManyFailures(spec *v1alpha1.TaskSpec, consecutive int32) bool {
	n := spec.SuspendAfterFailures
	return spec.Schedule != nil && n != nil && consecutive >= *n
}
