package index

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// The manager's cache gives the waiting line its index (so the queue reads
// the cached Tasks, not copies), and the line holds exactly the Tasks
// waiting in each queue. No API server: the informer is not started, and
// the test fills its store by hand.
func TestTheWaitingLineIndexesTheTasksWaitingInEachQueue(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(v1alpha1.GroupVersion.WithKind("Task"), meta.RESTScopeNamespace)
	c, err := cache.New(&rest.Config{Host: "https://127.0.0.1:1"}, cache.Options{Scheme: s, Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	line, err := NewWaitingLine(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if line == nil {
		t.Fatal("the cache's Task informer has no indexer to read: the queue would copy every waiting Task on each pass")
	}
	waiting := []v1alpha1.QueuedAttempt{{RunID: "0", JobName: "j-1"}}
	gone := metav1.Now()
	for _, task := range []*v1alpha1.Task{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "waits"}, Spec: v1alpha1.TaskSpec{QueueName: "q"}, Status: v1alpha1.TaskStatus{Queued: waiting}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "runs"}, Spec: v1alpha1.TaskSpec{QueueName: "q"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "deleted", DeletionTimestamp: &gone, Finalizers: []string{v1alpha1.Finalizer}},
			Spec: v1alpha1.TaskSpec{QueueName: "q"}, Status: v1alpha1.TaskStatus{Queued: waiting}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "other-queue"}, Spec: v1alpha1.TaskSpec{QueueName: "r"}, Status: v1alpha1.TaskStatus{Queued: waiting}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "other-namespace"}, Spec: v1alpha1.TaskSpec{QueueName: "q"}, Status: v1alpha1.TaskStatus{Queued: waiting}},
	} {
		if err := line.indexer.Add(task); err != nil {
			t.Fatal(err)
		}
	}
	names := func(ns, q string) []string {
		ts, err := line.In(ns, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, t := range ts {
			out = append(out, t.Name)
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		ns, q string
		want  []string
	}{{"a", "q", []string{"waits"}}, {"a", "r", []string{"other-queue"}}, {"b", "q", []string{"other-namespace"}}, {"b", "r", nil}} {
		if got := names(c.ns, c.q); !slices.Equal(got, c.want) {
			t.Errorf("waiting in %s/%s: %v, want %v", c.ns, c.q, got, c.want)
		}
	}
	// An update that ends the wait takes the Task out of the line.
	done := &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "waits"}, Spec: v1alpha1.TaskSpec{QueueName: "q"}}
	if err := line.indexer.Update(done); err != nil {
		t.Fatal(err)
	}
	if got := names("a", "q"); len(got) != 0 {
		t.Errorf("after the wait ended: %v", got)
	}
}
