//go:build reliability

package reliability

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// Scenario 14: kube-apiserver stops for 20 s while 50 runs end, each of
// which owes a notification (half failing, half succeeding). Once it is
// back, every run's result is recorded, no attempt has two Jobs, and
// every notification is sent exactly once: one notification Job per run,
// recorded Sent. The operator (one process) is never restarted.
func TestS14APIServerRestartWhileRunsEndLosesNoNotification(t *testing.T) {
	slowScenario(t)
	n := pick(50, 16)
	down := pick(20*time.Second, 10*time.Second)
	ns := s.newNamespace(t, "rel-notify-outage", false)
	op := s.startOperator(t, "op", false)
	jobs := harness.RecordJobs(t, s.c, ns)
	want := map[string]v1alpha1.TaskPhase{}
	var tasks []*v1alpha1.Task
	for i := range n {
		name := fmt.Sprintf("told-%03d", i)
		// The pods run 8-12 s: the runs end while the API server is down
		// or as it comes back.
		opts := []testutil.TaskOpt{testutil.PodAnnotations(harness.SimDuration, strconv.Itoa(8+i%5)),
			testutil.Notify("http://127.0.0.1:9/hook", "", v1alpha1.NotifyOnFailed, v1alpha1.NotifyOnSucceeded)}
		want[name] = v1alpha1.PhaseSucceeded
		if i%2 == 0 {
			opts = append(opts, testutil.PodAnnotations(harness.SimExitCode, "3"))
			want[name] = v1alpha1.PhaseFailed
		}
		tasks = append(tasks, testutil.NewTask(ns, name, opts...))
	}
	start := time.Now()
	createAll(t, tasks)
	waitForTasks(t, 2*time.Minute, "every Task to have started", ns, op, n, func(task *v1alpha1.Task) bool {
		return task.Status.Attempts > 0 || len(task.Status.Active) > 0
	})
	stopAt := time.Now()
	args := stopAPIServer(t)
	time.Sleep(down - time.Since(stopAt)) // the outage itself: its length is the scenario
	startAt := time.Now()
	readyIn := startAPIServer(t, args)
	s.excuse(startAt, time.Now().Add(5*time.Second))

	sent := waitForTasks(t, 5*time.Minute, "every notification Sent", ns, op, n, func(task *v1alpha1.Task) bool {
		return len(task.Status.History) > 0 && task.Status.History[0].Notification == v1alpha1.NotificationSent
	})

	seen := jobs.All(t)
	attempts, notes := map[string]int{}, map[string]int{}
	for i := range seen {
		switch task := seen[i].Labels[v1alpha1.LabelTask]; {
		case seen[i].Labels[v1alpha1.LabelNotification] != "":
			notes[task]++
		default:
			attempts[task]++
		}
	}
	ts, err := listTasks(ctxFor(t, 30*time.Second), ns)
	if err != nil {
		t.Fatal(err)
	}
	for name, phase := range want {
		task := ts[name]
		switch {
		case task == nil:
			t.Errorf("Task %s is gone", name)
		case task.Status.Phase != phase:
			t.Errorf("Task %s: phase %s, want %s", name, task.Status.Phase, phase)
		case attempts[name] != 1 || notes[name] != 1:
			t.Errorf("Task %s: %d attempt Jobs and %d notification Jobs seen, want 1 and 1", name, attempts[name], notes[name])
		}
	}
	if !op.Alive() || op.Starts() != 1 {
		t.Errorf("the operator did not ride it out: alive %v, started %d times (exit: %v)", op.Alive(), op.Starts(), op.ExitErr())
	}
	figure(t, "%d runs owing a notification (half failing); kube-apiserver stopped %s after creation for %s (/readyz in %s); every notification Sent %s after it was back; %d Jobs seen (%d duplicates); operator never restarted: %v",
		n, harness.Secs(stopAt.Sub(start)), harness.Secs(down), harness.Secs(readyIn), harness.Secs(sent), len(seen), len(harness.Duplicates(seen)), op.Alive() && op.Starts() == 1)
}
