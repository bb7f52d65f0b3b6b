package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/version"
)

// createAll creates the n objects mk(0..n-1) from `workers` goroutines as
// fast as the API server takes them. start is just before the first request
// was sent, end just after the last response arrived.
func createAll(ctx context.Context, c client.Client, n, workers int, mk func(i int) client.Object) (start, end time.Time, err error) {
	start = time.Now()
	err = forAll(ctx, n, workers, func(i int) error {
		if err := c.Create(ctx, mk(i)); err != nil {
			return fmt.Errorf("creating object %d: %w", i, err)
		}
		return nil
	})
	return start, time.Now(), err
}

// forAll calls do(i) for i in [0, n) from workers goroutines and returns
// the first error (after which the workers stop).
func forAll(ctx context.Context, n, workers int, do func(i int) error) error {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		firstErr error
		errOnce  sync.Once
	)
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := do(i); err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// benchJobOptions are the images the Jobs run; nothing pulls them here (kwok
// simulates the pods), but they keep the Job the size of a real one.
var benchJobOptions = jobs.Options{ShellImage: "busybox:1.37", RunnerImage: version.Image()}

// oneShotTask is the smallest useful Task: a shell command, run once.
func oneShotTask(namespace, name string) *v1alpha1.Task {
	return &v1alpha1.Task{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       v1alpha1.TaskSpec{Type: v1alpha1.TaskTypeShell, Shell: "echo hello"},
	}
}

// cronTask is a cron Task with the given 5-field schedule in UTC.
func cronTask(namespace, name, schedule string) *v1alpha1.Task {
	t := oneShotTask(namespace, name)
	t.Spec.Schedule = ptr.To(schedule)
	return t
}

// b0Job is Job i of the baseline: exactly what the operator would create for
// attempt i+1 of owner's run 0 (so every name is distinct and the owner
// reference is valid, which keeps the garbage collector out of it), plus
// spec.managedBy naming a controller that does not exist, so the Job
// controller ignores it: no pods, no status writes, nothing but the API
// server's own work is measured.
func b0Job(owner *v1alpha1.Task, i int) *batchv1.Job {
	j := jobs.Build(owner, runs.OneShot, int32(i+1), nil, nil, benchJobOptions)
	j.Spec.ManagedBy = ptr.To("bench.taskops.io/nobody")
	return j
}

// cronJob is a CronJob running the Job the operator would build for a
// one-shot Task, on schedule in UTC, with the CronJob defaults otherwise
// (concurrencyPolicy Allow, no startingDeadlineSeconds).
func cronJob(namespace, name, schedule string) *batchv1.CronJob {
	shape := jobs.Build(oneShotTask(namespace, name), runs.OneShot, 1, nil, nil, benchJobOptions)
	tmpl := shape.Spec
	// The operator's labels mean "a Task's Job"; these Jobs are not.
	tmpl.Template.Labels = map[string]string{"bench.taskops.io/cronjob": name}
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: batchv1.CronJobSpec{
			Schedule:          schedule,
			TimeZone:          ptr.To("Etc/UTC"),
			ConcurrencyPolicy: batchv1.AllowConcurrent,
			JobTemplate:       batchv1.JobTemplateSpec{Spec: tmpl},
		},
	}
}
