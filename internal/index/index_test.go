package index_test

import (
	"context"
	"slices"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
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

// owners are the two readers of a Task's Jobs over the same Jobs: the Job
// informer's own index (index.AddOwners, the operator's) and the field
// index listed through a client (index.ListOwners, a cache limited to
// some namespaces).
func owners(t *testing.T, jobs ...*batchv1.Job) map[string]index.JobOwners {
	t.Helper()
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &batchv1.Job{}, 0, toolscache.Indexers{})
	informers := &informertest.FakeInformers{Scheme: testutil.Scheme(), InformersByGVK: map[schema.GroupVersionKind]toolscache.SharedIndexInformer{
		batchv1.SchemeGroupVersion.WithKind("Job"): inf}}
	indexed, err := index.AddOwners(context.Background(), informers)
	if err != nil {
		t.Fatal(err)
	}
	objs := make([]client.Object, 0, len(jobs))
	for _, j := range jobs {
		if err := inf.GetIndexer().Add(j.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, j)
	}
	c := fake.NewClientBuilder().WithScheme(testutil.Scheme()).
		WithIndex(&batchv1.Job{}, index.OwnedJobs, index.JobOwnerBucket).
		WithObjects(objs...).Build()
	return map[string]index.JobOwners{"informer index": indexed, "field index": index.ListOwners{Reader: c}}
}

// Tasks whose UIDs share a bucket each get their own Jobs, and only those
// they control, in their namespace.
func TestOwnedByReadsTheBucketAndKeepsTheTasksOwnJobs(t *testing.T) {
	const a, b = "ab000000-0000-0000-0000-000000000001", "ab000000-0000-0000-0000-000000000002" // one bucket
	if index.OwnerBucket(a) != index.OwnerBucket(b) {
		t.Fatal("the test's UIDs are in two buckets")
	}
	for name, o := range owners(t,
		ownedJob("ns", "a-1", a, true), ownedJob("ns", "a-2", a, true),
		ownedJob("ns", "b-1", b, true),
		ownedJob("ns", "a-not-controller", a, false),
		ownedJob("other", "a-elsewhere", a, true),
	) {
		t.Run(name, func(t *testing.T) {
			names := func(uid string) []string {
				t.Helper()
				got, err := o.OwnedBy(context.Background(), "ns", uid)
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
		})
	}
}

// The Jobs a reader returns are copies: a pass may change them.
func TestOwnedByReturnsCopies(t *testing.T) {
	const a = "ab000000-0000-0000-0000-000000000001"
	for name, o := range owners(t, ownedJob("ns", "a-1", a, true)) {
		t.Run(name, func(t *testing.T) {
			got, err := o.OwnedBy(context.Background(), "ns", a)
			if err != nil || len(got) != 1 {
				t.Fatalf("%v, %v", got, err)
			}
			got[0].Labels = map[string]string{"changed": "yes"}
			again, err := o.OwnedBy(context.Background(), "ns", a)
			if err != nil || len(again) != 1 || again[0].Labels["changed"] != "" {
				t.Fatalf("the change reached the store: %v %v", again, err)
			}
		})
	}
}

// A cache whose Job informer's indexer cannot be read (one limited to
// some namespaces has an informer per namespace) gets the field index and
// the listing reader.
func TestAddOwnersListsWhereTheIndexerCannotBeRead(t *testing.T) {
	o, err := index.AddOwners(context.Background(), noIndexer{&informertest.FakeInformers{Scheme: testutil.Scheme()}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := o.(index.ListOwners); !ok {
		t.Errorf("AddOwners gave %T, want index.ListOwners", o)
	}
}

// noIndexer is a cache whose informers show no indexer, as a cache
// limited to some namespaces.
type noIndexer struct{ *informertest.FakeInformers }

func (c noIndexer) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	inf, err := c.FakeInformers.GetInformer(ctx, obj, opts...)
	return struct{ cache.Informer }{inf}, err
}
