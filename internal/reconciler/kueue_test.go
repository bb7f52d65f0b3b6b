package reconciler_test

import (
	"strings"
	"testing"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

// Without Kueue installed (this API server serves no kueue.x-k8s.io), a
// Task labelled for a Kueue LocalQueue would get a Job created suspended
// that never starts: it is InvalidSpec instead, and no Job is created.
func TestATaskLabelledForKueueWithoutKueueIsInvalidSpec(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "kueue-less", testutil.Label(v1alpha1.LabelKueueQueueName, "team"))
	got := waitTask(t, task, "InvalidSpec", phaseIs(v1alpha1.PhaseFailed))
	c := condition(got, v1alpha1.ConditionReady)
	if c.Reason != string(v1alpha1.ReasonInvalidSpec) || !strings.Contains(c.Message, "does not serve Kueue's API") {
		t.Fatalf("Ready %s: %q", c.Reason, c.Message)
	}
	if len(jobsOf(t, task)) != 0 {
		t.Fatal("a Job was created")
	}
}

// A Task may not be queued twice: spec.queueName and the Kueue label
// together are InvalidSpec, with a message naming both.
func TestATaskWithATaskQueueAndAKueueLabelIsInvalidSpec(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "two-queues", testutil.Queue("team"), testutil.Label(v1alpha1.LabelKueueQueueName, "lq"))
	got := waitTask(t, task, "InvalidSpec", phaseIs(v1alpha1.PhaseFailed))
	if c := condition(got, v1alpha1.ConditionReady); c.Reason != string(v1alpha1.ReasonInvalidSpec) ||
		!strings.Contains(c.Message, `spec.queueName "team"`) || !strings.Contains(c.Message, "kueue.x-k8s.io/queue-name=lq") {
		t.Fatalf("Ready %s: %q", c.Reason, c.Message)
	}
}

// The MultiKueue dispatch label without a Kueue queue would dispatch
// nothing: the Task is InvalidSpec with a message naming the missing label,
// and no Job is created.
func TestTheDispatchLabelWithoutAKueueQueueIsInvalidSpec(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "dispatch-only", testutil.Label(v1alpha1.LabelDispatch, v1alpha1.DispatchMultiKueue))
	got := waitTask(t, task, "InvalidSpec", phaseIs(v1alpha1.PhaseFailed))
	if c := condition(got, v1alpha1.ConditionReady); c.Reason != string(v1alpha1.ReasonInvalidSpec) ||
		!strings.Contains(c.Message, "batch.taskops.io/dispatch=multikueue needs the label kueue.x-k8s.io/queue-name") {
		t.Fatalf("Ready %s: %q", c.Reason, c.Message)
	}
	if len(jobsOf(t, task)) != 0 {
		t.Fatal("a Job was created")
	}
}
