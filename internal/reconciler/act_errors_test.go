package reconciler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/guards"
	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/reconciler"
	"github.com/taskops/task-operator/internal/testutil"
)

// The act stage's error branches, each forced by a fake client whose
// interceptor answers the Job's create (or the status patch) as an API
// server would refuse it: what the pass returns, and what the Task's
// status then says. These are the answers an envtest cannot be made to
// give on demand (a policy webhook, a terminating namespace, a conflict at
// the exact moment).
func TestActErrorBranches(t *testing.T) {
	jobGR := schema.GroupResource{Group: "batch", Resource: "jobs"}
	foreign := func(ns, name string) *batchv1.Job {
		return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	rows := []struct {
		name string
		// create answers the Job's create; nil lets it through.
		create func(job *batchv1.Job) error
		// existing is a Job already under the attempt's name.
		existing func(ns, name string) *batchv1.Job
		// patchStatus answers the status patch; nil lets it through.
		patchStatus error

		wantErr     string // a substring of the pass's error; "" for none
		wantRequeue bool   // a RequeueAfter > 0
		wantReason  v1alpha1.Reason
		wantJobs    int
	}{
		{
			name: "a policy refusing the Job is JobRefused, rechecked later, no error",
			create: func(*batchv1.Job) error {
				return apierrors.NewForbidden(jobGR, "x", errors.New("denied by policy require-team-label"))
			},
			wantRequeue: true, wantReason: v1alpha1.ReasonJobRefused,
		},
		{
			name: "a used-up ResourceQuota is WaitingForCapacity",
			create: func(*batchv1.Job) error {
				return apierrors.NewForbidden(jobGR, "x", errors.New("exceeded quota: jobs, requested: count/jobs.batch=1, used: count/jobs.batch=5, limited: count/jobs.batch=5"))
			},
			wantRequeue: true, wantReason: v1alpha1.ReasonWaitingForCapacity,
		},
		{
			name: "a Job the API server finds invalid makes the spec InvalidSpec, without a retry loop",
			create: func(*batchv1.Job) error {
				return apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "x", nil)
			},
			wantReason: v1alpha1.ReasonInvalidSpec,
		},
		{
			name:        "a foreign Job holding the attempt's name is JobRefused, and is left alone",
			existing:    foreign,
			wantRequeue: true, wantReason: v1alpha1.ReasonJobRefused, wantJobs: 1,
		},
		{
			name: "a namespace being deleted stops the pass: no error, no status write, no requeue",
			create: func(*batchv1.Job) error {
				err := apierrors.NewForbidden(jobGR, "x", errors.New("unable to create new content in namespace because it is being terminated"))
				err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
				return err
			},
		},
		{
			name:        "an API server that cannot take the create for now (503) is WaitingForAPI, tried again within seconds",
			create:      func(*batchv1.Job) error { return apierrors.NewServiceUnavailable("etcd is unavailable") },
			wantRequeue: true, wantReason: v1alpha1.ReasonWaitingForAPI,
		},
		{
			name:    "a create that fails in a way no refusal explains is an error naming the stage",
			create:  func(*batchv1.Job) error { return errors.New("an unexpected failure") },
			wantErr: "act: ", wantReason: "",
		},
		{
			name:        "a conflict on the status write is a quiet requeue, the Job kept",
			patchStatus: apierrors.NewConflict(schema.GroupResource{Group: v1alpha1.GroupVersion.Group, Resource: "tasks"}, "t", errors.New("the object has been modified")),
			wantRequeue: true, wantJobs: 1,
		},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			ctx := context.Background()
			task := testutil.NewTask("ns", "t", testutil.Shell("true"))
			task.UID, task.Generation = "uid-t", 1
			b := fakeAPI(task)
			if row.existing != nil {
				// The attempt's name, as the Job built for it has it.
				b = b.WithObjects(row.existing("ns", firstJobName(t, task)))
			}
			var statusWrites int
			c := interceptor.NewClient(b.Build(), interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if job, ok := obj.(*batchv1.Job); ok && row.create != nil {
						return row.create(job)
					}
					return c.Create(ctx, obj, opts...)
				},
				SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					statusWrites++
					if row.patchStatus != nil {
						return row.patchStatus
					}
					return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
				},
			})
			r := &reconciler.TaskReconciler{Client: c, APIReader: c, Clock: clocktesting.NewFakeClock(time.Now()), Jobs: jobOpts}

			res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)})
			if row.wantErr == "" && err != nil || row.wantErr != "" && (err == nil || !strings.Contains(err.Error(), row.wantErr)) {
				t.Fatalf("error %v, want one containing %q", err, row.wantErr)
			}
			if got := res.RequeueAfter > 0; got != row.wantRequeue {
				t.Errorf("RequeueAfter %s, want a requeue: %v", res.RequeueAfter, row.wantRequeue)
			}
			if row.patchStatus != nil && res.RequeueAfter != guards.ConflictRetry {
				t.Errorf("a conflict requeued after %s, want guards.ConflictRetry", res.RequeueAfter)
			}
			var jobs batchv1.JobList
			must(t, c.List(ctx, &jobs))
			if len(jobs.Items) != row.wantJobs {
				t.Errorf("%d Jobs, want %d", len(jobs.Items), row.wantJobs)
			}
			got := &v1alpha1.Task{}
			must(t, c.Get(ctx, client.ObjectKeyFromObject(task), got))
			ready := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
			switch {
			case row.wantReason == "" && row.patchStatus == nil && row.wantErr == "" && statusWrites != 0:
				t.Errorf("%d status writes, want none", statusWrites)
			case row.wantReason != "" && (ready == nil || ready.Reason != string(row.wantReason)):
				t.Errorf("Ready %+v, want reason %s", ready, row.wantReason)
			}
		})
	}
}

// firstJobName is the name of the Job of a Task's first attempt, as the
// operator builds it.
func firstJobName(t *testing.T, task *v1alpha1.Task) string {
	t.Helper()
	c := fakeAPI(task.DeepCopy()).Build()
	r := &reconciler.TaskReconciler{Client: c, APIReader: c, Clock: clocktesting.NewFakeClock(time.Now()), Jobs: jobOpts}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)}); err != nil {
		t.Fatal(err)
	}
	var jobs batchv1.JobList
	must(t, c.List(context.Background(), &jobs))
	if len(jobs.Items) != 1 {
		t.Fatalf("%d Jobs for a new Task, want 1", len(jobs.Items))
	}
	return jobs.Items[0].Name
}

// fakeAPI is a fake client holding task, with the status subresource and
// the Job indexes a pass lists by.
func fakeAPI(task *v1alpha1.Task) *fake.ClientBuilder {
	return fake.NewClientBuilder().WithScheme(testutil.Scheme()).
		WithObjects(task).WithStatusSubresource(&v1alpha1.Task{}).
		WithIndex(&batchv1.Job{}, index.OwnedJobs, index.JobOwnerBucket).
		WithIndex(&batchv1.Job{}, index.QueuePlaces, index.JobHoldingPlaceIn)
}
