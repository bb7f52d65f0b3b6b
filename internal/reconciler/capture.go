package reconciler

import (
	"context"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/runs"
)

// captureOutputs keeps the output of attempts the Job controller is
// failing for their deadline. It deletes their pods first and marks the Job
// Failed only once they are gone (Kubernetes 1.31+), so by the time the
// attempt counts as failed there is no pod left to read. While the Job has
// its FailureTarget condition the pods are still terminating: the pass
// reads what they printed then and records it on the Job
// (v1alpha1.AnnotationOutput), where readOutputs finds it later, also after
// a restart. One read and one Job patch per such attempt, once.
func (p *pass) captureOutputs(ctx context.Context) error {
	for i := range p.runs {
		a := p.runs[i].Latest()
		if a.Phase != runs.Active || a.Failing != v1alpha1.AttemptDeadlineExceeded || a.Output != "" {
			continue
		}
		pods, err := p.r.listPods(ctx, p.task, a.JobName)
		if err != nil {
			return err
		}
		out := podOutput(pods)
		if out == "" {
			out = p.logTail(ctx, pods)
		}
		if out == "" {
			continue // nothing printed, or nothing left: the Job's message will do
		}
		out = tail(out, maxMessage)
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: p.task.Namespace, Name: a.JobName}}
		patch := map[string]any{"metadata": map[string]any{"annotations": map[string]string{v1alpha1.AnnotationOutput: out}}}
		if err := p.r.Client.Patch(ctx, job, ctrl.RawPatch(mergePatchType, mustJSON(patch))); err != nil {
			return ctrl.IgnoreNotFound(err)
		}
		a.Output = out
	}
	return nil
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
			text, err := p.r.Logs.Tail(ctx, pods[i].Namespace, pods[i].Name, jobs.ContainerName, maxMessage)
			if text = strings.TrimSpace(text); err != nil || text == "" {
				continue
			}
			return "pod " + pods[i].Name + " was stopped while running; its last output: " + text
		}
	}
	return ""
}
