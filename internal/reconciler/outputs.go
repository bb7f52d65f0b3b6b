package reconciler

import (
	"context"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/status"
)

// readOutputs is stage 4: what the pods of finished attempts said, for the
// status messages, read only for the attempts whose outcome the status
// does not have yet (status.OutputsToRead) and never again once written.
// An attempt whose Job kept its output (deadline, see deadlineOutput) is
// not read again either: its pods are gone.
func (p *pass) readOutputs(ctx context.Context) error {
	p.outputs = map[string]string{}
	for _, name := range status.OutputsToRead(p.task, p.runs, p.now) {
		if out := capturedOutput(p.runs, name); out != "" {
			p.outputs[name] = out
			continue
		}
		pods, err := p.r.listPods(ctx, p.task, name)
		if err != nil {
			return err
		}
		if out := podOutput(pods); out != "" {
			p.outputs[name] = out
		}
	}
	return nil
}

// capturedOutput is the output kept on the Job of an attempt, or "".
func capturedOutput(rs []runs.Run, jobName string) string {
	for i := range rs {
		for _, a := range rs[i].Attempts {
			if a.JobName == jobName {
				return a.Output
			}
		}
	}
	return ""
}

// podOutput summarises the finished pods of an attempt: for a failed pod
// its exit code and termination message (which, with
// FallbackToLogsOnError, is the tail of its log when it wrote none); for a
// succeeded one its termination message.
func podOutput(pods []corev1.Pod) string {
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
		return ""
	}
	msg := strings.TrimSpace(best.Message)
	if best.ExitCode == 0 {
		return msg
	}
	head := "pod " + bestPod + " exited with code " + strconv.Itoa(int(best.ExitCode))
	if best.Reason != "" && best.Reason != "Error" {
		head += " (" + best.Reason + ")"
	}
	if msg == "" {
		return head
	}
	return head + ": " + msg
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
