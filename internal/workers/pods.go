package workers

import (
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/internal/jobs"
)

// trimPod keeps of a worker's pod what the status reads of an ended
// attempt (reconciler.podOutput, podResults): its name, namespace, Job and
// completion index, creation time, phase and task container state.
func trimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name: pod.Name, Namespace: pod.Namespace, CreationTimestamp: pod.CreationTimestamp,
		ResourceVersion: pod.ResourceVersion,
		Labels:          map[string]string{batchv1.JobNameLabel: pod.Labels[batchv1.JobNameLabel]},
	}}
	if idx, ok := pod.Annotations[batchv1.JobCompletionIndexAnnotation]; ok {
		out.Annotations = map[string]string{batchv1.JobCompletionIndexAnnotation: idx}
	}
	out.Status.Phase = pod.Status.Phase
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == jobs.ContainerName {
			out.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: cs.Name, State: cs.State}}
		}
	}
	return out, nil
}

// taskEnded reports whether the pod's task container has ended.
func taskEnded(pod *corev1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == jobs.ContainerName && cs.State.Terminated != nil {
			return true
		}
	}
	return false
}

// endedPods keeps the ended pods of at most limit attempts, by namespace
// and Job name, dropping the attempt seen first when full.
type endedPods struct {
	mu    sync.Mutex
	limit int
	byJob map[string]map[string]corev1.Pod // ns/job -> pod name -> pod
	order []string
}

func newEndedPods(limit int) *endedPods {
	return &endedPods{limit: limit, byJob: map[string]map[string]corev1.Pod{}}
}

func (e *endedPods) add(pod *corev1.Pod) {
	key := pod.Namespace + "/" + pod.Labels[batchv1.JobNameLabel]
	e.mu.Lock()
	defer e.mu.Unlock()
	pods, ok := e.byJob[key]
	if !ok {
		if len(e.order) >= e.limit {
			delete(e.byJob, e.order[0])
			e.order = e.order[1:]
		}
		pods = map[string]corev1.Pod{}
		e.byJob[key] = pods
		e.order = append(e.order, key)
	}
	pods[pod.Name] = *pod
}

func (e *endedPods) get(ns, jobName string) []corev1.Pod {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []corev1.Pod
	for _, p := range e.byJob[ns+"/"+jobName] {
		out = append(out, p)
	}
	return out
}
