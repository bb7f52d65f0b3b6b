package reconciler

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
)

// maxMessage bounds lastError and history messages (the contract: 1 KiB).
const maxMessage = 1024

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

// enforceStartTimeouts stops every active attempt whose pods could not
// start within spec.startTimeoutSeconds, and adds to wake when the others
// need their next look.
func (p *pass) enforceStartTimeouts(ctx context.Context, timeout time.Duration, wake *earliest) error {
	for i := range p.runs {
		a := p.runs[i].Latest()
		if a.Phase != runs.Active || a.PodsStarted {
			continue
		}
		if !retry.StartCheckDue(a.Created, timeout, p.now) {
			wake.add(a.Created.Add(timeout))
			continue
		}
		pods, err := p.r.listPods(ctx, p.task, a.JobName)
		if err != nil {
			return err
		}
		check := retry.CheckStart(a.Created, podStarts(pods), timeout, p.now)
		if !check.Stuck {
			wake.add(check.RecheckAt)
			continue
		}
		if err := p.stopAttempt(ctx, a, v1alpha1.AttemptStartTimeout, check.Message); err != nil {
			return err
		}
	}
	return nil
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

// readOutputs reads what the pods said for attempts whose outcome the
// status does not have yet: the newest failed attempt (for lastError) and
// the last attempt of each newly finished run (for its history message).
// Once written to the status, they are never read again.
func (p *pass) readOutputs(ctx context.Context) error {
	want := map[string]bool{}
	if a := newestFailure(p.runs); a != nil && !strings.Contains(p.old.LastError, jobMarker(a.JobName)) {
		want[a.JobName] = true
	}
	for i := range p.runs {
		run := &p.runs[i]
		a := run.Latest()
		if !p.steps[run.ID].Finished() || a.Phase == runs.Stopped || historyFinal(p.old.History, run.ID) {
			continue
		}
		want[a.JobName] = true
	}
	captured := map[string]string{}
	for i := range p.runs {
		for _, a := range p.runs[i].Attempts {
			if a.Output != "" {
				captured[a.JobName] = a.Output
			}
		}
	}
	for name := range want {
		if out, ok := captured[name]; ok { // its pods were deleted: see captureOutputs
			p.setOutput(name, out)
			continue
		}
		pods, err := p.r.listPods(ctx, p.task, name)
		if err != nil {
			return err
		}
		p.setOutput(name, podOutput(pods))
	}
	return nil
}

// setOutput records what the pods of a Job said. For a failed attempt it
// replaces the Job's own message ("Job has reached the specified backoff
// limit" says nothing the reason does not).
func (p *pass) setOutput(jobName, output string) {
	if output == "" {
		return
	}
	p.outputs[jobName] = output
	for i := range p.runs {
		for j := range p.runs[i].Attempts {
			a := &p.runs[i].Attempts[j]
			if a.JobName == jobName && a.Phase == runs.Failed {
				a.Message = output
			}
		}
	}
}

// newestFailure is the attempt that failed last, over all runs.
func newestFailure(rs []runs.Run) *runs.Attempt {
	var newest *runs.Attempt
	for i := range rs {
		for j := range rs[i].Attempts {
			a := &rs[i].Attempts[j]
			if a.Phase != runs.Failed && !(a.Phase == runs.Stopped && a.Reason != v1alpha1.AttemptReplaced) {
				continue
			}
			// Runs come oldest first and attempts in order, so on a tie
			// (times have 1 s resolution) the later attempt wins.
			if newest == nil || !a.Finished.Before(newest.Finished) {
				newest = a
			}
		}
	}
	return newest
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

// jobMarker is how lastError names the Job it came from, so a pass can
// tell whether the status already has a given failure.
func jobMarker(jobName string) string { return "job " + jobName + ")" }

// lastErrorText is the status.lastError of a failed attempt: its reason,
// which attempt and Job, and the tail of what the pod said (or the Job's
// message when no pod said anything).
func lastErrorText(a *runs.Attempt) string {
	head := fmt.Sprintf("%s (attempt %d, %s: ", a.Reason, a.Number, jobMarker(a.JobName))
	return head + tail(a.Message, maxMessage-len(head))
}

// tail keeps the last n bytes of s, on a rune boundary, marking a cut:
// the end of a log says most about why it failed.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const cut = "..."
	if n <= len(cut) {
		return cut[:max(n, 0)]
	}
	s = s[len(s)-(n-len(cut)):]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return cut + s
}

// head keeps the first n bytes of s, on a rune boundary, marking a cut.
func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const cut = "..."
	s = s[:max(n-len(cut), 0)]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + cut
}
