package reconciler

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// One namespace floods the operator with new Tasks; a Task created right
// after in another namespace is taken within fairShare passes of the
// flood, not behind all of it (it was 1001st of 1001).
func TestOneNamespacesFloodDoesNotStarveAnothersNewTask(t *testing.T) {
	q := priorityqueue.New[reconcile.Request]("test")
	defer q.ShutDown()
	r := &TaskReconciler{}
	h := r.newTaskHandler()
	create := func(ns, name string) {
		task := &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		h.Create(context.Background(), event.TypedCreateEvent[client.Object]{Object: task}, q)
	}
	const flood = 1000
	for i := range flood {
		create("flood", fmt.Sprintf("t%04d", i))
	}
	create("quiet", "one")

	for taken := 1; taken <= flood+1; taken++ {
		req, _, _ := q.GetWithPriority()
		r.newTasks.taken(req.NamespacedName)
		q.Done(req)
		if req.Namespace == "quiet" {
			// The README promises 16 passes of the flood at most.
			const promised = 16
			if taken > promised+1 {
				t.Fatalf("the quiet namespace's Task was taken %dth, want within %d", taken, promised+1)
			}
			t.Logf("the quiet namespace's Task was taken %dth of %d", taken, flood+1)
			return
		}
	}
	t.Fatal("the quiet namespace's Task was never taken")
}

// The flood's own Tasks keep their order, and a namespace whose backlog
// was taken is within its share again.
func TestAFloodKeepsItsOrderAndItsShareComesBack(t *testing.T) {
	var w newTasksWaiting
	key := func(i int) types.NamespacedName { return types.NamespacedName{Namespace: "flood", Name: fmt.Sprint(i)} }
	for i := range fairShare {
		if !w.add(key(i)) {
			t.Fatalf("task %d is beyond the share of %d", i, fairShare)
		}
	}
	if w.add(key(fairShare)) {
		t.Fatalf("task %d is within the share of %d", fairShare, fairShare)
	}
	for i := range fairShare + 1 {
		w.taken(key(i))
	}
	if !w.add(key(99)) {
		t.Fatal("a namespace whose Tasks were all taken is beyond its share")
	}
}
