package reconciler

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/guards"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/metrics"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/status"
)

// startAttempts creates the Jobs of the attempts the plan starts, until
// the API server refuses one (p.refused, p.jobRefused).
func (p *pass) startAttempts(ctx context.Context) error {
	for _, s := range p.plan.Start {
		if err := p.startAttempt(ctx, s); err != nil {
			return fmt.Errorf("starting attempt %d of run %s: %w", s.Attempt, s.RunID, err)
		}
		if p.refused != nil || p.jobRefused != nil {
			return nil
		}
	}
	return nil
}

// startAttempt creates the Job of one attempt. The Job name is
// deterministic, so a Job that already exists and that this Task controls
// is the attempt, created by an earlier pass whose status write was lost:
// never a second Job for one attempt. A Job the API server refuses as
// invalid makes the spec InvalidSpec, without retrying in a loop; any
// other refusal (a policy, a quota, a foreign Job under the name) is
// recorded by refuse (jobrefused.go).
func (p *pass) startAttempt(ctx context.Context, s plan.Start) error {
	if !p.r.leaseHeld() {
		return guards.ErrLeaseLapsed
	}
	job := p.attemptJob(s)
	if found, err := p.attemptExists(ctx, s, job); err != nil || found {
		return err
	}
	err := p.r.Client.Create(ctx, job)
	if err == nil {
		p.jobCreated(ctx, s, job)
	} else if job, err = p.createRefused(ctx, s, job, err); job == nil || err != nil {
		return err
	}
	p.addAttempt(s.RunID, s.Scheduled, runs.AttemptOf(job, s.Attempt))
	return nil
}

// attemptJob is the Job of attempt s, with the tokens the pass consumed.
func (p *pass) attemptJob(s plan.Start) *batchv1.Job {
	job := jobs.Build(p.task, s.RunID, s.Attempt, s.Scheduled, s.Params, p.r.Jobs)
	if p.plan.RunNowToken != "" {
		job.Annotations[v1alpha1.AnnotationRunNowToken] = p.plan.RunNowToken
	}
	if token := runs.RunNowToken(p.task.Annotations[v1alpha1.AnnotationRunNow], s.RunID, runs.Find(p.runs, s.RunID)); token != "" {
		job.Annotations[v1alpha1.AnnotationRunNowTokenValue] = token
	}
	if trigger := runs.EncodeTrigger(s.Trigger); trigger != "" {
		job.Annotations[v1alpha1.AnnotationTrigger] = trigger
	}
	return job
}

// attemptExists reports whether the attempt's Job need not be created:
// an earlier pass of this process created it (not in the cache yet), the
// cache has not seen its deletion yet, or it exists under the name earlier
// builds gave it. Found attempts are added to the pass's runs.
func (p *pass) attemptExists(ctx context.Context, s plan.Start, job *batchv1.Job) (bool, error) {
	if created := p.r.Shortcuts.Created(ctrl.ObjectKeyFromObject(job), p.now); created != nil {
		p.addAttempt(s.RunID, s.Scheduled, runs.AttemptOf(created, s.Attempt))
		return true, nil
	}
	if behind, err := p.cacheBehindDelete(ctx, job); err != nil || behind {
		return true, err
	}
	legacy, err := p.legacyAttempt(ctx, s)
	if legacy != nil {
		p.addAttempt(s.RunID, s.Scheduled, runs.AttemptOf(legacy, s.Attempt))
	}
	return legacy != nil, err
}

// jobCreated counts, logs and reports the Job of attempt s just created.
func (p *pass) jobCreated(ctx context.Context, s plan.Start, job *batchv1.Job) {
	p.r.Shortcuts.RememberCreated(job, p.now)
	metrics.AttemptsTotal.WithLabelValues(string(p.task.Spec.Type), "started").Inc()
	if s.Scheduled != nil && s.Attempt == 1 {
		metrics.ScheduleDelay.Observe(p.now.Sub(*s.Scheduled).Seconds())
	}
	p.created++
	log.FromContext(ctx).Info("created Job", "job", job.Name, "run", s.RunID, "attempt", s.Attempt)
	// A run's first Job shows in the Task's status and Job list; an event
	// for it would cost every run a request (a burst or a cron slot of
	// 1000 Tasks: 1000 more requests while Jobs wait to start). A retry is
	// worth one.
	if s.Attempt > 1 {
		p.r.event(p.task, job, eventNormal, v1alpha1.EventAttemptCreated, "CreateJob",
			fmt.Sprintf("run %s: attempt %d started as Job %s", s.RunID, s.Attempt, job.Name))
	}
	if slots := p.plan.Schedule.Slots; slots != nil && slots.Missed > 0 && s.Scheduled != nil && s.Attempt == 1 && slots.Due.Equal(*s.Scheduled) {
		// Reported now, not after the status write: once the slot's Job
		// exists, a pass that follows a lost write counts from that slot
		// and no longer sees the slots missed before it.
		p.missedEvent(slots)
	}
}

// createRefused handles a create of attempt s's Job that the API server
// refused: it returns the Job to record when it is this Task's own (it
// existed already), nil when the refusal is recorded in the pass (the
// attempt waits or the spec is at fault), or the error to end the pass
// with.
func (p *pass) createRefused(ctx context.Context, s plan.Start, job *batchv1.Job, err error) (*batchv1.Job, error) {
	switch {
	case apierrors.IsAlreadyExists(err):
		existing := &batchv1.Job{}
		if err := p.r.APIReader.Get(ctx, ctrl.ObjectKeyFromObject(job), existing); err != nil {
			return nil, err
		}
		if !runs.ControlledBy(existing, p.task.UID) {
			p.refuse(s, v1alpha1.ReasonJobRefused, fmt.Sprintf("Job %s exists and is not this Task's (it holds the attempt's name): delete that Job (kubectl delete job %s), or give this Task another name", job.Name, job.Name))
			return nil, nil
		}
		return existing, nil
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The namespace is being deleted: its Tasks go with it, and every
		// retry would be refused the same way.
		return nil, errNamespaceTerminating
	case apierrors.IsForbidden(err) && retry.QuotaRefusal(err.Error()):
		p.refuse(s, v1alpha1.ReasonWaitingForCapacity, "a ResourceQuota refused its Job: "+err.Error())
	case apierrors.IsForbidden(err):
		p.refuse(s, v1alpha1.ReasonJobRefused, "the API server refused its Job: "+err.Error())
	case apierrors.IsInvalid(err):
		p.refused = &status.Problem{Reason: v1alpha1.ReasonInvalidSpec, Message: status.Head("the API server refused the Job: "+err.Error(), status.MaxMessage)}
	case guards.MayPass(err):
		p.waitForAPI(s, err)
	default:
		return nil, err
	}
	return nil, nil
}

// legacyAttempt is the attempt's Job under the name earlier builds gave
// it (jobs.LegacyName), when the Task's name is cut and such a Job of the
// Task exists: made before an upgrade and not in the cache (yet), it is
// the attempt, and a Job under the new name would be a second one. One
// read, only for cut names.
func (p *pass) legacyAttempt(ctx context.Context, s plan.Start) (*batchv1.Job, error) {
	names := jobs.Names(p.task, s.RunID, s.Attempt)
	if len(names) < 2 {
		return nil, nil
	}
	return p.readOwnJob(ctx, names[1:], func(j *batchv1.Job) bool { return runs.ControlledBy(j, p.task.UID) })
}

// addAttempt records a Job this pass made (or found) in p.runs.
func (p *pass) addAttempt(runID string, scheduled *time.Time, a runs.Attempt) {
	if a.Created.IsZero() {
		// The Job has just been created: the API server's timestamp is in
		// the returned object, but guard against a client that drops it.
		a.Created = p.now
	}
	p.runs = runs.AddAttempt(p.runs, runID, scheduled, a)
}
