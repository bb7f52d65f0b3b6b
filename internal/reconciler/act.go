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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/guards"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/status"
)

// act is stage 3: it carries out the plan, action by action in the order
// of actions, and keeps p.runs as the Jobs now are. It stops at the first
// error; a Job the API server refuses (p.refused, p.jobRefused) starts
// nothing more and prunes nothing.
func (p *pass) act(ctx context.Context) error {
	for _, do := range actions {
		if err := do(p, ctx); err != nil {
			return err
		}
		if p.refused != nil || p.jobRefused != nil {
			return nil
		}
	}
	return nil
}

// actions carry out the plan's parts, in order: the labels the operator
// finds its Jobs by put back, attempts stopped, outputs, Retry-After and
// remote attempts' workers kept on Jobs, attempts started (start.go), old
// runs' Jobs pruned.
var actions = []func(p *pass, ctx context.Context) error{
	(*pass).restoreAllLabels,
	(*pass).stopAttempts,
	(*pass).keepOutputs,
	(*pass).keepRetryAfters,
	(*pass).recordWorkers,
	(*pass).startAttempts,
	(*pass).pruneRuns,
}

func (p *pass) restoreAllLabels(ctx context.Context) error {
	return eachJob(p.plan.Relabel, "restoring the labels of", func(name string, l map[string]string) error {
		return p.restoreLabels(ctx, name, l)
	})
}

func (p *pass) stopAttempts(ctx context.Context) error {
	for _, s := range p.plan.Stop {
		if err := p.stopAttempt(ctx, s); err != nil {
			return fmt.Errorf("stopping attempt %d of run %s: %w", s.Attempt, s.RunID, err)
		}
	}
	return nil
}

func (p *pass) keepOutputs(ctx context.Context) error {
	return eachJob(p.plan.Capture, "keeping the output on", func(name string, output string) error {
		return p.keepOutput(ctx, name, output)
	})
}

func (p *pass) keepRetryAfters(ctx context.Context) error {
	return eachJob(p.plan.RecordRetryAfter, "keeping Retry-After on", func(name string, seconds int64) error {
		return p.keepRetryAfter(ctx, name, seconds)
	})
}

// eachJob does one action on every Job a plan's map names, in name order
// (so a pass that fails part way fails at the same Job next time), and
// says what it was doing to which Job when one fails.
func eachJob[V any](byJob map[string]V, doing string, do func(name string, v V) error) error {
	for _, name := range slices.Sorted(maps.Keys(byJob)) {
		if err := do(name, byJob[name]); err != nil {
			return fmt.Errorf("%s Job %s: %w", doing, name, err)
		}
	}
	return nil
}

func (p *pass) pruneRuns(ctx context.Context) error {
	for _, pr := range p.plan.Prune {
		if err := p.pruneRun(ctx, pr); err != nil {
			return fmt.Errorf("pruning run %s: %w", pr.RunID, err)
		}
	}
	return nil
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
