package reconciler

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/notify"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
)

// observe is stage 1: everything the decision needs. The Task's Jobs (from
// the cache) as runs; the attempts the status records whose Job the cache
// does not show (missing.go), and likewise the notification Jobs of
// Pending notifications (notify.go); the pods of active attempts whose start
// check is due (of a remote attempt, its mirrored pod counts and its
// worker: multikueue.go); and what the pods of an attempt being failed for its
// deadline printed, while they are still there. Pods are read from the API
// server, and only for those attempts.
func (p *pass) observe(ctx context.Context) (plan.Input, error) {
	jobList, err := p.r.listJobs(ctx, p.task)
	if err != nil {
		return plan.Input{}, fmt.Errorf("listing Jobs: %w", err)
	}
	p.r.Shortcuts.SeenJobs(jobList)
	in := plan.Input{Task: p.task, Now: p.now, Runs: runs.FromJobs(p.task.UID, jobList),
		Notifications: notify.FromJobs(p.task.UID, jobList)}
	if err := p.findMissingAttempts(ctx, &in); err != nil {
		return in, fmt.Errorf("looking for missing attempts: %w", err)
	}
	if err := p.findMissingNotifications(ctx, &in); err != nil {
		return in, fmt.Errorf("looking for missing notification Jobs: %w", err)
	}
	if err := p.readSkipDates(ctx, &in); err != nil {
		return in, err
	}
	if err := p.readCalendars(ctx, &in); err != nil {
		return in, err
	}
	timeout := retry.StartTimeout(&p.task.Spec)
	for i := range in.Runs {
		a := in.Runs[i].Latest()
		if a.Phase != runs.Active {
			continue
		}
		startCheckDue := !a.PodsStarted && !a.Held && retry.StartCheckDue(a.StartBase(), retry.FirstStartCheck(&p.task.Spec), p.now)
		if startCheckDue && a.Remote {
			// Its pods are on a worker cluster (multikueue.go).
			remote, err := p.remotePods(ctx, jobList, a.JobName)
			if err != nil {
				return in, fmt.Errorf("reading the Workload of Job %s: %w", a.JobName, err)
			}
			if in.Remote == nil {
				in.Remote = map[string]retry.RemotePods{}
			}
			in.Remote[a.JobName] = remote
		} else if startCheckDue {
			pods, err := p.attemptPods(ctx, a.JobName)
			if err != nil {
				return in, fmt.Errorf("listing the pods of Job %s: %w", a.JobName, err)
			}
			if in.Pods == nil {
				in.Pods = map[string][]retry.PodStart{}
			}
			starts := podStarts(pods)
			if err := p.podWarnings(ctx, starts, timeout); err != nil {
				return in, fmt.Errorf("reading the pod events of Job %s: %w", a.JobName, err)
			}
			in.Pods[a.JobName] = starts
			if len(pods) == 0 {
				refused, err := p.podsRefused(ctx, a.JobName)
				if err != nil {
					return in, fmt.Errorf("reading why Job %s has no pods: %w", a.JobName, err)
				}
				if refused != nil {
					if in.Refused == nil {
						in.Refused = map[string]*retry.Refusal{}
					}
					in.Refused[a.JobName] = refused
				}
			}
		}
		if a.Output == "" && !a.Remote && (a.Failing == v1alpha1.AttemptDeadlineExceeded || deadlinePassed(p.task, a, p.now)) {
			pods, err := p.attemptPods(ctx, a.JobName)
			if err != nil {
				return in, fmt.Errorf("listing the pods of Job %s: %w", a.JobName, err)
			}
			if out := p.deadlineOutput(ctx, pods); out != "" {
				if in.Captured == nil {
					in.Captured = map[string]string{}
				}
				in.Captured[a.JobName] = out
			}
		}
	}
	if err := p.observeRetryAfter(ctx, &in); err != nil {
		return in, fmt.Errorf("reading Retry-After: %w", err)
	}
	if in.Queue, err = p.observeQueue(ctx); err != nil {
		return in, fmt.Errorf("reading TaskQueue %q: %w", p.task.Spec.QueueName, err)
	}
	if in.Policy, err = p.observePolicy(ctx); err != nil {
		return in, fmt.Errorf("reading the namespace's policy: %w", err)
	}
	if err := p.observeHeld(ctx, &in); err != nil {
		return in, fmt.Errorf("reading Kueue's Workloads: %w", err)
	}
	p.runs = in.Runs
	p.notifications = in.Notifications
	return in, nil
}

// deadlinePassed reports whether an active attempt is at or past its
// activeDeadlineSeconds: the plan stops it this pass, and what its pods
// printed is read first, while they still run.
func deadlinePassed(task *v1alpha1.Task, a *runs.Attempt, now time.Time) bool {
	at, ok := retry.Deadline(&task.Spec, a, jobs.KueueManaged(task))
	return ok && !now.Before(at)
}

// observeRetryAfter reads, once per failed http attempt, the Retry-After
// the runner reported (its structured result line, resultline.Data):
// the decision needs it for the next attempt's time, so it is read here,
// and the plan keeps it on the Job. A failed attempt whose pods are gone
// counts as none.
func (p *pass) observeRetryAfter(ctx context.Context, in *plan.Input) error {
	if p.task.Spec.Type != v1alpha1.TaskTypeHTTP {
		return nil
	}
	for i := range in.Runs {
		a := in.Runs[i].Latest()
		if a.Phase != runs.Failed || a.RetryAfterKnown {
			continue
		}
		pods, err := p.attemptPods(ctx, a.JobName)
		if err != nil {
			return err
		}
		if in.RetryAfter == nil {
			in.RetryAfter = map[string]int64{}
		}
		in.RetryAfter[a.JobName] = podRetryAfter(pods)
	}
	return nil
}

// observeHeld reads, for a Kueue-managed Task, why Kueue holds each of its
// attempts whose Job is suspended (its Workload's condition), for the
// WaitingForCapacity message.
func (p *pass) observeHeld(ctx context.Context, in *plan.Input) error {
	if !jobs.KueueManaged(p.task) || in.Policy == nil || in.Policy.Refused != nil {
		return nil
	}
	for i := range in.Runs {
		a := in.Runs[i].Latest()
		if a.Phase != runs.Active || !a.Held {
			continue
		}
		by, err := p.heldByKueue(ctx, a.JobName)
		if err != nil {
			return err
		}
		if in.HeldBy == nil {
			in.HeldBy = map[string]string{}
		}
		in.HeldBy[a.JobName] = by
	}
	return nil
}

// listJobs lists the Jobs the Task controls, from the cache.
func (r *TaskReconciler) listJobs(ctx context.Context, task *v1alpha1.Task) ([]batchv1.Job, error) {
	var list batchv1.JobList
	err := r.Client.List(ctx, &list, ctrl.InNamespace(task.Namespace), ctrl.MatchingFields{index.OwnedJobs: string(task.UID)})
	return list.Items, err
}
