package reconciler

import (
	"context"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// PodLogs reads the tail of a container's log. The reconciler uses it only
// for an attempt the Job controller is failing for its deadline while its
// container still runs (deadlineOutput in pods.go): the Job controller
// deletes such pods, so no termination message is left to read, and the
// log is all that says how far the attempt got.
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
