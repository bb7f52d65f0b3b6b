package reconciler

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/internal/waitline"
)

// builderIndexer registers internal/index's indexes with a fake client.
type builderIndexer struct{ b *fake.ClientBuilder }

func (i builderIndexer) IndexField(_ context.Context, obj client.Object, field string, f client.IndexerFunc) error {
	i.b.WithIndex(obj, field, f)
	return nil
}

// A queue's new admission wakes the one Task it concerns, found in the
// line in memory (which the cache may not show yet) or by the cache's
// index; an attempt whose Job exists wakes nobody; only an admission
// nothing here knows takes every Task of the queue.
func TestAnAdmissionWakesItsTaskNotTheWholeQueue(t *testing.T) {
	waiting := func(name, job string) *v1alpha1.Task {
		task := testutil.NewTask("ns", name, testutil.Queue("q"))
		task.Status.Queued = []v1alpha1.QueuedAttempt{{JobName: job, RunID: "0", Since: metav1.NowMicro()}}
		return task
	}
	idle := testutil.NewTask("ns", "idle", testutil.Queue("q"))
	cases := map[string]struct {
		cached []client.Object  // what the cache shows
		inLine []*v1alpha1.Task // what the line in memory holds
		want   []string         // the Tasks enqueued
	}{
		"the line holds the Task, the cache not yet": {
			cached: []client.Object{idle, testutil.NewTask("ns", "a", testutil.Queue("q"))},
			inLine: []*v1alpha1.Task{waiting("a", "a-job")},
			want:   []string{"a"},
		},
		"the cache's index shows the Task waiting": {
			cached: []client.Object{idle, waiting("a", "a-job")},
			want:   []string{"a"},
		},
		"the attempt's Job exists: it started": {
			cached: []client.Object{idle, testutil.NewTask("ns", "a", testutil.Queue("q")),
				&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-job"}}},
			want: nil,
		},
		"nothing knows the attempt: every Task of the queue": {
			cached: []client.Object{idle, testutil.NewTask("ns", "a", testutil.Queue("q"))},
			want:   []string{"a", "idle"},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(testutil.Scheme()).WithObjects(c.cached...)
			if err := index.Add(context.Background(), builderIndexer{b}); err != nil {
				t.Fatal(err)
			}
			lines := waitline.New()
			for _, task := range c.inLine {
				lines.Put(task)
			}
			h := queueToTasks{c: b.Build(), lines: lines}
			old := testutil.NewTaskQueue("ns", "q", 2)
			n := old.DeepCopy()
			n.Status.Admitted = []string{"a-job"}
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: old, ObjectNew: n}, q)

			var got []string
			for q.Len() > 0 {
				req, _ := q.Get()
				got = append(got, req.Name)
				q.Done(req)
			}
			slices.Sort(got)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("Tasks enqueued (-want +got):\n%s", diff)
			}
		})
	}
}
