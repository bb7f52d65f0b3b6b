package reconciler

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/scheduler"
)

// pruneDelay is how soon a pass prunes runs the previous pass recorded.
const pruneDelay = time.Second

// problem is a spec the operator cannot act on.
type problem struct {
	Reason  v1alpha1.Reason // InvalidSpec or InvalidSchedule
	Message string
}

// pass is one reconcile of one Task: what was observed, decided and done.
type pass struct {
	r    *TaskReconciler
	task *v1alpha1.Task
	old  *v1alpha1.TaskStatus
	now  time.Time

	schedule *scheduler.Schedule
	runs     []runs.Run
	steps    map[string]retry.Step
	plan     scheduler.Plan
	invalid  *problem
	// outputs holds what the pods of a finished attempt said (termination
	// message or exit code), by Job name, read only when the status does
	// not have it yet.
	outputs map[string]string
	// expired: a finished one-shot Task past its ttlSecondsAfterFinished.
	expired bool
	// created counts the Jobs this pass created (not found existing).
	created int
	// deletedJobs counts the attempts whose Job a user deleted, found by
	// this pass (see findMissingAttempts).
	deletedJobs int
}

// run observes, decides and acts. It returns when the Task next needs a
// look (zero: only when something changes).
func (p *pass) run(ctx context.Context) (time.Time, error) {
	var wake earliest
	jobList, err := p.r.listJobs(ctx, p.task)
	if err != nil {
		return time.Time{}, err
	}
	p.r.recent.seen(jobList)
	p.runs = runs.FromJobs(p.task.UID, jobList)
	p.outputs = map[string]string{}
	if err := p.findMissingAttempts(ctx); err != nil {
		return time.Time{}, err
	}

	if p.invalid = p.validate(); p.invalid != nil {
		p.steps = p.decideSteps()
		return time.Time{}, nil
	}

	timeout := retry.StartTimeout(&p.task.Spec)
	if err := p.enforceStartTimeouts(ctx, timeout, &wake); err != nil {
		return wake.t, err
	}
	if err := p.captureOutputs(ctx); err != nil {
		return wake.t, err
	}
	p.steps = p.decideSteps()
	p.plan = scheduler.PlanRuns(scheduler.Input{
		Task: p.task, Known: p.knownRuns(), Runs: p.runStates(), ConsumedTokens: p.consumedTokens(),
		Schedule: p.schedule, Now: p.now,
	})
	if err := p.act(ctx); err != nil {
		return wake.t, err
	}
	p.steps = p.decideSteps()
	for _, s := range p.steps {
		if s.Kind == retry.WaitForRetry {
			wake.add(s.At)
		}
	}
	if p.plan.Slots != nil {
		wake.add(p.plan.Slots.Next)
	}
	again, err := p.pruneHistory(ctx)
	if err != nil {
		return wake.t, err
	}
	if again {
		wake.add(p.now.Add(pruneDelay))
	}
	if err := p.readOutputs(ctx); err != nil {
		return wake.t, err
	}
	p.steps = p.decideSteps() // again: the outputs make better messages
	p.checkTTL(&wake)
	return wake.t, nil
}

// validate reports what the API server's schema could not refuse. A Job
// create the API server refused for this generation is not retried until
// the spec changes.
func (p *pass) validate() *problem {
	if p.task.Spec.Schedule != nil {
		tz := ""
		if p.task.Spec.TimeZone != nil {
			tz = *p.task.Spec.TimeZone
		}
		s, err := scheduler.Parse(*p.task.Spec.Schedule, tz)
		if err != nil {
			return &problem{Reason: v1alpha1.ReasonInvalidSchedule, Message: err.Error()}
		}
		p.schedule = s
	}
	if c := meta.FindStatusCondition(p.old.Conditions, v1alpha1.ConditionStalled); c != nil &&
		c.Status == "True" && c.Reason == string(v1alpha1.ReasonInvalidSpec) && c.ObservedGeneration == p.task.Generation {
		return &problem{Reason: v1alpha1.ReasonInvalidSpec, Message: c.Message}
	}
	return nil
}

// act stops what must stop and starts what must start.
func (p *pass) act(ctx context.Context) error {
	for _, id := range p.plan.Replace {
		if err := p.stopRun(ctx, id, v1alpha1.AttemptReplaced, "replaced by a newer run (concurrencyPolicy: Replace)"); err != nil {
			return err
		}
	}
	// Next attempts of existing runs, oldest run first.
	for _, run := range p.runs {
		step := p.steps[run.ID]
		if step.Kind != retry.StartAttempt || contains(p.plan.Replace, run.ID) {
			continue
		}
		if err := p.startAttempt(ctx, run.ID, step.Attempt, run.Scheduled); err != nil || p.invalid != nil {
			return err
		}
	}
	for _, nr := range p.plan.Start {
		if err := p.startAttempt(ctx, nr.ID, 1, nr.Scheduled); err != nil || p.invalid != nil {
			return err
		}
	}
	return nil
}

// decideSteps asks the retry state machine for each run's next step.
func (p *pass) decideSteps() map[string]retry.Step {
	policy := retry.PolicyFor(&p.task.Spec)
	suspended := p.task.Spec.Suspend != nil && *p.task.Spec.Suspend
	steps := make(map[string]retry.Step, len(p.runs))
	for i := range p.runs {
		run := &p.runs[i]
		paused := suspended && !runs.IsRunNow(run.ID)
		steps[run.ID] = retry.Next(run, policy, paused, p.now)
	}
	return steps
}

// knownRuns is every run id the Task ever had. The status remembers runs
// whose Jobs were pruned; any run at all means the initial run happened
// (a run-now on a one-shot Task that never ran is its first run).
func (p *pass) knownRuns() map[string]bool {
	known := map[string]bool{}
	for _, r := range p.runs {
		known[r.ID] = true
	}
	for _, h := range p.old.History {
		known[h.RunID] = true
	}
	if p.old.CurrentRun != "" || len(p.runs) > 0 {
		known["0"] = true
	}
	return known
}

// consumedTokens are the run-now token hashes recorded on the Jobs.
func (p *pass) consumedTokens() map[string]bool {
	consumed := map[string]bool{}
	for _, r := range p.runs {
		for _, a := range r.Attempts {
			if a.RunNowToken != "" {
				consumed[a.RunNowToken] = true
			}
		}
	}
	return consumed
}

func (p *pass) runStates() []scheduler.RunState {
	out := make([]scheduler.RunState, 0, len(p.runs))
	for _, r := range p.runs {
		out = append(out, scheduler.RunState{ID: r.ID, Active: p.steps[r.ID].Active()})
	}
	return out
}

// checkTTL marks a finished one-shot Task for deletion once its
// ttlSecondsAfterFinished passed, or wakes up when it will.
func (p *pass) checkTTL(wake *earliest) {
	ttl := p.task.Spec.TTLSecondsAfterFinished
	if ttl == nil || p.schedule != nil || len(p.runs) == 0 || len(p.plan.Start) > 0 || p.plan.RunNowWaiting {
		return
	}
	var finished time.Time
	for _, s := range p.steps {
		if !s.Finished() {
			return
		}
		if s.At.After(finished) {
			finished = s.At
		}
	}
	at := finished.Add(time.Duration(*ttl) * time.Second)
	if !p.now.Before(at) {
		p.expired = true
		return
	}
	wake.add(at)
}

// recordLater reports whether the status write (and the events compared
// from it) can wait for the next pass. A pass that created Jobs is followed
// by the pass their create events bring, which records them from the same
// Jobs; meanwhile the next Task's Job is created first. In a burst or a cron
// slot of many Tasks every Job exists sooner, and a Job that finished by
// then costs one status write instead of two. It is safe for the same
// reason a status write lost in a crash is: the Job names make a second Job
// for one attempt impossible, and the Jobs carry everything this pass
// decided - except two things only this pass knows, so those are written
// now: attempts whose Job was deleted, and cron slots missed in downtime.
func (p *pass) recordLater() bool {
	missed := p.plan.Slots != nil && p.plan.Slots.Missed > 0
	return p.created > 0 && p.deletedJobs == 0 && !missed && !p.expired
}

func (p *pass) outcome() outcome {
	return outcome{now: p.now, runs: p.runs, steps: p.steps, plan: p.plan, invalid: p.invalid, outputs: p.outputs, cron: p.task.Spec.Schedule != nil}
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
