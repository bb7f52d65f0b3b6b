package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/metrics"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
)

// startAttempt creates the Job of one attempt. The Job name is
// deterministic, so a Job that already exists and that this Task controls
// is the attempt, created by an earlier pass whose status write was lost:
// never a second Job for one attempt. A Job the API server refuses as
// invalid makes the spec InvalidSpec, without retrying in a loop.
func (p *pass) startAttempt(ctx context.Context, runID string, attempt int32, scheduled *time.Time) error {
	if !p.r.leaseHeld() {
		return errLeaseLapsed
	}
	job := jobs.Build(p.task, runID, attempt, scheduled, p.r.Jobs)
	if token := p.consumedToken(); token != "" {
		job.Annotations[v1alpha1.AnnotationRunNowToken] = token
	}
	if created := p.r.recent.get(ctrl.ObjectKeyFromObject(job), p.now); created != nil {
		// Created by an earlier pass of this process; not in the cache yet.
		p.addAttempt(runID, scheduled, runs.AttemptOf(created, attempt))
		return nil
	}
	err := p.r.Client.Create(ctx, job)
	switch {
	case err == nil:
		p.r.recent.add(job, p.now)
		metrics.AttemptsTotal.WithLabelValues(string(p.task.Spec.Type), "started").Inc()
		if scheduled != nil && attempt == 1 {
			metrics.ScheduleDelay.Observe(p.now.Sub(*scheduled).Seconds())
		}
		p.created++
		log.FromContext(ctx).Info("created Job", "job", job.Name, "run", runID, "attempt", attempt)
		// A run's first Job shows in the Task's status and Job list; an
		// event for it would cost every run a request (a burst or a cron
		// slot of 1000 Tasks: 1000 more requests while Jobs wait to start).
		// A retry is worth one.
		if attempt > 1 {
			p.r.event(p.task, job, eventNormal, v1alpha1.EventAttemptCreated, "CreateJob",
				fmt.Sprintf("run %s: attempt %d started as Job %s", runID, attempt, job.Name))
		}
	case apierrors.IsAlreadyExists(err):
		existing := &batchv1.Job{}
		if err := p.r.APIReader.Get(ctx, ctrl.ObjectKeyFromObject(job), existing); err != nil {
			return err
		}
		if !runs.ControlledBy(existing, p.task.UID) {
			return fmt.Errorf("job %s/%s exists but is not controlled by this Task; delete or rename it", job.Namespace, job.Name)
		}
		job = existing
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The namespace is being deleted: its Tasks go with it, and every
		// retry would be refused the same way.
		return errNamespaceTerminating
	case apierrors.IsInvalid(err):
		p.invalid = &problem{Reason: v1alpha1.ReasonInvalidSpec, Message: head("the API server refused the Job: "+err.Error(), maxMessage)}
		return nil
	default:
		return err
	}
	p.addAttempt(runID, scheduled, runs.AttemptOf(job, attempt))
	return nil
}

// consumedToken is the run-now token hash the status holds after this pass.
func (p *pass) consumedToken() string {
	if p.plan.RunNowToken != "" {
		return p.plan.RunNowToken
	}
	return p.old.LastRunNowToken
}

// addAttempt records a Job this pass made (or found) in the observed runs.
func (p *pass) addAttempt(runID string, scheduled *time.Time, a runs.Attempt) {
	if a.Created.IsZero() {
		// The Job has just been created: the API server's timestamp is in
		// the returned object, but guard against a client that drops it.
		a.Created = p.now
	}
	for i := range p.runs {
		if p.runs[i].ID == runID {
			if p.runs[i].Attempt(a.Number) == nil {
				p.runs[i].Attempts = append(p.runs[i].Attempts, a)
				sort.Slice(p.runs[i].Attempts, func(x, y int) bool { return p.runs[i].Attempts[x].Number < p.runs[i].Attempts[y].Number })
			}
			return
		}
	}
	p.runs = append(p.runs, runs.Run{ID: runID, Scheduled: scheduled, Attempts: []runs.Attempt{a}})
	runs.SortOldestFirst(p.runs)
}

// stopRun stops a run: its active attempt is stopped, or, when it is
// waiting out a backoff, its last Job is marked so it never retries.
func (p *pass) stopRun(ctx context.Context, runID string, reason v1alpha1.Reason, message string) error {
	for i := range p.runs {
		if p.runs[i].ID == runID {
			return p.stopAttempt(ctx, p.runs[i].Latest(), reason, message)
		}
	}
	return nil
}

// stopAttempt stops an attempt the contract's way: annotate its Job with
// the reason and time, and suspend it, which ends its pods and keeps the
// record. A finished Job only gets the annotations.
func (p *pass) stopAttempt(ctx context.Context, a *runs.Attempt, reason v1alpha1.Reason, message string) error {
	stamp := p.now.UTC().Truncate(time.Second)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: p.task.Namespace, Name: a.JobName}}
	patch := map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		v1alpha1.AnnotationStopReason:  string(reason),
		v1alpha1.AnnotationStopTime:    stamp.Format(time.RFC3339),
		v1alpha1.AnnotationStopMessage: head(message, maxMessage),
	}}}
	if a.Phase == runs.Active {
		patch["spec"] = map[string]any{"suspend": true}
	}
	if err := p.r.Client.Patch(ctx, job, ctrl.RawPatch(mergePatchType, mustJSON(patch))); err != nil {
		return ctrl.IgnoreNotFound(err)
	}
	log.FromContext(ctx).Info("stopped attempt", "job", a.JobName, "reason", reason)
	p.r.event(p.task, job, eventWarning, v1alpha1.EventAttemptStopped, "StopJob",
		fmt.Sprintf("attempt %d (Job %s) stopped: %s: %s", a.Number, a.JobName, reason, message))
	a.Phase, a.Reason, a.Message, a.Finished = runs.Stopped, reason, message, stamp
	return nil
}

// pruneHistory deletes the Jobs of finished runs beyond the history
// limits. Only runs the stored status already records as finished are
// pruned: the status must remember a run before its Jobs go, or a lost
// status write could make the run look new again. A run that is over the
// limits but not recorded yet is pruned by a pass right after this one
// (the operator's own status write does not trigger a pass): it returns
// true then.
func (p *pass) pruneHistory(ctx context.Context) (again bool, err error) {
	keepOK := int(ptr.Deref(p.task.Spec.SuccessfulRunsHistoryLimit, 3))
	keepFailed := int(ptr.Deref(p.task.Spec.FailedRunsHistoryLimit, 1))
	kept := p.runs[:0:0]
	// Newest first, so the newest finished runs are the ones kept.
	for i := len(p.runs) - 1; i >= 0; i-- {
		run := p.runs[i]
		step := p.steps[run.ID]
		prune := false
		if step.Finished() {
			if step.Kind == retry.Succeeded {
				prune = keepOK <= 0
				keepOK--
			} else {
				prune = keepFailed <= 0
				keepFailed--
			}
		}
		if prune && !historyFinal(p.old.History, run.ID) {
			prune, again = false, true
		}
		if !prune {
			kept = append(kept, run)
			continue
		}
		for _, a := range run.Attempts {
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: p.task.Namespace, Name: a.JobName}}
			if err := p.r.Client.Delete(ctx, job, ctrl.PropagationPolicy(metav1.DeletePropagationBackground)); ctrl.IgnoreNotFound(err) != nil {
				return false, err
			}
		}
		p.r.event(p.task, nil, eventNormal, v1alpha1.EventJobsDeleted, "DeleteJobs",
			fmt.Sprintf("deleted the %d Job(s) of finished run %s (history limits)", len(run.Attempts), run.ID))
	}
	// Back to oldest first.
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	p.runs = kept
	return again, nil
}

// historyFinal reports whether the history records run id as finished.
func historyFinal(h []v1alpha1.RunRecord, id string) bool {
	for _, r := range h {
		if r.RunID == id {
			return r.Result != v1alpha1.RunResultRunning
		}
	}
	return false
}

// mergePatchType is a JSON merge patch: the stop annotations and suspend
// are set without reading the Job first.
const mergePatchType = types.MergePatchType

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only maps of strings and bools are marshalled here
	}
	return b
}
