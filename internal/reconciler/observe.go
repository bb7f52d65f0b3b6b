package reconciler

import (
	"context"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/status"
)

// observe is stage 1: everything the decision needs. The Task's Jobs (from
// the cache) as runs; the attempts the status records whose Job the cache
// does not show (missing.go); the pods of active attempts whose start
// check is due; and what the pods of an attempt being failed for its
// deadline printed, while they are still there. Pods are read from the API
// server, and only for those attempts.
func (p *pass) observe(ctx context.Context) (plan.Input, error) {
	jobList, err := p.r.listJobs(ctx, p.task)
	if err != nil {
		return plan.Input{}, err
	}
	p.r.recent.seen(jobList)
	in := plan.Input{Task: p.task, Now: p.now, Runs: runs.FromJobs(p.task.UID, jobList)}
	if err := p.findMissingAttempts(ctx, &in); err != nil {
		return in, err
	}
	timeout := retry.StartTimeout(&p.task.Spec)
	for i := range in.Runs {
		a := in.Runs[i].Latest()
		if a.Phase != runs.Active {
			continue
		}
		var pods []corev1.Pod
		listed := false
		if !a.PodsStarted && retry.StartCheckDue(a.Created, timeout, p.now) {
			if pods, err = p.r.listPods(ctx, p.task, a.JobName); err != nil {
				return in, err
			}
			listed = true
			if in.Pods == nil {
				in.Pods = map[string][]retry.PodStart{}
			}
			in.Pods[a.JobName] = podStarts(pods)
		}
		if a.Failing == v1alpha1.AttemptDeadlineExceeded && a.Output == "" {
			if !listed {
				if pods, err = p.r.listPods(ctx, p.task, a.JobName); err != nil {
					return in, err
				}
			}
			if out := p.deadlineOutput(ctx, pods); out != "" {
				if in.Captured == nil {
					in.Captured = map[string]string{}
				}
				in.Captured[a.JobName] = out
			}
		}
	}
	p.runs = in.Runs
	return in, nil
}

// deadlineOutput is what the pods of an attempt the Job controller is
// failing for its deadline printed. The Job controller deletes such pods
// first and marks the Job Failed only once they are gone (Kubernetes
// 1.31+), so by the time the attempt counts as failed there is no pod left
// to read; while the Job has its FailureTarget condition they are still
// terminating. The plan keeps what they said on the Job
// (v1alpha1.AnnotationOutput), where later passes find it, also after a
// restart: one read and one Job patch per such attempt, once. "" when they
// printed nothing or are gone already: the Job's message will do.
func (p *pass) deadlineOutput(ctx context.Context, pods []corev1.Pod) string {
	out := podOutput(pods)
	if out == "" {
		out = p.logTail(ctx, pods)
	}
	return status.Tail(out, status.MaxMessage)
}

// listJobs lists the Jobs the Task controls, from the cache.
func (r *TaskReconciler) listJobs(ctx context.Context, task *v1alpha1.Task) ([]batchv1.Job, error) {
	var list batchv1.JobList
	err := r.Client.List(ctx, &list, ctrl.InNamespace(task.Namespace), ctrl.MatchingFields{ownedJobsIndex: string(task.UID)})
	return list.Items, err
}

// listPods reads the pods of one attempt straight from the API server: the
// operator caches no pods, and reads them only for the start timeout and
// for the output of a finished attempt.
func (r *TaskReconciler) listPods(ctx context.Context, task *v1alpha1.Task, jobName string) ([]corev1.Pod, error) {
	var list corev1.PodList
	err := r.APIReader.List(ctx, &list, ctrl.InNamespace(task.Namespace),
		ctrl.MatchingLabels{batchv1.JobNameLabel: jobName, v1alpha1.LabelTask: task.Name})
	return list.Items, err
}

// podStarts reduces pods to what the start timeout needs.
func podStarts(pods []corev1.Pod) []retry.PodStart {
	out := make([]retry.PodStart, 0, len(pods))
	for _, pod := range pods {
		ps := retry.PodStart{Name: pod.Name, Created: pod.CreationTimestamp.Time}
		switch pod.Status.Phase {
		case corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed:
			ps.Started = true
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				ps.WaitingReason, ps.WaitingMessage = corev1.PodReasonUnschedulable, c.Message
			}
		}
		for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
			if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
				ps.WaitingReason, ps.WaitingMessage = w.Reason, w.Message
				break
			}
		}
		out = append(out, ps)
	}
	return out
}
