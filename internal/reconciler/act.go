package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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

// act is stage 3: it carries out the plan, in its order, and keeps p.runs
// as the Jobs now are. It stops at the first error; a Job the API server
// refuses as invalid starts nothing more (p.refused).
func (p *pass) act(ctx context.Context) error {
	for _, name := range slices.Sorted(maps.Keys(p.plan.Relabel)) {
		if err := p.restoreLabels(ctx, name, p.plan.Relabel[name]); err != nil {
			return fmt.Errorf("restoring the labels of Job %s: %w", name, err)
		}
	}
	for _, s := range p.plan.Stop {
		if err := p.stopAttempt(ctx, s); err != nil {
			return fmt.Errorf("stopping attempt %d of run %s: %w", s.Attempt, s.RunID, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.plan.Capture)) {
		if err := p.keepOutput(ctx, name, p.plan.Capture[name]); err != nil {
			return fmt.Errorf("keeping the output on Job %s: %w", name, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(p.plan.RecordRetryAfter)) {
		if err := p.keepRetryAfter(ctx, name, p.plan.RecordRetryAfter[name]); err != nil {
			return fmt.Errorf("keeping Retry-After on Job %s: %w", name, err)
		}
	}
	for _, s := range p.plan.Start {
		if err := p.startAttempt(ctx, s); err != nil {
			return fmt.Errorf("starting attempt %d of run %s: %w", s.Attempt, s.RunID, err)
		}
		if p.refused != nil || p.jobRefused != nil {
			return nil
		}
	}
	for _, pr := range p.plan.Prune {
		if err := p.pruneRun(ctx, pr); err != nil {
			return fmt.Errorf("pruning run %s: %w", pr.RunID, err)
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
	job := jobs.Build(p.task, s.RunID, s.Attempt, s.Scheduled, s.Params, p.r.Jobs)
	if p.plan.RunNowToken != "" {
		job.Annotations[v1alpha1.AnnotationRunNowToken] = p.plan.RunNowToken
	}
	if token := runs.RunNowToken(p.task.Annotations[v1alpha1.AnnotationRunNow], s.RunID, runs.Find(p.runs, s.RunID)); token != "" {
		job.Annotations[v1alpha1.AnnotationRunNowTokenValue] = token
	}
	if created := p.r.Shortcuts.Created(ctrl.ObjectKeyFromObject(job), p.now); created != nil {
		// Created by an earlier pass of this process; not in the cache yet.
		p.addAttempt(s.RunID, s.Scheduled, runs.AttemptOf(created, s.Attempt))
		return nil
	}
	if behind, err := p.cacheBehindDelete(ctx, job); err != nil || behind {
		return err
	}
	if legacy, err := p.legacyAttempt(ctx, s); err != nil || legacy != nil {
		if legacy != nil {
			p.addAttempt(s.RunID, s.Scheduled, runs.AttemptOf(legacy, s.Attempt))
		}
		return err
	}
	err := p.r.Client.Create(ctx, job)
	switch {
	case err == nil:
		p.r.Shortcuts.RememberCreated(job, p.now)
		metrics.AttemptsTotal.WithLabelValues(string(p.task.Spec.Type), "started").Inc()
		if s.Scheduled != nil && s.Attempt == 1 {
			metrics.ScheduleDelay.Observe(p.now.Sub(*s.Scheduled).Seconds())
		}
		p.created++
		log.FromContext(ctx).Info("created Job", "job", job.Name, "run", s.RunID, "attempt", s.Attempt)
		// A run's first Job shows in the Task's status and Job list; an
		// event for it would cost every run a request (a burst or a cron
		// slot of 1000 Tasks: 1000 more requests while Jobs wait to start).
		// A retry is worth one.
		if s.Attempt > 1 {
			p.r.event(p.task, job, eventNormal, v1alpha1.EventAttemptCreated, "CreateJob",
				fmt.Sprintf("run %s: attempt %d started as Job %s", s.RunID, s.Attempt, job.Name))
		}
		if slots := p.plan.Schedule.Slots; slots != nil && slots.Missed > 0 && s.Scheduled != nil && s.Attempt == 1 && slots.Due.Equal(*s.Scheduled) {
			// Reported now, not after the status write: once the slot's
			// Job exists, a pass that follows a lost write counts from that
			// slot and no longer sees the slots missed before it.
			p.missedEvent(slots)
		}
	case apierrors.IsAlreadyExists(err):
		existing := &batchv1.Job{}
		if err := p.r.APIReader.Get(ctx, ctrl.ObjectKeyFromObject(job), existing); err != nil {
			return err
		}
		if !runs.ControlledBy(existing, p.task.UID) {
			p.refuse(s, v1alpha1.ReasonJobRefused, fmt.Sprintf("Job %s exists and is not this Task's (it holds the attempt's name): delete that Job (kubectl delete job %s), or give this Task another name", job.Name, job.Name))
			return nil
		}
		job = existing
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The namespace is being deleted: its Tasks go with it, and every
		// retry would be refused the same way.
		return errNamespaceTerminating
	case apierrors.IsForbidden(err) && retry.QuotaRefusal(err.Error()):
		p.refuse(s, v1alpha1.ReasonWaitingForCapacity, "a ResourceQuota refused its Job: "+err.Error())
		return nil
	case apierrors.IsForbidden(err):
		p.refuse(s, v1alpha1.ReasonJobRefused, "the API server refused its Job: "+err.Error())
		return nil
	case apierrors.IsInvalid(err):
		p.refused = &status.Problem{Reason: v1alpha1.ReasonInvalidSpec, Message: status.Head("the API server refused the Job: "+err.Error(), status.MaxMessage)}
		return nil
	case mayPass(err):
		p.waitForAPI(s, err)
		return nil
	default:
		return err
	}
	p.addAttempt(s.RunID, s.Scheduled, runs.AttemptOf(job, s.Attempt))
	return nil
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

// stopAttempt stops an attempt the contract's way: annotate its Job with
// the reason and time, and suspend it, which ends its pods and keeps the
// record. A finished Job, or the failed last attempt of a run waiting out
// its backoff, only gets the annotations, so it never retries.
func (p *pass) stopAttempt(ctx context.Context, s plan.Stop) error {
	run := runs.Find(p.runs, s.RunID)
	if run == nil || run.Attempt(s.Attempt) == nil {
		return nil
	}
	a := run.Attempt(s.Attempt)
	stamp := p.now.UTC().Truncate(time.Second)
	job := p.jobRef(a.JobName)
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		v1alpha1.AnnotationStopReason:  string(s.Reason),
		v1alpha1.AnnotationStopTime:    stamp.Format(time.RFC3339),
		v1alpha1.AnnotationStopMessage: status.Head(s.Message, status.MaxMessage),
	}}}
	if s.Reason == v1alpha1.AttemptCancelled && p.plan.CancelToken != "" {
		patch["metadata"].(map[string]any)["annotations"].(map[string]string)[v1alpha1.AnnotationCancelToken] = p.plan.CancelToken
		a.CancelToken = p.plan.CancelToken
	}
	if a.Phase == runs.Active {
		patch["spec"] = map[string]any{"suspend": true}
	}
	if found, err := p.patchJob(ctx, job, patch); !found || err != nil {
		return err
	}
	if a.Phase == runs.Active && jobs.KueueManaged(p.task) {
		// Kueue would unsuspend an admitted Job again (kueue.go).
		if err := p.deactivateWorkload(ctx, a.JobName); err != nil {
			return err
		}
	}
	log.FromContext(ctx).Info("stopped attempt", "job", a.JobName, "reason", s.Reason)
	p.r.event(p.task, job, eventWarning, v1alpha1.EventAttemptStopped, "StopJob",
		fmt.Sprintf("attempt %d (Job %s) stopped: %s: %s", a.Number, a.JobName, s.Reason, s.Message))
	a.Stop(s.Reason, s.Message, stamp)
	return nil
}

// keepOutput records on the Job what the pods of an attempt being failed
// for its deadline printed (see deadlineOutput).
func (p *pass) keepOutput(ctx context.Context, jobName, output string) error {
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.AnnotationOutput: output}}}
	if found, err := p.patchJob(ctx, p.jobRef(jobName), patch); !found || err != nil {
		return err
	}
	if a := runs.FindAttempt(p.runs, jobName); a != nil {
		a.Output = output
	}
	return nil
}

// keepRetryAfter records on the Job of a failed http attempt the server's
// Retry-After, so it is read from the pods once.
func (p *pass) keepRetryAfter(ctx context.Context, jobName string, secs int64) error {
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		v1alpha1.AnnotationRetryAfter: strconv.FormatInt(secs, 10)}}}
	if found, err := p.patchJob(ctx, p.jobRef(jobName), patch); !found || err != nil {
		return err
	}
	if a := runs.FindAttempt(p.runs, jobName); a != nil {
		a.RetryAfter, a.RetryAfterKnown = time.Duration(secs)*time.Second, true
	}
	return nil
}

// restoreLabels puts back the labels the operator finds its Jobs by, when
// a user removed or changed them (see findMissingAttempts). Other labels
// are left as they are.
func (p *pass) restoreLabels(ctx context.Context, jobName string, missing map[string]string) error {
	if !p.r.leaseHeld() {
		return guards.ErrLeaseLapsed
	}
	job := p.jobRef(jobName)
	if found, err := p.patchJob(ctx, job, map[string]any{"metadata": map[string]any{"labels": missing}}); !found || err != nil {
		return err
	}
	log.FromContext(ctx).Info("restored the labels of a child Job", "job", jobName, "labels", missing)
	p.r.event(p.task, job, eventNormal, v1alpha1.EventJobLabelsRestored, "RestoreLabels",
		fmt.Sprintf("Job %s had lost the operator's labels; they were put back", jobName))
	return nil
}

// pruneRun deletes the Jobs of a finished run beyond the history limits
// (the plan prunes only runs the stored status records as finished).
func (p *pass) pruneRun(ctx context.Context, pr plan.Prune) error {
	for _, name := range pr.JobNames {
		err := p.r.Client.Delete(ctx, p.jobRef(name), ctrl.PropagationPolicy(metav1.DeletePropagationBackground))
		if ctrl.IgnoreNotFound(err) != nil {
			return err
		}
	}
	p.r.event(p.task, nil, eventNormal, v1alpha1.EventJobsDeleted, "DeleteJobs",
		fmt.Sprintf("deleted the %d Job(s) of finished run %s (history limits)", len(pr.JobNames), pr.RunID))
	p.runs = slices.DeleteFunc(p.runs, func(r runs.Run) bool { return r.ID == pr.RunID })
	return nil
}

// jobRef is a Job of the Task's namespace by name: all a patch, a delete
// or an event needs.
func (p *pass) jobRef(name string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: p.task.Namespace, Name: name}}
}

// patchJob merge-patches a Job without reading it first. A Job that is gone
// needs no patch: found is false then, and so is the error.
func (p *pass) patchJob(ctx context.Context, job *batchv1.Job, patch map[string]any) (found bool, err error) {
	b, err := json.Marshal(patch)
	if err != nil {
		return false, err
	}
	err = p.r.Client.Patch(ctx, job, ctrl.RawPatch(types.MergePatchType, b))
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
