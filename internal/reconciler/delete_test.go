package reconciler_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

// foreignFinalizer is another controller's finalizer on a Task.
const foreignFinalizer = "audit.example.com/keep"

// deleteAfterNotification runs a notifying Task to its end, adds another
// controller's finalizer, and deletes it while its notification Job runs.
func deleteAfterNotification(t *testing.T, name string) (*v1alpha1.Task, string) {
	t.Helper()
	fakeClock.SetTime(time.Now())
	task := createTask(t, newNamespace(t), name, testutil.Notify("http://10.0.0.1/hook", "", v1alpha1.NotifyOnSucceeded))
	job := waitJobs(t, task, 1)[0]
	must(t, testutil.CompleteJob(ctx, k8s, &job, fakeClock.Now()))
	note := waitNotification(t, task, runs.OneShot)
	// The operator writes the Task's status meanwhile: an update that
	// lost that race is made again from the newer Task.
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest := getTask(t, task)
		latest.Finalizers = append(latest.Finalizers, foreignFinalizer)
		return k8s.Update(ctx, latest)
	}))
	t.Cleanup(func() { removeForeignFinalizer(t, task) })
	must(t, k8s.Delete(ctx, task))
	eventually(t, "the attempt's Job deleted, the notification Job kept", func() (bool, string) {
		js := jobsOf(t, task)
		return len(js) == 1 && js[0].Name == note.Name, fmt.Sprintf("%d Jobs", len(js))
	})
	return task, note.Name
}

func removeForeignFinalizer(t *testing.T, task *v1alpha1.Task) {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest := &v1alpha1.Task{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(task), latest); err != nil {
			return err
		}
		latest.Finalizers = slices.DeleteFunc(latest.Finalizers, func(f string) bool { return f == foreignFinalizer })
		return k8s.Update(ctx, latest)
	})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Logf("removing %s: %v", foreignFinalizer, err)
	}
}

// finalizersAre waits until the Task's finalizers are exactly want.
func finalizersAre(t *testing.T, task *v1alpha1.Task, want ...string) {
	t.Helper()
	eventually(t, fmt.Sprintf("finalizers %v", want), func() (bool, string) {
		latest := &v1alpha1.Task{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(task), latest); err != nil {
			return false, err.Error()
		}
		return slices.Equal(latest.Finalizers, want), fmt.Sprintf("%v", latest.Finalizers)
	})
}

// A Task deleted right after its run ended still tells its webhooks: the
// finalizer keeps the unfinished notification Job (the attempt's Job goes
// at once), lets the Task go when the notification ends, removes only its
// own finalizer, and says what it cleaned up (Deleted).
func TestADeletedTaskWaitsForItsNotificationAndRemovesOnlyItsOwnFinalizer(t *testing.T) {
	task, note := deleteAfterNotification(t, "told-then-deleted")
	for range 2 {
		reconcileOnce(t, rec, task)
	}
	finalizersAre(t, task, v1alpha1.Finalizer, foreignFinalizer)

	job := &batchv1.Job{}
	must(t, k8s.Get(ctx, client.ObjectKey{Namespace: task.Namespace, Name: note}, job))
	must(t, testutil.CompleteJob(ctx, k8s, job, fakeClock.Now()))
	finalizersAre(t, task, foreignFinalizer)
	waitEvent(t, task, v1alpha1.EventDeleted)
}

// The wait is bounded: a notification Job that has not finished
// notificationWait (its deadline plus 30 s) after the delete is deleted
// with the rest, and the Deleted event says so.
func TestADeletedTaskWaitsForANotificationNoLongerThanItsDeadline(t *testing.T) {
	task, _ := deleteAfterNotification(t, "told-never")
	fakeClock.Step(211 * time.Second)
	reconcileOnce(t, rec, task)
	finalizersAre(t, task, foreignFinalizer)
	waitEvent(t, task, v1alpha1.EventDeleted)
	eventually(t, "every Job deleted", func() (bool, string) {
		n := len(jobsOf(t, task))
		return n == 0, fmt.Sprintf("%d Jobs", n)
	})
}
