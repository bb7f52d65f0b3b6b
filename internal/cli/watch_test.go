package cli

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

// flakyWatcher answers its first watch with a 410 Gone error event (the
// resourceVersion expired) and counts the watches.
type flakyWatcher struct {
	client.WithWatch
	watches atomic.Int32
}

func (f *flakyWatcher) Watch(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	if f.watches.Add(1) == 1 {
		fw := watch.NewFakeWithChanSize(1, false)
		fw.Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone,
			Reason: metav1.StatusReasonExpired, Message: "too old resource version"})
		return fw, nil
	}
	return f.WithWatch.Watch(ctx, list, opts...)
}

// TestWatchTaskResumes: an expired resourceVersion makes the loop get the
// Task anew, and a watch the server ends is resumed, until the condition
// holds.
func TestWatchTaskResumes(t *testing.T) {
	old := watchTimeoutSeconds
	watchTimeoutSeconds = 1 // the API server ends each watch after 1s
	t.Cleanup(func() { watchTimeoutSeconds = old })

	_, key, _ := newShellTask(t, "long", 0)
	c, err := client.NewWithWatch(restCfg, client.Options{Scheme: testutil.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	fw := &flakyWatcher{WithWatch: c}
	var seen atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- watchTask(suiteCtx, fw, key, func(task *v1alpha1.Task) bool {
			seen.Add(1)
			return task.Status.Phase == v1alpha1.PhaseSucceeded
		})
	}()
	// The expired watch, then at least two real ones (the first ended by
	// the server after 1s).
	eventually(t, "three watches", func() bool { return fw.watches.Load() >= 3 })
	if seen.Load() < 2 {
		t.Errorf("the Task was observed %d times; want a get before and after the expired watch", seen.Load())
	}
	setStatus(t, key, func(task *v1alpha1.Task) { succeeded(task, 1) })
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testutil.Timeout(testWait)):
		t.Fatal("watchTask did not return after the Task succeeded")
	}
}
