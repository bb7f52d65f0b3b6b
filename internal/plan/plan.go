// Package plan is the decision of one reconcile pass: Decide turns what the
// pass observed of a Task (its Jobs as runs, the pods it had to look at,
// now) into one Plan value: what to stop, start, record on Jobs and prune,
// when to look again, whether the Task expired. It is pure, like the
// planners it chains (retry.Next for each run, scheduler.PlanRuns for new
// runs), so every decision is table-tested without an API server; the
// reconciler only carries the plan out.
//
//   - plan.go: Input, Plan and Decide, the decision in the order it is made;
//   - cancel.go: the cancel token and the runs it stops;
//   - queue.go: which starts of a queued Task wait for admission, and the
//     queued new runs the status remembers;
//   - prune.go: the history limits, and the TTL of a finished Task.
package plan

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/scheduler"
	"github.com/taskops/task-operator/internal/status"
)

// pruneDelay is how soon a pass prunes runs the previous pass recorded.
const pruneDelay = time.Second

// replacedMessage is the stop message of a run concurrencyPolicy Replace
// stopped.
const replacedMessage = "replaced by a newer run (concurrencyPolicy: Replace)"

// heldCause is what an attempt whose Job is held suspended waits for.
const heldCause = "the Job is suspended until admitted (by Kueue or another controller)"

// Input is what a pass observed.
type Input struct {
	// Task is the Task as read, its stored status included.
	Task *v1alpha1.Task
	// Runs are what the Task's Jobs say, with a stand-in (reason
	// JobDeleted) for each attempt the status records whose Job is gone.
	Runs []runs.Run
	// DeletedJobs counts those stand-ins.
	DeletedJobs int
	// Relabel holds, by Job name, the labels to put back on Jobs the Task
	// controls that lost them.
	Relabel map[string]map[string]string
	// Pods holds, by Job name, the pods of each active attempt whose start
	// check is due (retry.StartCheckDue); other attempts have none here.
	Pods map[string][]retry.PodStart
	// Refused holds, by Job name, why the Job controller could not create
	// the pods of an active attempt that has none, when its start check is
	// due and it said why (a FailedCreate event).
	Refused map[string]*retry.Refusal
	// Captured holds, by Job name, what the pods of an attempt the Job
	// controller is failing for its deadline printed, read this pass.
	Captured map[string]string
	// RetryAfter holds, by Job name, the Retry-After (seconds, 0: none) the
	// pods of a failed http attempt reported, read this pass.
	RetryAfter map[string]int64
	// Queue is the TaskQueue spec.queueName names, as the pass saw it; nil
	// when the Task names none.
	Queue *Queue
	// HeldBy holds, by Job name, what holds an attempt whose Job is held
	// suspended, when the pass could tell (Kueue's Workload message).
	HeldBy map[string]string
	// Policy is the operator's own check of the spec against its
	// namespace (the --service-accounts-opt-in flag): nil when there is
	// nothing to check.
	Policy *PolicyCheck
	Now    time.Time
}

// Stop is an attempt to stop: its Job is annotated with the reason and, if
// it is still running, suspended.
type Stop struct {
	RunID   string
	Attempt int32
	Reason  v1alpha1.Reason
	Message string
}

// Start is an attempt to start: its Job to create.
type Start struct {
	RunID     string
	Attempt   int32
	Scheduled *time.Time
}

// Prune is a finished run whose Jobs go (history limits).
type Prune struct {
	RunID    string
	JobNames []string
}

// Plan is everything one pass does, in the order it does it.
type Plan struct {
	// Problem, when set, is why the spec cannot be acted on: nothing is
	// stopped, started or pruned.
	Problem *status.Problem
	// Relabel: labels to put back, by Job name.
	Relabel map[string]map[string]string
	// Stop: attempts past their start or capacity timeout, runs a cancel
	// token stops, then runs Replace stops.
	Stop []Stop
	// Waiting holds, by Job name, what an attempt whose pods wait for
	// capacity waits for (status: WaitingForCapacity).
	Waiting map[string]string
	// CancelToken is the cancel token hash the status records as consumed
	// (status.lastCancelToken); empty leaves the status as it is.
	CancelToken string
	// Capture: outputs to keep on the Jobs being failed for their deadline
	// (v1alpha1.AnnotationOutput), by Job name.
	Capture map[string]string
	// RecordRetryAfter: Retry-After seconds to keep on the Jobs of failed
	// http attempts (v1alpha1.AnnotationRetryAfter), by Job name.
	RecordRetryAfter map[string]int64
	// Start: the next attempts of existing runs, oldest run first, then
	// the first attempts of new runs.
	Start []Start
	// Queued: the starts the queue has not admitted, waiting in line
	// (status.queued); QueuedMissed: cron slots queued past their
	// startingDeadlineSeconds, skipped and counted as missed; Dropped:
	// queued new runs a cancel or a Replace ended before they had a Job.
	Queued       []v1alpha1.QueuedAttempt
	QueuedMissed []v1alpha1.QueuedAttempt
	Dropped      []Dropped
	// Queue is the TaskQueue as the pass saw it (nil: none named).
	Queue *Queue
	// RunNowToken is the run-now token hash the new Jobs record as
	// consumed.
	RunNowToken string
	// Schedule is the scheduler's answer: new runs, replaced runs, the
	// token consumed, the cron slots and why a slot was skipped.
	Schedule scheduler.Plan
	// Prune: finished runs beyond the history limits.
	Prune []Prune
	// Expire: a finished one-shot Task past its ttlSecondsAfterFinished,
	// to delete after the status write.
	Expire bool
	// Wake is when the Task next needs a look (zero: only when something
	// changes): a start check, a retry, the next slot, a prune, a TTL.
	Wake time.Time
	// DeletedJobs counts the attempts whose Job a user deleted, which only
	// this pass knows of (see RecordLater).
	DeletedJobs int
}

// Decide makes the decision of one pass. It simulates its own stops and
// starts on a copy of the runs, so what it decides after them (retries to
// wait for, runs to prune, the TTL) sees the runs as the pass leaves them.
func Decide(in Input) Plan {
	task, now := in.Task, in.Now
	p := Plan{Relabel: in.Relabel, DeletedJobs: in.DeletedJobs, Queue: in.Queue}
	schedule, problem := validate(task, in.Policy)
	if problem != nil {
		p.Problem = problem
		if in.Policy != nil && in.Policy.Refused != nil {
			// The namespace may opt in any time; nothing watches it.
			p.Wake = now.Add(PolicyRecheck)
		}
		return p
	}
	stamp := now.UTC().Truncate(time.Second) // a stop's time, as its annotation keeps it
	rs := runs.Clone(in.Runs)
	var wake earliest

	// 1. Attempts whose pods could not start in time are stopped; those
	// waiting for capacity wait, up to capacityTimeoutSeconds; the others
	// are looked at again when their check is due.
	timeout := retry.StartTimeout(&task.Spec)
	kueue := jobs.KueueManaged(task)
	for i := range rs {
		a := rs[i].Latest()
		if a.Phase != runs.Active || a.PodsStarted {
			continue
		}
		var check retry.StartCheck
		switch {
		case a.Held:
			// A Job held suspended (by Kueue, say) waits for admission from
			// the start; its unsuspending brings the next pass, and what
			// holds it is looked at again every start timeout, as for an
			// Unschedulable pod.
			check = retry.StartCheck{Waiting: true, Cause: heldCause, RecheckAt: now.Add(timeout)}
			if by := in.HeldBy[a.JobName]; by != "" {
				check.Cause = by
			}
		case kueue && a.Resumed.IsZero():
			// Admitted by Kueue a moment ago: the Job controller has not
			// started the Job yet (status.startTime), where the start
			// timeout begins; that update brings the next pass.
			wake.add(now.Add(timeout))
			continue
		case !retry.StartCheckDue(a.StartBase(), timeout, now):
			wake.add(a.StartBase().Add(timeout))
			continue
		default:
			check = retry.CheckStart(a.StartBase(), in.Pods[a.JobName], in.Refused[a.JobName], timeout, now)
		}
		switch {
		case check.Stuck:
			p.Stop = append(p.Stop, Stop{RunID: rs[i].ID, Attempt: a.Number, Reason: v1alpha1.AttemptStartTimeout, Message: check.Message})
			a.Stop(v1alpha1.AttemptStartTimeout, check.Message, stamp)
		case check.Waiting:
			// Waiting for capacity is not a failure: only
			// capacityTimeoutSeconds ends it.
			if ct := retry.CapacityTimeout(&task.Spec); ct > 0 {
				deadline := a.Created.Add(ct)
				if !now.Before(deadline) {
					msg := fmt.Sprintf("waited %s for capacity: %s", ct, check.Cause)
					p.Stop = append(p.Stop, Stop{RunID: rs[i].ID, Attempt: a.Number, Reason: v1alpha1.AttemptCapacityTimeout, Message: msg})
					a.Stop(v1alpha1.AttemptCapacityTimeout, msg, stamp)
					continue
				}
				wake.add(deadline)
			}
			if p.Waiting == nil {
				p.Waiting = map[string]string{}
			}
			p.Waiting[a.JobName] = check.Cause
			wake.add(check.RecheckAt)
		default:
			wake.add(check.RecheckAt)
		}
	}

	// The new runs waiting in the queue's line; a cron slot queued past its
	// starting deadline is skipped.
	pending, missed, deadline := pastDeadline(task, pendingRuns(task, rs), now)
	p.QueuedMissed = missed
	wake.add(deadline)

	// 2. A new cancel token stops every unfinished run, queued ones too;
	// the scheduler then sees them finished, so a run-now in the same pass
	// starts anew.
	if hash, cancels := cancelToken(task, rs); hash != "" {
		p.CancelToken = hash
		if cancels {
			var dropped []Dropped
			pending, dropped = dropPending(pending, func(string) (bool, Dropped) {
				return true, Dropped{Result: v1alpha1.RunResultCancelled, Reason: v1alpha1.ReasonCancelled, Message: "cancelled while queued: " + cancelMessage}
			})
			p.Dropped = append(p.Dropped, dropped...)
			for _, s := range cancelRuns(task, rs, retry.Steps(task, rs, now)) {
				p.Stop = append(p.Stop, s)
				runs.Find(rs, s.RunID).Latest().Stop(s.Reason, s.Message, stamp)
			}
		}
	}

	// 3. Outputs of attempts being failed for their deadline are kept.
	for i := range rs {
		a := rs[i].Latest()
		if out := in.Captured[a.JobName]; out != "" && a.Phase == runs.Active {
			if p.Capture == nil {
				p.Capture = map[string]string{}
			}
			p.Capture[a.JobName] = out
			a.Output = out
		}
	}

	// A failed http attempt's Retry-After, read this pass, is kept on its
	// Job and sets the earliest next attempt.
	for i := range rs {
		a := rs[i].Latest()
		if secs, ok := in.RetryAfter[a.JobName]; ok && !a.RetryAfterKnown {
			if p.RecordRetryAfter == nil {
				p.RecordRetryAfter = map[string]int64{}
			}
			p.RecordRetryAfter[a.JobName] = secs
			a.RetryAfter, a.RetryAfterKnown = time.Duration(secs)*time.Second, true
		}
	}

	// 4. Each run's next step, and which new runs start (or replace).
	steps := retry.Steps(task, rs, now)
	known := knownRuns(task, rs)
	for _, q := range pending {
		known[q.RunID] = true
	}
	for _, d := range p.Dropped {
		known[d.Queued.RunID] = true // ended this pass, never to start again
	}
	p.Schedule = scheduler.PlanRuns(scheduler.Input{
		Task: task, Known: known, Runs: append(runStates(rs, steps), pendingStates(pending)...), ConsumedTokens: consumedTokens(rs),
		Schedule: schedule, Now: now,
	})
	p.RunNowToken = p.Schedule.RunNowToken
	if p.RunNowToken == "" {
		p.RunNowToken = task.Status.LastRunNowToken
	}
	var replaced []Dropped
	pending, replaced = dropPending(pending, func(id string) (bool, Dropped) {
		return contains(p.Schedule.Replace, id), Dropped{Result: v1alpha1.RunResultStopped, Reason: v1alpha1.AttemptReplaced, Message: "replaced while queued: " + replacedMessage}
	})
	p.Dropped = append(p.Dropped, replaced...)
	for _, id := range p.Schedule.Replace {
		if run := runs.Find(rs, id); run != nil {
			a := run.Latest()
			p.Stop = append(p.Stop, Stop{RunID: id, Attempt: a.Number, Reason: v1alpha1.AttemptReplaced, Message: replacedMessage})
			a.Stop(v1alpha1.AttemptReplaced, replacedMessage, stamp)
		}
	}
	for _, run := range rs {
		if step := steps[run.ID]; step.Kind == retry.StartAttempt && !contains(p.Schedule.Replace, run.ID) {
			p.Start = append(p.Start, Start{RunID: run.ID, Attempt: step.Attempt, Scheduled: run.Scheduled})
		}
	}
	suspended := task.Spec.Suspend != nil && *task.Spec.Suspend
	for _, q := range pending {
		if suspended {
			// Keeps its place (and the time it first waited) but asks for
			// no admission until the Task is resumed.
			continue
		}
		var at *time.Time
		if q.ScheduledTime != nil {
			at = &q.ScheduledTime.Time
		}
		p.Start = append(p.Start, Start{RunID: q.RunID, Attempt: q.Attempt, Scheduled: at})
	}
	for _, nr := range p.Schedule.Start {
		p.Start = append(p.Start, Start{RunID: nr.ID, Attempt: 1, Scheduled: nr.Scheduled})
	}
	// A queued Task's starts wait for admission (queue.go).
	var overflow []v1alpha1.QueuedAttempt
	p.Start, p.Queued, overflow = gate(task, in.Queue, p.Start, now)
	p.QueuedMissed = append(p.QueuedMissed, overflow...)
	if suspended {
		p.Queued = append(pending, p.Queued...)
	}
	for _, s := range p.Start {
		rs = runs.AddAttempt(rs, s.RunID, s.Scheduled, runs.Attempt{
			Number: s.Attempt, JobName: jobs.Name(task, s.RunID, s.Attempt), Phase: runs.Active,
			Created: now, Generation: task.Generation,
		})
	}

	// 5. From the runs as the pass leaves them: retries to wait for, the
	// next slot, the history limits, the TTL.
	steps = retry.Steps(task, rs, now)
	for _, s := range steps {
		if s.Kind == retry.WaitForRetry {
			wake.add(s.At)
		}
	}
	if p.Schedule.Slots != nil {
		wake.add(p.Schedule.Slots.Next)
	}
	kept, prune, again := pruneRuns(task, rs, steps)
	p.Prune = prune
	if again {
		wake.add(now.Add(pruneDelay))
	}
	if at, ok := expiresAt(task, kept, steps, p.Schedule); ok && len(p.Queued) == 0 {
		if !now.Before(at) {
			p.Expire = true
		} else {
			wake.add(at)
		}
	}
	p.Wake = wake.t
	return p
}

// PolicyCheck is the result of the operator's own check of a Task's spec
// against its namespace: Refused, when set, is why the spec may not run
// there (InvalidSpec).
type PolicyCheck struct {
	Refused *status.Problem
}

// PolicyRecheck is how often a Task the policy refuses is checked again: a
// namespace opting in is not watched.
const PolicyRecheck = 5 * time.Minute

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
	missed := p.Schedule.Slots != nil && p.Schedule.Slots.Missed > 0
	queueOnly := len(p.QueuedMissed) > 0 || len(p.Dropped) > 0 // only the status records them
	return created > 0 && p.DeletedJobs == 0 && !missed && !queueOnly && !p.Expire
}

// validate reports what the API server's schema could not refuse, and
// parses the schedule. A Job create the API server refused for this
// generation is not retried until the spec changes.
func validate(task *v1alpha1.Task, policy *PolicyCheck) (*scheduler.Schedule, *status.Problem) {
	var schedule *scheduler.Schedule
	if task.Spec.Schedule != nil {
		tz := ""
		if task.Spec.TimeZone != nil {
			tz = *task.Spec.TimeZone
		}
		s, err := scheduler.Parse(*task.Spec.Schedule, tz)
		if err != nil {
			return nil, &status.Problem{Reason: v1alpha1.ReasonInvalidSchedule, Message: err.Error()}
		}
		schedule = s
	}
	if task.Spec.QueueName != "" && jobs.KueueManaged(task) {
		return nil, &status.Problem{Reason: v1alpha1.ReasonInvalidSpec, Message: fmt.Sprintf(
			"spec.queueName %q and the label %s=%s name two queues: use a TaskQueue (spec.queueName) or Kueue (the label), not both",
			task.Spec.QueueName, v1alpha1.LabelKueueQueueName, task.Labels[v1alpha1.LabelKueueQueueName])}
	}
	if policy != nil && policy.Refused != nil {
		return nil, policy.Refused
	}
	// A stored InvalidSpec of this generation may be the policy's own
	// earlier refusal, which a namespace lifts without a spec change: when
	// the policy now allows the spec it is tried again (a Job the API
	// server refuses is refused again, at the cost of one request).
	if c := meta.FindStatusCondition(task.Status.Conditions, v1alpha1.ConditionStalled); c != nil && policy == nil &&
		c.Status == "True" && c.Reason == string(v1alpha1.ReasonInvalidSpec) && c.ObservedGeneration == task.Generation {
		return nil, &status.Problem{Reason: v1alpha1.ReasonInvalidSpec, Message: c.Message}
	}
	return schedule, nil
}

// knownRuns is every run id the Task ever had. The status remembers runs
// whose Jobs were pruned; any run at all means the initial run happened
// (a run-now on a one-shot Task that never ran is its first run).
func knownRuns(task *v1alpha1.Task, rs []runs.Run) map[string]bool {
	known := map[string]bool{}
	for _, r := range rs {
		known[r.ID] = true
	}
	for _, h := range task.Status.History {
		known[h.RunID] = true
	}
	if task.Status.CurrentRun != "" || len(rs) > 0 {
		known[runs.OneShot] = true
	}
	return known
}

// consumedTokens are the run-now token hashes recorded on the Jobs.
func consumedTokens(rs []runs.Run) map[string]bool {
	consumed := map[string]bool{}
	for _, r := range rs {
		for _, a := range r.Attempts {
			if a.RunNowToken != "" {
				consumed[a.RunNowToken] = true
			}
		}
	}
	return consumed
}

func runStates(rs []runs.Run, steps map[string]retry.Step) []scheduler.RunState {
	out := make([]scheduler.RunState, 0, len(rs))
	for _, r := range rs {
		out = append(out, scheduler.RunState{ID: r.ID, Active: steps[r.ID].Active()})
	}
	return out
}

// earliest keeps the earliest of the times added to it.
type earliest struct{ t time.Time }

func (e *earliest) add(t time.Time) {
	if !t.IsZero() && (e.t.IsZero() || t.Before(e.t)) {
		e.t = t
	}
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
