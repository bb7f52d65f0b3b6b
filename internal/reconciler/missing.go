package reconciler

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/runs"
)

// findMissingAttempts (part of stage 1, observe) looks for the Job of every attempt the stored status
// records for a running run but the cache does not show. Usually the cache
// is just behind; otherwise a user deleted the Job, or removed the labels
// the operator's cache selects its Jobs by. The reactions, documented in
// the README:
//
//   - The Job exists and this Task controls it: it is the attempt. Labels
//     it lost are put back (one patch, by the plan), so the cache sees it
//     again.
//   - The Job is gone (or another object controls a Job of that name): the
//     attempt counts as failed with reason JobDeleted, and the retry policy
//     decides; the next attempt starts at once, without backoff.
//
// Without this a run whose only Job vanished would have no Job to judge and
// no step to take: the Task would wait for ever.
func (p *pass) findMissingAttempts(ctx context.Context, in *plan.Input) error {
	for _, rec := range p.old.History {
		if rec.Result != v1alpha1.RunResultRunning || rec.Attempts < 1 {
			continue
		}
		if run := runs.Find(in.Runs, rec.RunID); run != nil && run.Latest().Number >= rec.Attempts {
			continue
		}
		var scheduled *time.Time
		if rec.ScheduledTime != nil {
			scheduled = &rec.ScheduledTime.Time
		}
		names := jobs.Names(p.task, rec.RunID, rec.Attempts)
		key := ctrl.ObjectKey{Namespace: p.task.Namespace, Name: names[0]}
		if created := p.r.Shortcuts.Created(key, p.now); created != nil {
			in.Runs = runs.AddAttempt(in.Runs, rec.RunID, scheduled, runs.AttemptOf(created, rec.Attempts))
			continue
		}
		job, err := p.readOwnJob(ctx, names, func(j *batchv1.Job) bool { return runs.ControlledBy(j, p.task.UID) })
		switch {
		case err == nil && job != nil:
			if missing := p.lostLabels(job, rec.RunID, rec.Attempts); len(missing) > 0 {
				if in.Relabel == nil {
					in.Relabel = map[string]map[string]string{}
				}
				in.Relabel[job.Name] = missing
			}
			in.Runs = runs.AddAttempt(in.Runs, rec.RunID, scheduled, runs.AttemptOf(job, rec.Attempts))
		case err == nil:
			in.Runs = runs.AddAttempt(in.Runs, rec.RunID, scheduled, deletedAttempt(rec, names[0], p.now))
			in.DeletedJobs++
		default:
			return err
		}
	}
	return nil
}

// deletedAttempt stands in for an attempt whose Job is gone. It failed
// "now": when the Job went is not known, and nothing waits on the time
// (a JobDeleted attempt has no backoff).
func deletedAttempt(rec v1alpha1.RunRecord, jobName string, now time.Time) runs.Attempt {
	a := runs.Attempt{
		Number:     rec.Attempts,
		JobName:    jobName,
		Phase:      runs.Failed,
		Reason:     v1alpha1.AttemptJobDeleted,
		Message:    fmt.Sprintf("Job %s was deleted before the run finished", jobName),
		Created:    now,
		Finished:   now,
		Generation: rec.Generation,
	}
	if rec.StartTime != nil && rec.Attempts == 1 {
		a.Created = rec.StartTime.Time
	}
	return a
}

// lostLabels are the labels the operator finds its Jobs by that a user
// removed or changed on job (none when the cache was only behind).
func (p *pass) lostLabels(job *batchv1.Job, runID string, attempt int32) map[string]string {
	missing := map[string]string{}
	for k, v := range jobs.Build(p.task, runID, attempt, nil, nil, p.r.Jobs).Labels {
		// The queue label says which queue admitted the Job, not which it
		// would now: spec.queueName may have changed since.
		if k != v1alpha1.LabelQueue && job.Labels[k] != v {
			missing[k] = v
		}
	}
	return missing
}

// readOwnJob reads the first of names (the names one Job of the Task may
// have: jobs.Names) that exists and is the Task's by ours, from the API
// server; nil when none is.
func (p *pass) readOwnJob(ctx context.Context, names []string, ours func(*batchv1.Job) bool) (*batchv1.Job, error) {
	for _, name := range names {
		job := &batchv1.Job{}
		err := p.r.APIReader.Get(ctx, ctrl.ObjectKey{Namespace: p.task.Namespace, Name: name}, job)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, err
		case ours(job):
			return job, nil
		}
	}
	return nil, nil
}
