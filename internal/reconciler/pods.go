package reconciler

import (
	"context"
	"strconv"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/resultline"
	"github.com/taskops/task-operator/internal/results"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/status"
)

// Reading pods. The operator caches no pods (a cluster has many more than
// Tasks): it lists the pods of one attempt from the API server, and only
// when a decision or the status needs them: the start timeout (stage 1),
// the output of an attempt being failed for its deadline (stage 1), and
// the output of a newly finished attempt (stage 4).

// attemptPods are the pods of the attempt whose Job is jobName, read once
// per pass: stage 1 (a failed http attempt's Retry-After) and stage 4 (its
// output for lastError) ask for the same pods.
func (p *pass) attemptPods(ctx context.Context, jobName string) ([]corev1.Pod, error) {
	if pods, ok := p.pods[jobName]; ok {
		return pods, nil
	}
	pods, err := p.r.listPods(ctx, p.task, jobName)
	if err != nil {
		return nil, err
	}
	if p.pods == nil {
		p.pods = map[string][]corev1.Pod{}
	}
	p.pods[jobName] = pods
	return pods, nil
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
		ps := retry.PodStart{Name: pod.Name, Created: pod.CreationTimestamp.Time, Phase: pod.Status.Phase}
		switch pod.Status.Phase {
		case corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed:
			ps.Started = true
		}
		for _, c := range pod.Status.Conditions {
			switch {
			case c.Type != corev1.PodScheduled:
			case c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable:
				ps.WaitingReason, ps.WaitingMessage = corev1.PodReasonUnschedulable, c.Message
			case c.Status == corev1.ConditionTrue:
				ps.Scheduled = c.LastTransitionTime.Time
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
	out := podOutput(pods).Text
	if out == "" {
		out = p.logTail(ctx, pods)
	}
	return status.Tail(out, status.MaxMessage)
}

// podOutput summarises the finished pods of an attempt, and gives the task
// container's exit code: for a failed pod its exit code and termination
// message (which, with
// FallbackToLogsOnError, is the tail of its log when it wrote none); for a
// succeeded one its termination message.
func podOutput(pods []corev1.Pod) status.Output {
	var best *corev1.ContainerStateTerminated
	var bestPod string
	for i := range pods {
		for _, cs := range pods[i].Status.ContainerStatuses {
			t := cs.State.Terminated
			if cs.Name != jobs.ContainerName || t == nil {
				continue
			}
			// A failed pod says more than a succeeded one.
			if best == nil || (best.ExitCode == 0 && t.ExitCode != 0) {
				best, bestPod = t, pods[i].Name
			}
		}
	}
	if best == nil {
		return status.Output{}
	}
	out := status.Output{ExitCode: &best.ExitCode}
	out.Results, out.TooLarge = podResults(pods)
	// The results and the http runner's structured line are for the
	// operator (see podRetryAfter), not for people.
	text, _ := splitMessage(best.Message)
	msg := strings.TrimSpace(text)
	if best.ExitCode == 0 {
		out.Text = msg
		return out
	}
	head := "pod " + bestPod + " exited with code " + strconv.Itoa(int(best.ExitCode))
	if best.Reason != "" && best.Reason != "Error" {
		head += " (" + best.Reason + ")"
	}
	out.Text = head
	if msg != "" {
		out.Text += ": " + msg
	}
	return out
}

// podRetryAfter is the largest Retry-After (seconds) the runner reported
// in a terminated task container's structured result; 0 when none did.
func podRetryAfter(pods []corev1.Pod) int64 {
	var secs int64
	for i := range pods {
		for _, cs := range pods[i].Status.ContainerStatuses {
			if t := cs.State.Terminated; cs.Name == jobs.ContainerName && t != nil {
				if _, data := splitMessage(t.Message); data != nil {
					secs = max(secs, data.RetryAfterSeconds)
				}
			}
		}
	}
	return secs
}

// splitMessage parses a task container's termination message: from its
// end, the results block (internal/results), then the runner's structured
// line (internal/resultline); text is what is left, for people. data is
// nil when there is no structured line.
func splitMessage(msg string) (text string, data *resultline.Data) {
	text, _, _, _ = results.Parse(msg)
	text, d, ok := resultline.Parse(text)
	if !ok {
		return text, nil
	}
	return text, &d
}

// podResults are the results of the attempt: those of its index 0 pod
// (with replicas > 1 each pod writes its own; index 0's count), the newest
// such pod whose task container ended.
func podResults(pods []corev1.Pod) (map[string]string, []string) {
	var best *corev1.Pod
	var msg string
	for i := range pods {
		pod := &pods[i]
		if idx, ok := pod.Annotations[batchv1.JobCompletionIndexAnnotation]; ok && idx != "0" {
			continue
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if t := cs.State.Terminated; cs.Name == jobs.ContainerName && t != nil &&
				(best == nil || pod.CreationTimestamp.After(best.CreationTimestamp.Time)) {
				best, msg = pod, t.Message
			}
		}
	}
	_, values, tooLarge, _ := results.Parse(msg)
	return values, tooLarge
}

// logTail is the log tail of the first pod whose task container still runs
// (or ran), or "" when there is none, no PodLogs, or the read fails (the
// pod may be gone already: best effort).
func (p *pass) logTail(ctx context.Context, pods []corev1.Pod) string {
	if p.r.Logs == nil {
		return ""
	}
	for i := range pods {
		for _, cs := range pods[i].Status.ContainerStatuses {
			if cs.Name != jobs.ContainerName || (cs.State.Running == nil && cs.State.Terminated == nil) {
				continue
			}
			text, err := p.r.Logs.Tail(ctx, pods[i].Namespace, pods[i].Name, jobs.ContainerName, status.MaxMessage)
			if text = strings.TrimSpace(text); err != nil || text == "" {
				continue
			}
			return "pod " + pods[i].Name + " was stopped while running; its last output: " + text
		}
	}
	return ""
}
