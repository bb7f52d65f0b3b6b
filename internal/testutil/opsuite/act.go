package opsuite

import (
	"reflect"
	"strconv"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/reconciler"
	"github.com/taskops/task-operator/internal/testutil"
)

// Acting: building objects and doing to them what users and the
// cluster do.

// NewNamespace makes a namespace of its own for a test.
func NewNamespace(t *testing.T) string {
	t.Helper()
	return testutil.NewNamespace(t, K8s, "t")
}

// NewTask builds a shell Task (testutil.NewTask). Tests that do not test
// the start timeout get a long one, so a clock moved forward by another
// step does not trip it.
func NewTask(ns, name string, opts ...testutil.TaskOpt) *v1alpha1.Task {
	return testutil.NewTask(ns, name, append([]testutil.TaskOpt{testutil.StartTimeout(86400)}, opts...)...)
}

// Edit changes an object the operator also writes (a Task, a TaskQueue:
// their status) as a user would: read, change, update, again on a
// conflict. It returns the object as stored.
func Edit[T client.Object](t *testing.T, obj T, change func(T)) T {
	t.Helper()
	var got T
	Must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got = reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T) // a fresh object each try
		if err := K8s.Get(Ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			return err
		}
		change(got)
		return K8s.Update(Ctx, got)
	}))
	return got
}

// Poke changes an annotation, which makes the operator look at the Task
// again (used after moving the fake clock).
func Poke(t *testing.T, task *v1alpha1.Task) {
	t.Helper()
	SetAnnotation(t, task, "test.taskops.io/Poke", strconv.FormatInt(time.Now().UnixNano(), 10))
}

// SetRunNow sets the run-now annotation to token.
func SetRunNow(t *testing.T, task *v1alpha1.Task, token string) {
	t.Helper()
	SetAnnotation(t, task, v1alpha1.AnnotationRunNow, token)
}

// SetAnnotation sets one annotation of the stored Task (a merge patch).
func SetAnnotation(t *testing.T, task *v1alpha1.Task, name, value string) {
	t.Helper()
	fresh := GetTask(t, task)
	patch := client.MergeFrom(fresh.DeepCopy())
	if fresh.Annotations == nil {
		fresh.Annotations = map[string]string{}
	}
	fresh.Annotations[name] = value
	Must(t, K8s.Patch(Ctx, fresh, patch))
}

// ReconcileOnce runs one pass by hand, next to the manager's. A conflict
// with the manager's own pass is expected (optimistic locking at work) and
// retried, as the workqueue would.
func ReconcileOnce(t *testing.T, r *reconciler.TaskReconciler, task *v1alpha1.Task) reconcile.Result {
	t.Helper()
	for i := 0; ; i++ {
		res, err := r.Reconcile(Ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)})
		if err == nil {
			return res
		}
		if !apierrors.IsConflict(err) || i == 10 {
			t.Fatalf("reconcile: %v", err)
		}
	}
}

func Must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// CreateTask creates the Task NewTask builds and returns it.
func CreateTask(t *testing.T, ns, name string, opts ...testutil.TaskOpt) *v1alpha1.Task {
	t.Helper()
	task := NewTask(ns, name, opts...)
	Must(t, K8s.Create(Ctx, task))
	return task
}

// CreateQueue creates a TaskQueue of maxRunning and returns it.
func CreateQueue(t *testing.T, ns, name string, maxRunning int32) *v1alpha1.TaskQueue {
	t.Helper()
	q := testutil.NewTaskQueue(ns, name, maxRunning)
	Must(t, K8s.Create(Ctx, q))
	return q
}

// StartTask creates a Task named name (built by NewTask with opts) in a
// new namespace and waits for its first Job, which it returns.
func StartTask(t *testing.T, name string, opts ...testutil.TaskOpt) (*v1alpha1.Task, batchv1.Job) {
	t.Helper()
	task := CreateTask(t, NewNamespace(t), name, opts...)
	return task, WaitJobs(t, task, 1)[0]
}

// CompleteTaskJob completes the Task's one Job and waits for the Task to
// succeed.
func CompleteTaskJob(t *testing.T, task *v1alpha1.Task) {
	t.Helper()
	js := WaitJobs(t, task, 1)
	Must(t, testutil.CompleteJob(Ctx, K8s, &js[0], Clock.Now()))
	WaitTask(t, task, "phase Succeeded", PhaseIs(v1alpha1.PhaseSucceeded))
}

// ScheduledTask creates a cron Task with the clock at the present and
// waits for its first pass, which sets nextScheduleTime.
func ScheduledTask(t *testing.T, ns, name string, opts ...testutil.TaskOpt) (*v1alpha1.Task, *v1alpha1.Task) {
	t.Helper()
	Clock.SetTime(time.Now())
	task := NewTask(ns, name, append([]testutil.TaskOpt{testutil.Schedule("*/5 * * * *")}, opts...)...)
	Must(t, K8s.Create(Ctx, task))
	got := WaitTask(t, task, "the first pass", func(x *v1alpha1.Task) bool {
		return x.Status.NextScheduleTime != nil && x.Status.ObservedGeneration == x.Generation
	})
	return task, got
}

// ToSlot moves the clock just past the Task's next slot and pokes it; it
// returns the slot.
func ToSlot(t *testing.T, task *v1alpha1.Task) time.Time {
	t.Helper()
	// The status Must have caught up with the clock: its next slot is ahead.
	now := Clock.Now()
	got := WaitTask(t, task, "nextScheduleTime after now", func(x *v1alpha1.Task) bool {
		return x.Status.NextScheduleTime != nil && x.Status.NextScheduleTime.After(now)
	})
	next := got.Status.NextScheduleTime.Time
	Clock.SetTime(next.Add(2 * time.Second))
	Poke(t, task)
	return next
}

// Manual marks a Task for hand-driven reconcilers only (a TaskOpt).
func Manual(t *v1alpha1.Task) {
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	t.Labels[ManualLabel] = "true"
}
