package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

func TestQueueListsThePlacesHeldThenTheLineInAdmissionOrder(t *testing.T) {
	ns := newNamespace(t)
	tq := testutil.NewTaskQueue(ns, "team", 1)
	if err := k8s.Create(context.Background(), tq); err != nil {
		t.Fatal(err)
	}
	tq.Status.Admitted, tq.Status.Running = []string{"running-job"}, 1
	if err := k8s.Status().Update(context.Background(), tq); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-time.Minute)
	for _, c := range []struct {
		name     string
		priority int32
		since    time.Time
	}{{"early", 0, since}, {"late", 0, since.Add(time.Second)}, {"urgent", 5, since.Add(2 * time.Second)}} {
		task := shellTask(ns, c.name, 0)
		task.Spec.QueueName, task.Spec.Priority = "team", c.priority
		createTask(t, task)
		setStatus(t, types.NamespacedName{Namespace: ns, Name: c.name}, func(task *v1alpha1.Task) {
			task.Status.Queued = []v1alpha1.QueuedAttempt{{RunID: "0", Attempt: 1, JobName: c.name + "-job", Since: metav1.NewMicroTime(c.since)}}
		})
	}
	runner := shellTask(ns, "runner", 0)
	runner.Spec.QueueName = "team"
	createTask(t, runner)
	setStatus(t, types.NamespacedName{Namespace: ns, Name: "runner"}, func(task *v1alpha1.Task) {
		task.Status.Active = []corev1.ObjectReference{{Name: "running-job"}}
	})

	code, stdout, stderr := runCLI(t, "-n", ns, "queue", "team")
	if code != ExitOK {
		t.Fatalf("exit code %d: %s", code, stderr)
	}
	assertContains(t, "stdout", stdout, "TaskQueue team: max 1, running 1, queued 3 (admitting)")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	var order []string
	for _, l := range lines[2:] {
		order = append(order, strings.Fields(l)[0]+":"+strings.Fields(l)[1])
	}
	if got := strings.Join(order, " "); got != "running:runner 1:urgent 2:early 3:late" {
		t.Fatalf("order %q:\n%s", got, stdout)
	}

	if code, _, stderr := runCLI(t, "-n", ns, "queue", "nope"); code != ExitError || !strings.Contains(stderr, `taskqueue "nope" not found`) {
		t.Fatalf("missing queue: exit code %d, stderr %q", code, stderr)
	}
}

func TestQueueListsTheQueues(t *testing.T) {
	a, b := newNamespace(t), newNamespace(t)
	for _, q := range []*v1alpha1.TaskQueue{testutil.NewTaskQueue(a, "team", 2), testutil.NewTaskQueue(a, "batch", 5), testutil.NewTaskQueue(b, "other", 1)} {
		if err := k8s.Create(suiteCtx, q); err != nil {
			t.Fatal(err)
		}
	}
	code, stdout, stderr := runCLI(t, "-n", a, "queue")
	if code != ExitOK {
		t.Fatalf("queue: exit %d\nstderr: %s", code, stderr)
	}
	assertContains(t, "stdout", stdout, "NAME", "team", "batch")
	if strings.Contains(stdout, "other") || strings.Contains(stdout, "NAMESPACE") {
		t.Errorf("queue without -A lists another namespace's queue:\n%s", stdout)
	}
	code, stdout, stderr = runCLI(t, "queue", "-A")
	if code != ExitOK {
		t.Fatalf("queue -A: exit %d\nstderr: %s", code, stderr)
	}
	assertContains(t, "stdout", stdout, "NAMESPACE", a, b, "team", "other")
	code, _, stderr = runCLI(t, "queue", "team", "-A")
	if code != ExitError {
		t.Errorf("queue NAME -A: exit %d, want %d", code, ExitError)
	}
	assertContains(t, "stderr", stderr, "give no NAME with it")
}

// TestQueueWatch: --watch prints the listing, then again when the places
// held change, until interrupted (exit 0).
func TestQueueWatch(t *testing.T) {
	ns := newNamespace(t)
	tq := testutil.NewTaskQueue(ns, "team", 2)
	if err := k8s.Create(suiteCtx, tq); err != nil {
		t.Fatal(err)
	}
	old := queueWatchInterval
	queueWatchInterval = 50 * time.Millisecond
	t.Cleanup(func() { queueWatchInterval = old })

	inv := start(t, "-n", ns, "queue", "team", "--watch")
	inv.waitOutput(t, inv.stdout, "TaskQueue team: max 2, running 0")
	tq.Status.Running = 1
	tq.Status.Admitted = []string{"build-abcde-0-1"}
	if err := k8s.Status().Update(suiteCtx, tq); err != nil {
		t.Fatal(err)
	}
	inv.waitOutput(t, inv.stdout, "TaskQueue team: max 2, running 1")
	inv.interrupt()
	if code := inv.wait(t); code != ExitOK {
		t.Errorf("exit code %d after the interrupt, want 0", code)
	}
	if n := strings.Count(inv.stdout.String(), "TaskQueue team:"); n != 2 {
		t.Errorf("want the listing twice (before and after the change), got %d:\n%s", n, inv.stdout)
	}
}
