package reconciler

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/notify"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
)

// observe is stage 1: everything the decision needs, what each observer
// reads, in order; each fills its part of the plan's input and reads only
// what it needs. Pods are read
// from the API server, and only for the attempts that need them.
func (p *pass) observe(ctx context.Context) (plan.Input, error) {
	in := plan.Input{Task: p.task, Now: p.now}
	for _, o := range observers {
		if err := o.read(p, ctx, &in); err != nil {
			if o.doing == "" {
				return in, err // the observer's error says what it read
			}
			return in, fmt.Errorf("%s: %w", o.doing, err)
		}
	}
	p.runs = in.Runs
	p.notifications = in.Notifications
	return in, nil
}

// observer reads one part of what the decision needs into the plan's
// input; doing names it in its errors.
type observer struct {
	doing string
	read  func(p *pass, ctx context.Context, in *plan.Input) error
}

// observers are the read side of a pass, in order: the Task's Jobs (from
// the cache) as its runs and notifications, the attempts and the
// notification Jobs the status records but the cache does not show
// (missing.go, notify.go), the skip dates (calendar.go), the pods of
// active attempts (below; a remote attempt's on its worker:
// multikueue.go), Retry-After, the queue (queue.go), the namespace's
// policy (policy.go), why Kueue holds attempts (kueue.go) and the Tasks
// it runs after (chain.go).
var observers = []observer{
	{"listing Jobs", (*pass).readJobs},
	{"looking for missing attempts", (*pass).findMissingAttempts},
	{"looking for missing notification Jobs", (*pass).findMissingNotifications},
	{"", (*pass).readSkipDates},
	{"", (*pass).readCalendars},
	{"", (*pass).observeActive},
	{"reading Retry-After", (*pass).observeRetryAfter},
	{"", (*pass).readQueue},
	{"reading the namespace's policy", (*pass).readPolicy},
	{"reading Kueue's Workloads", (*pass).observeHeld},
	{"", (*pass).readUpstreams},
}

// readJobs reads the Task's Jobs, from the cache, as its runs and its
// notifications.
func (p *pass) readJobs(ctx context.Context, in *plan.Input) error {
	jobList, err := p.r.listJobs(ctx, p.task)
	if err != nil {
		return err
	}
	p.r.Shortcuts.SeenJobs(jobList)
	p.jobs = jobList
	in.Runs, in.Notifications = runs.FromJobs(p.task.UID, jobList), notify.FromJobs(p.task.UID, jobList)
	return nil
}

// observeActive reads, for each active attempt, its pods when its start
// check is due, and what they printed when it is being failed for its
// deadline, while they are still there; for a remote attempt, its worker,
// and it has the Task's pods followed on the workers (multikueue.go).
func (p *pass) observeActive(ctx context.Context, in *plan.Input) error {
	followed := false
	for i := range in.Runs {
		a := in.Runs[i].Latest()
		if a.Phase != runs.Active {
			continue
		}
		if a.Remote {
			if !followed {
				p.followWorkers(ctx)
				followed = true
			}
			if err := p.observeWorker(ctx, in, a); err != nil {
				return fmt.Errorf("reading the Workload of Job %s: %w", a.JobName, err)
			}
		}
		if !a.PodsStarted && !a.Held && retry.StartCheckDue(a.StartBase(), retry.FirstStartCheck(&p.task.Spec), p.now) {
			if err := p.observeStart(ctx, in, a); err != nil {
				return err
			}
		}
		if a.Output == "" && !a.Remote && (a.Failing == v1alpha1.AttemptDeadlineExceeded || deadlinePassed(p.task, a, p.now)) {
			if err := p.observeDeadlineOutput(ctx, in, a); err != nil {
				return err
			}
		}
	}
	return nil
}

// observeStart reads how the pods of an attempt whose start check is due
// stand: their starts and warnings, or why there are none; for a remote
// attempt, its worker's mirrored pod counts (multikueue.go).
func (p *pass) observeStart(ctx context.Context, in *plan.Input, a *runs.Attempt) error {
	if a.Remote {
		remote, err := p.remotePods(ctx, p.jobs, a.JobName)
		if err != nil {
			return fmt.Errorf("reading the Workload of Job %s: %w", a.JobName, err)
		}
		in.Remote = setKey(in.Remote, a.JobName, remote)
		return nil
	}
	pods, err := p.attemptPods(ctx, a.JobName)
	if err != nil {
		return fmt.Errorf("listing the pods of Job %s: %w", a.JobName, err)
	}
	starts := podStarts(pods)
	if err := p.podWarnings(ctx, starts, retry.StartTimeout(&p.task.Spec)); err != nil {
		return fmt.Errorf("reading the pod events of Job %s: %w", a.JobName, err)
	}
	in.Pods = setKey(in.Pods, a.JobName, starts)
	if len(pods) > 0 {
		return nil
	}
	refused, err := p.podsRefused(ctx, a.JobName)
	if err != nil {
		return fmt.Errorf("reading why Job %s has no pods: %w", a.JobName, err)
	}
	if refused != nil {
		in.Refused = setKey(in.Refused, a.JobName, refused)
	}
	return nil
}

// observeDeadlineOutput reads what the pods of an attempt at its deadline
// printed, before the plan stops them.
func (p *pass) observeDeadlineOutput(ctx context.Context, in *plan.Input, a *runs.Attempt) error {
	pods, err := p.attemptPods(ctx, a.JobName)
	if err != nil {
		return fmt.Errorf("listing the pods of Job %s: %w", a.JobName, err)
	}
	if out := p.deadlineOutput(ctx, pods); out != "" {
		in.Captured = setKey(in.Captured, a.JobName, out)
	}
	return nil
}

// setKey sets m[k] = v, making m when nil, and returns m.
func setKey[V any](m map[string]V, k string, v V) map[string]V {
	if m == nil {
		m = map[string]V{}
	}
	m[k] = v
	return m
}

// readQueue reads the Task's queue (queue.go).
func (p *pass) readQueue(ctx context.Context, in *plan.Input) (err error) {
	if in.Queue, err = p.observeQueue(ctx); err != nil {
		return fmt.Errorf("reading TaskQueue %q: %w", p.task.Spec.QueueName, err)
	}
	return nil
}

// readPolicy reads the namespace's policy (policy.go).
func (p *pass) readPolicy(ctx context.Context, in *plan.Input) (err error) {
	in.Policy, err = p.observePolicy(ctx)
	return err
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
	return readLatest(in, &in.RetryAfter,
		func(a *runs.Attempt) bool { return a.Phase == runs.Failed && !a.RetryAfterKnown },
		func(job string) (int64, error) {
			pods, err := p.attemptPods(ctx, job)
			if err != nil {
				return 0, err
			}
			return podRetryAfter(pods), nil
		})
}

// observeHeld reads, for a Kueue-managed Task, why Kueue holds each of its
// attempts whose Job is suspended (its Workload's condition), for the
// WaitingForCapacity message.
func (p *pass) observeHeld(ctx context.Context, in *plan.Input) error {
	if !jobs.KueueManaged(p.task) || in.Policy == nil || in.Policy.Refused != nil {
		return nil
	}
	return readLatest(in, &in.HeldBy,
		func(a *runs.Attempt) bool { return a.Phase == runs.Active && a.Held },
		func(job string) (string, error) { return p.heldByKueue(ctx, job) })
}

// readLatest reads one value, by Job name, for the latest attempt of each
// run that wants one: what the decision needs of some attempts only.
func readLatest[V any](in *plan.Input, into *map[string]V, wants func(*runs.Attempt) bool, read func(job string) (V, error)) error {
	for i := range in.Runs {
		a := in.Runs[i].Latest()
		if !wants(a) {
			continue
		}
		v, err := read(a.JobName)
		if err != nil {
			return err
		}
		if *into == nil {
			*into = map[string]V{}
		}
		(*into)[a.JobName] = v
	}
	return nil
}

// listJobs lists the Jobs the Task controls, from the cache.
func (r *TaskReconciler) listJobs(ctx context.Context, task *v1alpha1.Task) ([]batchv1.Job, error) {
	if r.Owners == nil {
		return index.OwnedBy(ctx, r.Client, task.Namespace, string(task.UID))
	}
	return r.Owners.OwnedBy(ctx, task.Namespace, string(task.UID))
}
