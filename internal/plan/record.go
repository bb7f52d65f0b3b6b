package plan

import (
	"time"

	"github.com/taskops/task-operator/internal/runs"
)

// When a pass's status write may wait (with the speed shortcuts on): it
// costs a write per Task and the Jobs record everything it would say.

// RecordLater reports whether the status write (and the events compared
// from it) can wait for the next pass, given how many Jobs the pass
// created (not found existing). A pass that created Jobs is followed by the
// pass their create events bring, which records them from the same Jobs;
// meanwhile the next Task's Job is created first. In a burst or a cron
// slot of many Tasks every Job exists sooner, and a Job that finished by
// then costs one status write instead of two. It is safe for the same
// reason a status write lost in a crash is: the Job names make a second Job
// for one attempt impossible, and the Jobs carry everything this pass
// decided - except two things only this pass knows, so those are written
// now: attempts whose Job was deleted, and cron slots missed in downtime.
func (p *Plan) RecordLater(created int) bool {
	return created > 0 && p.JobsSayItAll()
}

// JobsSayItAll reports whether the Jobs carry everything the plan decided,
// so that a status write can wait: not when Jobs were deleted, cron slots
// were missed in downtime, queued runs were dropped or missed, upstream
// runs were consumed on a skip date (only the status records those), or
// the Task expires. Consumed tokens are on the
// Jobs: a new Job records the run-now token consumed and the cancel token
// the Task carries (jobs.Build), a stopped one the cancel that stopped it.
func (p *Plan) JobsSayItAll() bool {
	missed := p.Schedule.Slots != nil && p.Schedule.Slots.Missed > 0
	queueOnly := len(p.QueuedMissed) > 0 || len(p.Dropped) > 0 || len(p.ChainSkipped) > 0
	return p.DeletedJobs == 0 && !missed && !queueOnly && !p.Expire
}

// RecordStartAt returns when a pass that would write the status should
// write it instead, or zero for now: while every active attempt's Job is
// younger than delay and no attempt ended recently, what the pass would
// record is attempts that just started, and their own end (or the wake-up
// at the returned time) brings the pass that records them. A run shorter
// than delay then costs one status write (its end) instead of two
// (Running, then its end), and a running Task shows Running at most delay
// plus one second (creationTimestamp has whole seconds) after its Job was
// created. An attempt that ended within the delay is recorded now: its end
// is what the user waits for. Nothing active, a zero delay, or a Job newer
// than now (a clock oddity): now.
func RecordStartAt(rs []runs.Run, now time.Time, delay time.Duration) time.Time {
	if delay <= 0 {
		return time.Time{}
	}
	var at time.Time
	for i := range rs {
		for _, a := range rs[i].Attempts {
			if a.Phase != runs.Active {
				if !a.Finished.IsZero() && now.Sub(a.Finished) < delay+time.Second {
					return time.Time{}
				}
				continue
			}
			// The Job may be up to a second younger than its
			// creationTimestamp says.
			due := a.Created.Add(time.Second + delay)
			if now.Before(a.Created) || !now.Before(due) {
				return time.Time{}
			}
			if at.IsZero() || due.Before(at) {
				at = due
			}
		}
	}
	return at
}
