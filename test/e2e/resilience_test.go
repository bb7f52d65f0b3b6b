//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// These tests are not parallel: one kills the operator, the other times a
// namespace deletion, and both want the cluster to themselves. Go runs them
// before the parallel tests.

// (e) Deleting a namespace full of Tasks (running, waiting out a backoff,
// unable to start, finished) completes within a minute: the finalizer
// never blocks it.
func TestNamespaceDeletion(t *testing.T) {
	requireRealNode(t)
	ns := newNamespace(t, "e2e-nsdel")
	groups := []struct {
		prefix string
		n      int
		opts   []testutil.TaskOpt
		ready  func(*v1alpha1.Task, []corev1.Pod) bool
	}{
		{"forever", 8, []testutil.TaskOpt{testutil.Shell(runsUntilStopped)}, func(task *v1alpha1.Task, pods []corev1.Pod) bool {
			return len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning
		}},
		{"retrying", 4, []testutil.TaskOpt{testutil.Retries(5, 60, 60, 1), testutil.Shell("exit 1")}, func(task *v1alpha1.Task, _ []corev1.Pod) bool {
			return task.Status.Phase == v1alpha1.PhaseRetrying
		}},
		{"stuck", 4, []testutil.TaskOpt{testutil.StartTimeout(600), testutil.Image(missingImage)}, func(task *v1alpha1.Task, pods []corev1.Pod) bool {
			return len(pods) == 1 && pods[0].Status.Phase == corev1.PodPending
		}},
		{"done", 4, nil, func(task *v1alpha1.Task, _ []corev1.Pod) bool {
			return task.Status.Phase == v1alpha1.PhaseSucceeded
		}},
	}
	ready := map[string]func(*v1alpha1.Task, []corev1.Pod) bool{}
	for _, g := range groups {
		for i := 0; i < g.n; i++ {
			name := fmt.Sprintf("%s-%d", g.prefix, i)
			create(t, testutil.NewTask(ns, name, g.opts...))
			ready[name] = g.ready
		}
	}
	if len(ready) != 20 {
		t.Fatalf("made %d Tasks, want 20", len(ready))
	}
	settled := eventually(t, 90*time.Second, "the 20 Tasks to reach their states", func(ctx context.Context) (bool, string) {
		var notYet []string
		for name, ok := range ready {
			task, err := harness.GetTask(ctx, env.c, ns, name)
			if err != nil {
				return false, err.Error()
			}
			pods, err := harness.PodsOf(ctx, env.c, ns, name)
			if err != nil {
				return false, err.Error()
			}
			if !harness.HasFinalizer(task) || !ok(task, pods) {
				notYet = append(notYet, fmt.Sprintf("%s(%s %v)", name, task.Status.Phase, harness.PodPhases(pods)))
			}
		}
		sort.Strings(notYet)
		return len(notYet) == 0, "not yet: " + strings.Join(notYet, " ")
	})
	t.Logf("20 Tasks settled %s after creation: 8 pods running forever, 4 Tasks Retrying, 4 pods Pending (ImagePullBackOff), 4 Succeeded", harness.Secs(settled))

	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	delStart := time.Now()
	if err := env.c.Delete(ctxFor(t, 10*time.Second), nsObj); err != nil {
		t.Fatal(err)
	}
	var tasksGone time.Duration
	gone := eventually(t, 60*time.Second, "namespace "+ns+" to be deleted", func(ctx context.Context) (bool, string) {
		d, err := harness.ObserveNamespaceDeletion(ctx, env.c, ns)
		if err != nil {
			return false, err.Error()
		}
		if d.Tasks == 0 && tasksGone == 0 {
			tasksGone = time.Since(delStart)
		}
		return d.Gone, d.String()
	})
	t.Logf("namespace with 20 Tasks deleted in %s (its Tasks were gone after %s)", harness.Secs(gone), harness.Secs(tasksGone))
}

// (f) The operator is killed (SIGKILL) twice while Tasks are failing and
// retrying: no attempt gets a second Job, no retry is lost (every Task
// ends Failed with maxRetry+1 attempts), no status goes backwards, and a
// Task that had already finished keeps its status.
func TestOperatorKilledMidRun(t *testing.T) {
	requireRealNode(t)
	ns := newNamespace(t, "e2e-kill")
	restartOperatorAfter(t)
	jobs := harness.RecordJobs(t, env.c, ns)
	statuses := harness.MonitorStatus(t, env.c, ns)

	// A Task that is over before the first kill.
	const finishedMsg = "e2e: finished before the operator was killed"
	create(t, testutil.NewTask(ns, "finished", testutil.Shell(`echo "`+finishedMsg+`" >&2; exit 3`)))
	kubectlWait(t, ns, "condition=Failed", "task/finished", 60*time.Second)
	finished := mustGetTask(t, ns, "finished")

	const n, maxRetry = 10, 3
	const msg = "e2e: attempt failed"
	start := time.Now()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("crash-%d", i)
		create(t, testutil.NewTask(ns, names[i], testutil.Retries(maxRetry, 2, 2, 1), testutil.Shell(`echo "`+msg+`" >&2; exit 3`)))
	}
	attempts := func(ctx context.Context) (map[string]*v1alpha1.Task, error) {
		out := map[string]*v1alpha1.Task{}
		for _, name := range names {
			task, err := harness.GetTask(ctx, env.c, ns, name)
			if err != nil {
				return nil, err
			}
			out[name] = task
		}
		return out, nil
	}
	summary := func(tasks map[string]*v1alpha1.Task) string {
		var parts []string
		for _, name := range names {
			if task := tasks[name]; task != nil {
				parts = append(parts, fmt.Sprintf("%s=%s/%d", name, task.Status.Phase, task.Status.Attempts))
			}
		}
		return strings.Join(parts, " ")
	}
	atLeast := func(minAttempts int32, count int) func(ctx context.Context) (bool, string) {
		return func(ctx context.Context) (bool, string) {
			tasks, err := attempts(ctx)
			if err != nil {
				return false, err.Error()
			}
			k := 0
			for _, task := range tasks {
				if task.Status.Attempts >= minAttempts {
					k++
				}
			}
			return k >= count, summary(tasks)
		}
	}

	// Kill 1: mid-run, then keep the operator down until a retry has
	// fallen due and an attempt has failed while nobody was watching.
	eventually(t, 60*time.Second, "half the Tasks to be on their second attempt", atLeast(2, n/2))
	before, _ := attempts(ctxFor(t, 10*time.Second))
	killedAt := time.Now()
	if err := env.op.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kill 1 (SIGKILL) %s after creation: %s", harness.Secs(killedAt.Sub(start)), summary(before))
	// A retry "falls due" when an attempt failed (a Task already Retrying
	// at the kill, or a Job that failed since) more than the 2 s backoff
	// ago; time stamps have 1 s resolution, hence the extra second.
	const backoff = 2 * time.Second
	down := eventually(t, 30*time.Second, "a retry to fall due while the operator is down", func(ctx context.Context) (bool, string) {
		due := 0
		for _, task := range before {
			if r := task.Status.NextRetryTime; r != nil && time.Now().After(r.Add(time.Second)) {
				due++
			}
		}
		var list batchv1.JobList
		if err := env.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		failedWhileDown := 0
		for i := range list.Items {
			c := harness.JobCondition(&list.Items[i], batchv1.JobFailed)
			if c == nil || !c.LastTransitionTime.After(killedAt.Add(-time.Second)) {
				continue
			}
			failedWhileDown++
			if time.Now().After(c.LastTransitionTime.Add(backoff + time.Second)) {
				due++
			}
		}
		return due > 0, fmt.Sprintf("Jobs failed since the kill: %d, retries due: %d", failedWhileDown, due)
	})
	ready, err := env.op.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("restart 1 after %s down; /readyz in %s", harness.Secs(down), harness.Secs(ready))

	// Kill 2: later in the runs, restarted at once.
	eventually(t, 60*time.Second, "half the Tasks to be on their third attempt", atLeast(3, n/2))
	before, _ = attempts(ctxFor(t, 10*time.Second))
	if err := env.op.Kill(); err != nil {
		t.Fatal(err)
	}
	ready, err = env.op.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kill 2 (SIGKILL) %s after creation, restarted at once (/readyz in %s): %s", harness.Secs(time.Since(start)), harness.Secs(ready), summary(before))

	all := eventually(t, 120*time.Second, "every Task to be Failed", func(ctx context.Context) (bool, string) {
		tasks, err := attempts(ctx)
		if err != nil {
			return false, err.Error()
		}
		for _, task := range tasks {
			if task.Status.Phase != v1alpha1.PhaseFailed {
				return false, summary(tasks)
			}
		}
		return true, ""
	})
	t.Logf("all %d Tasks Failed %s after creation (%s after the last restart)", n, harness.Secs(time.Since(start)), harness.Secs(all))

	t.Run("no duplicate Job", func(t *testing.T) {
		seen := jobs.All(t)
		byKey := map[harness.JobKey][]string{}
		for i := range seen {
			k := harness.KeyOf(&seen[i])
			byKey[k] = append(byKey[k], seen[i].Name+"("+string(seen[i].UID)+")")
		}
		for k, js := range byKey {
			if len(js) > 1 {
				t.Errorf("%d Jobs for task %s run %s attempt %s: %v", len(js), k.Task, k.Run, k.Attempt, js)
			}
		}
		t.Logf("%d Jobs seen in the namespace, %d distinct (task, run, attempt)", len(seen), len(byKey))
		for _, name := range names {
			var got []int
			for k := range byKey {
				if k.Task == name {
					a, _ := strconv.Atoi(k.Attempt)
					if k.Run != "0" {
						t.Errorf("Task %s has a Job for run %q; a one-shot Task has only run 0", name, k.Run)
					}
					got = append(got, a)
				}
			}
			sort.Ints(got)
			if fmt.Sprint(got) != fmt.Sprint([]int{1, 2, 3, 4}) {
				t.Errorf("Task %s: Jobs for attempts %v, want [1 2 3 4]", name, got)
			}
		}
	})

	t.Run("no retry lost", func(t *testing.T) {
		tasks, err := attempts(ctxFor(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			task := tasks[name]
			st := task.Status
			if st.Attempts != maxRetry+1 || st.RetryCount != maxRetry {
				t.Errorf("%s: attempts %d retryCount %d, want %d %d", name, st.Attempts, st.RetryCount, maxRetry+1, maxRetry)
			}
			expectCondition(t, task, v1alpha1.ConditionFailed, metav1.ConditionTrue, string(v1alpha1.ReasonRetriesExhausted))
			if len(st.History) != 1 || st.History[0].Attempts != maxRetry+1 || st.History[0].Result != v1alpha1.RunResultFailed {
				t.Errorf("%s: history %+v, want one Failed run with %d attempts", name, st.History, maxRetry+1)
			}
		}
		statuses.Check(t)
	})

	// The restarts re-read every Task; one that had finished before must
	// come out of that unchanged (contract: lastError is the last failed
	// attempt's reason plus the tail of its output).
	t.Run("finished Task unchanged", func(t *testing.T) {
		after := mustGetTask(t, ns, "finished")
		if after.Status.Phase != v1alpha1.PhaseFailed || after.Status.Attempts != 1 {
			t.Errorf("phase %q attempts %d, want Failed 1", after.Status.Phase, after.Status.Attempts)
		}
		if !strings.Contains(finished.Status.LastError, finishedMsg) {
			t.Errorf("before the kills, lastError %q lacked the pod's message %q", finished.Status.LastError, finishedMsg)
		}
		if after.Status.LastError != finished.Status.LastError {
			t.Errorf("the restarts rewrote lastError of a finished Task:\n before: %q\n after:  %q", finished.Status.LastError, after.Status.LastError)
		}
	})
}
