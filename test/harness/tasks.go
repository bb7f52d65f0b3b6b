package harness

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// The simulated pods' annotations (hack/kwok/README.md).
const (
	SimExitCode = "sim.taskops.io/exit-code"
	SimMessage  = "sim.taskops.io/message"
	SimRun      = "sim.taskops.io/run"
	SimStart    = "sim.taskops.io/start"
	SimDuration = "sim.taskops.io/duration"
)

// RestrictedLabels make a namespace enforce (and warn about) the restricted
// Pod Security Standard.
var RestrictedLabels = map[string]string{
	"pod-security.kubernetes.io/enforce":         "restricted",
	"pod-security.kubernetes.io/enforce-version": "latest",
	"pod-security.kubernetes.io/warn":            "restricted",
	"pod-security.kubernetes.io/warn-version":    "latest",
}

// RandSuffix is 6 random hex digits.
func RandSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// GetTask reads a Task.
func GetTask(ctx context.Context, c client.Client, ns, name string) (*v1alpha1.Task, error) {
	task := &v1alpha1.Task{}
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, task)
	return task, err
}

// WaitTask polls the Task until ok holds (within limit) and returns it; the
// progress line names its phase, attempts and Ready condition.
func WaitTask(t *testing.T, c client.Client, ns, name, what string, limit time.Duration, ok func(*v1alpha1.Task) bool) *v1alpha1.Task {
	t.Helper()
	var got *v1alpha1.Task
	Eventually(t, limit, name+": "+what, nil, func(ctx context.Context) (bool, string) {
		task, err := GetTask(ctx, c, ns, name)
		if err != nil {
			return false, err.Error()
		}
		got = task
		r := Cond(task, v1alpha1.ConditionReady)
		return ok(task), fmt.Sprintf("phase %s attempts %d Ready %s/%s %q", task.Status.Phase, task.Status.Attempts, r.Status, r.Reason, r.Message)
	})
	return got
}

// Cond is a Task's condition, or one with status "<missing>".
func Cond(task *v1alpha1.Task, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(task.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{Type: typ, Status: "<missing>"}
}

// JobsOf lists a Task's Jobs (by the task label), sorted by name.
func JobsOf(ctx context.Context, c client.Client, ns, task string) ([]batchv1.Job, error) {
	var list batchv1.JobList
	err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelTask: task})
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, err
}

// PodsOf lists a Task's pods (by the task label).
func PodsOf(ctx context.Context, c client.Client, ns, task string) ([]corev1.Pod, error) {
	var list corev1.PodList
	err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelTask: task})
	return list.Items, err
}

// JobCondition is a Job's condition of type typ when it is True, else nil.
func JobCondition(job *batchv1.Job, typ batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == typ && job.Status.Conditions[i].Status == corev1.ConditionTrue {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// HasFinalizer reports whether the Task carries the operator's finalizer.
func HasFinalizer(task *v1alpha1.Task) bool {
	for _, f := range task.Finalizers {
		if f == v1alpha1.Finalizer {
			return true
		}
	}
	return false
}

// PodPhases lists pods as name=phase.
func PodPhases(pods []corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name+"="+string(p.Status.Phase))
	}
	return out
}

// Secs rounds a duration for the figures the tests log.
func Secs(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}
