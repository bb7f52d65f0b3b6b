package reconciler

import (
	"context"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/taskops/task-operator/internal/jobs"
)

// PodLogs reads the tail of a container's log. The reconciler uses it only
// for an attempt that ended while its container still ran (its deadline, a
// Job stopped): the Job controller deletes such pods, so no termination
// message is ever written, and the log is all that says how far it got.
type PodLogs interface {
	Tail(ctx context.Context, namespace, pod, container string, limitBytes int64) (string, error)
}

// ClientsetPodLogs reads logs through the API server (pods/log get).
type ClientsetPodLogs struct{ Clientset kubernetes.Interface }

// Tail implements PodLogs.
func (c ClientsetPodLogs) Tail(ctx context.Context, namespace, pod, container string, limitBytes int64) (string, error) {
	tail := int64(20)
	rc, err := c.Clientset.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{
		Container: container, TailLines: &tail, LimitBytes: &limitBytes,
	}).Stream(ctx)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, limitBytes))
	return string(b), err
}

// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get

// logTailOfUnfinished is what a failed attempt's pods printed when none of
// their containers terminated (they are being deleted): the log tail of the
// first one still there, or "" when there is none or no PodLogs.
func (p *pass) logTailOfUnfinished(ctx context.Context, pods []corev1.Pod) string {
	if p.r.Logs == nil {
		return ""
	}
	for i := range pods {
		for _, cs := range pods[i].Status.ContainerStatuses {
			if cs.Name != jobs.ContainerName || cs.State.Terminated != nil || (cs.State.Running == nil && cs.LastTerminationState.Terminated == nil) {
				continue
			}
			tail, err := p.r.Logs.Tail(ctx, pods[i].Namespace, pods[i].Name, jobs.ContainerName, maxMessage)
			if err != nil || strings.TrimSpace(tail) == "" {
				// Best effort: the pod may be gone already.
				continue
			}
			return "pod " + pods[i].Name + " was stopped while running; its last output: " + strings.TrimSpace(tail)
		}
	}
	return ""
}
