package reconciler_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/fastpath"
	"github.com/taskops/task-operator/internal/testutil"
)

// With the shortcuts' RecordStartDelay, the status write that would only
// say "Running" waits: a run that ends within the delay is recorded once,
// finished (the Task never shows Running), and one that runs longer shows
// Running once the delay has passed. The suite's clock stands still, so
// the test moves it.
func TestARunShorterThanTheRecordDelayIsWrittenOnceAndALongerOneShowsRunningAfterIt(t *testing.T) {
	testutil.SkipWithoutShortcuts(t)
	t.Cleanup(func() { fakeClock.SetTime(time.Now()) })
	// Until a test step moves it, the clock is a little after each Job's
	// creation (which the API server stamps in whole seconds), so that the
	// passes that create the Jobs are within the delay too.
	fakeClock.SetTime(time.Now().Add(1500 * time.Millisecond))
	ns := newNamespace(t)
	rec := manualReconciler(nil)
	rec.Shortcuts = testutil.Shortcuts().WithRecordStartDelay(fastpath.RecordStartDelay)

	// Every version of the Tasks' status, as stored.
	w, err := watchClient(t).Watch(ctx, &v1alpha1.TaskList{}, client.InNamespace(ns))
	must(t, err)
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	phases := map[string][]v1alpha1.TaskPhase{}
	seen := make(chan struct{})
	go func() {
		defer close(seen)
		for ev := range w.ResultChan() {
			if task, ok := ev.Object.(*v1alpha1.Task); ok {
				mu.Lock()
				if p := phases[task.Name]; len(p) == 0 || p[len(p)-1] != task.Status.Phase {
					phases[task.Name] = append(phases[task.Name], task.Status.Phase)
				}
				mu.Unlock()
			}
		}
	}()
	// watched is what the watch has delivered of a Task so far: the API
	// server's answer can be ahead of its watch events.
	watched := func(name string) []v1alpha1.TaskPhase {
		mu.Lock()
		defer mu.Unlock()
		return append([]v1alpha1.TaskPhase(nil), phases[name]...)
	}

	pass := func(task *v1alpha1.Task) reconcile.Result {
		res, err := rec.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)})
		must(t, err)
		return res
	}
	start := func(name string) (*v1alpha1.Task, batchv1.Job) {
		task := createTask(t, ns, name, manual)
		waitCached(t, task)
		var job batchv1.Job
		eventually(t, name+"'s Job in the manual cache", func() (bool, string) {
			pass(task)
			var list batchv1.JobList
			must(t, manualClient.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelTask: name}))
			if len(list.Items) == 0 {
				return false, "no Job"
			}
			job = list.Items[0]
			return true, ""
		})
		// Just after the Job's creation: the pass records nothing yet
		// and comes back when the delay ends.
		fakeClock.SetTime(job.CreationTimestamp.Add(500 * time.Millisecond))
		res := pass(task)
		if got := getTask(t, task); got.Status.Phase != "" {
			t.Fatalf("%s: recorded within the delay: %s", name, statusSummary(got))
		}
		if max := fastpath.RecordStartDelay + time.Second; res.RequeueAfter <= 0 || res.RequeueAfter > max {
			t.Fatalf("%s: requeued after %s, want the delay's end (at most %s)", name, res.RequeueAfter, max)
		}
		return task, job
	}

	short, job := start("short")
	must(t, testutil.CompleteJob(ctx, k8s, &job, fakeClock.Now()))
	eventually(t, "short Succeeded", func() (bool, string) {
		pass(short)
		got := getTask(t, short)
		return got.Status.Phase == v1alpha1.PhaseSucceeded, statusSummary(got)
	})

	fakeClock.SetTime(time.Now().Add(1500 * time.Millisecond))
	long, job := start("long")
	fakeClock.SetTime(job.CreationTimestamp.Add(fastpath.RecordStartDelay + time.Second))
	eventually(t, "long Running once the delay passed", func() (bool, string) {
		pass(long)
		got := getTask(t, long)
		return got.Status.Phase == v1alpha1.PhaseRunning, statusSummary(got)
	})

	// Every write made is in the watch before it is read.
	for name, last := range map[string]v1alpha1.TaskPhase{"short": v1alpha1.PhaseSucceeded, "long": v1alpha1.PhaseRunning} {
		eventually(t, name+"'s last write in the watch", func() (bool, string) {
			p := watched(name)
			return len(p) > 0 && p[len(p)-1] == last, fmt.Sprint(p)
		})
	}
	w.Stop()
	<-seen
	if got := fmt.Sprint(watched("short")); got != "[ Succeeded]" {
		t.Errorf("short's stored phases %s, want [ Succeeded]: one status write, never Running", got)
	}
	if got := fmt.Sprint(watched("long")); got != "[ Running]" {
		t.Errorf("long's stored phases %s, want [ Running]", got)
	}
}
