package index_test

import (
	"context"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/testutil"
)

func ownedJob(ns, name string, owner types.UID, controller bool) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: []metav1.OwnerReference{{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "Task", Name: "t", UID: owner, Controller: ptr.To(controller)}}}}
}

// Tasks whose UIDs share a bucket each get their own Jobs, and only those
// they control, in their namespace.
func TestOwnedByReadsTheBucketAndKeepsTheTasksOwnJobs(t *testing.T) {
	const a, b = "ab000000-0000-0000-0000-000000000001", "ab000000-0000-0000-0000-000000000002" // one bucket
	if index.OwnerBucket(a) != index.OwnerBucket(b) {
		t.Fatal("the test's UIDs are in two buckets")
	}
	c := fake.NewClientBuilder().WithScheme(testutil.Scheme()).
		WithIndex(&batchv1.Job{}, index.OwnedJobs, index.JobOwnerBucket).
		WithObjects(
			ownedJob("ns", "a-1", a, true), ownedJob("ns", "a-2", a, true),
			ownedJob("ns", "b-1", b, true),
			ownedJob("ns", "a-not-controller", a, false),
			ownedJob("other", "a-elsewhere", a, true),
		).Build()
	names := func(uid string) []string {
		t.Helper()
		got, err := index.OwnedBy(context.Background(), c, "ns", uid)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range got {
			out = append(out, j.Name)
		}
		slices.Sort(out)
		return out
	}
	if got := names(a); !slices.Equal(got, []string{"a-1", "a-2"}) {
		t.Errorf("Task a's Jobs: %v", got)
	}
	if got := names(b); !slices.Equal(got, []string{"b-1"}) {
		t.Errorf("Task b's Jobs: %v", got)
	}
	if got := names("cd000000-0000-0000-0000-000000000003"); len(got) != 0 {
		t.Errorf("a Task with no Jobs: %v", got)
	}
}

// The Jobs OwnedBy returns are copies: a pass may change them.
func TestOwnedByReturnsCopies(t *testing.T) {
	const a = "ab000000-0000-0000-0000-000000000001"
	c := fake.NewClientBuilder().WithScheme(testutil.Scheme()).
		WithIndex(&batchv1.Job{}, index.OwnedJobs, index.JobOwnerBucket).
		WithObjects(ownedJob("ns", "a-1", a, true)).Build()
	got, err := index.OwnedBy(context.Background(), c, "ns", a)
	if err != nil || len(got) != 1 {
		t.Fatalf("%v, %v", got, err)
	}
	got[0].Labels = map[string]string{"changed": "yes"}
	var again batchv1.Job
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "a-1"}, &again); err != nil || again.Labels["changed"] != "" {
		t.Fatalf("the change reached the store: %v %v", again.Labels, err)
	}
}
