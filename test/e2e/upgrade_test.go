//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/internal/version"
	"github.com/taskops/task-operator/test/harness"
	"github.com/taskops/task-operator/test/localcluster"
)

// upgradeFrom is the previous release, v0.1.0: the last commit before the
// release tooling (install.yaml, chart, version labels) and the bounded pod
// fields. The test builds its image and renders its config/default from
// `git archive` of this commit, so it needs the repository's history.
const (
	upgradeFrom        = "5384f57777f5b53da6fbc8bad81da26057eab745"
	upgradeFromVersion = "v0.1.0"
)

// An upgrade a platform team makes: install the previous release, create
// Tasks in every state an upgrade can catch them in, apply this release
// (CRDs and operator) over it, and check that nothing is done twice or
// lost and that every Task ends as it would have without the upgrade; then
// downgrade back and check that no Task or status is lost.
//
// Caught by the upgrade: a one-shot Task waiting out its retry backoff, a
// running attempt, a cron Task with history, a queued Task behind a full
// TaskQueue, a suspended Task, and a failed Task whose notification is
// being sent.
//
// Not parallel: the operator process of TestMain is stopped meanwhile.
func TestUpgradingFromThePreviousReleaseLosesAndRepeatsNothing(t *testing.T) {
	requireRealNode(t)
	state, err := env.cluster.State()
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(env.ws.Root, "tmp", "e2e-upgrade")
	must(t, os.RemoveAll(work))
	src := filepath.Join(work, "src")
	must(t, os.MkdirAll(src, 0o755))
	start := time.Now()
	sh(t, 2*time.Minute, "", fmt.Sprintf("git -C %q archive %s | tar -x -C %q", env.ws.Root, upgradeFrom, src))
	// Built outside any checkout's VCS stamping (src sits in this
	// repository's ignored tmp/).
	sh(t, 10*time.Minute, "GOFLAGS=-buildvcs=false", fmt.Sprintf("make -C %q -s image VERSION=%s REVISION=%s", src, upgradeFromVersion, upgradeFrom))
	must(t, env.cluster.LoadImages(filepath.Join(src, "bin", "image", "task-operator.tar")))
	t.Logf("built and loaded %s (%s) in %s", upgradeFromVersion, upgradeFrom[:7], harness.Secs(time.Since(start)))

	oldOverlay := writeOverlay(t, filepath.Join(work, "old"), "../src/config/default", upgradeFromVersion, 1, state)
	newOverlay := writeOverlay(t, filepath.Join(work, "new"), "../../../config/default", version.Version, 1, state)

	waitNamespaceGone(t, deployNamespace)
	must(t, env.op.Stop())
	// Cleanups run last-registered first, each even if one before failed
	// the test: the operator process restarts whatever the undo said.
	t.Cleanup(func() {
		if _, err := env.op.Start(); err != nil {
			t.Errorf("restarting the operator process: %v", err)
		}
	})
	t.Cleanup(func() {
		undeploy(t)
		restoreCRDs(t) // the downgrade left v0.1.0's
	})
	applyRelease(t, oldOverlay, upgradeFromVersion)

	// A webhook on the node's bridge that answers after 9 s (the sender
	// gives a try 10 s), so the notification is still being sent when the
	// upgrade starts.
	var notified atomic.Int32
	l := listenOnBridge(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		notified.Add(1)
		time.Sleep(9 * time.Second)
		w.WriteHeader(http.StatusOK)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	hook := "http://" + l.Addr().String() + "/hook"

	ns := makeNamespace(t, "e2e-upgrade")
	qns := makeNamespace(t, "e2e-upgrade-queue")
	jobs := harness.RecordJobs(t, env.c, ns)
	queued := harness.RecordJobs(t, env.c, qns)
	create(t, testutil.NewTask(ns, "backoff", testutil.Shell("exit 3"), testutil.Retries(1, 60, 60, 2)))
	create(t, testutil.NewTask(ns, "running", testutil.Shell("sleep 75; echo finished")))
	create(t, testutil.NewTask(ns, "cron", testutil.Shell("echo tick"), testutil.Schedule("@every 10s"), testutil.HistoryLimits(20, 20)))
	create(t, testutil.NewTask(ns, "suspended", testutil.Shell("echo never"), testutil.Suspend(true)))
	create(t, testutil.NewTaskQueue(qns, "one", 1))
	create(t, testutil.NewTask(qns, "holder", testutil.Shell("sleep 75"), testutil.Queue("one")))
	// The waiter joins the line once the holder holds the one place:
	// created together, either could be admitted first.
	waitPhase(t, qns, "holder", v1alpha1.PhaseRunning, 60*time.Second)
	create(t, testutil.NewTask(qns, "waiter", testutil.Shell("echo my turn"), testutil.Queue("one")))

	// Every Task in the state the upgrade should catch it in (each state
	// lasts a minute or more), the notification last: it is in flight for
	// 9 s.
	eventually(t, 90*time.Second, "the Tasks to reach their states before the upgrade", func(ctx context.Context) (bool, string) {
		var notes []string
		ok := true
		check := func(task string, cond bool, detail string) {
			if !cond {
				ok = false
				notes = append(notes, task+": "+detail)
			}
		}
		get := func(ns, name string) *v1alpha1.Task {
			task, err := harness.GetTask(ctx, env.c, ns, name)
			if err != nil {
				return &v1alpha1.Task{}
			}
			return task
		}
		b, r, c, h, w := get(ns, "backoff"), get(ns, "running"), get(ns, "cron"), get(qns, "holder"), get(qns, "waiter")
		check("backoff", b.Status.Phase == v1alpha1.PhaseRetrying, string(b.Status.Phase))
		check("running", r.Status.Phase == v1alpha1.PhaseRunning, string(r.Status.Phase))
		check("cron", len(c.Status.History) >= 1, fmt.Sprintf("%d runs", len(c.Status.History)))
		check("holder", h.Status.Phase == v1alpha1.PhaseRunning, string(h.Status.Phase))
		check("waiter", w.Status.Phase == v1alpha1.PhaseQueued, string(w.Status.Phase))
		return ok, strings.Join(notes, "; ")
	})
	create(t, testutil.NewTask(ns, "notified", testutil.Shell("exit 4"), testutil.Notify(hook, v1alpha1.NotifyFormatJSON, v1alpha1.NotifyOnFailed)))
	eventually(t, 60*time.Second, "the failed Task's notification to be in flight", func(context.Context) (bool, string) {
		return notified.Load() == 1, fmt.Sprintf("%d requests", notified.Load())
	})
	before := map[string]*v1alpha1.Task{}
	for _, name := range []string{"backoff", "running", "cron", "suspended", "notified"} {
		before[name] = mustGetTask(t, ns, name)
	}
	runningJob := jobOf(t, ns, "running")

	upgraded := time.Now()
	applyRelease(t, newOverlay, version.Version)
	t.Logf("upgraded to %s: the new operator Available %s after the apply", version.Version, harness.Secs(time.Since(upgraded)))

	// Every Task ends as it would have without the upgrade.
	waitPhase(t, ns, "running", v1alpha1.PhaseSucceeded, 150*time.Second)
	waitPhase(t, ns, "backoff", v1alpha1.PhaseFailed, 150*time.Second)
	waitPhase(t, qns, "holder", v1alpha1.PhaseSucceeded, 150*time.Second)
	waitPhase(t, qns, "waiter", v1alpha1.PhaseSucceeded, 150*time.Second)
	cronRuns := len(before["cron"].Status.History)
	eventually(t, 90*time.Second, "the cron Task to run twice more", func(ctx context.Context) (bool, string) {
		task, err := harness.GetTask(ctx, env.c, ns, "cron")
		if err != nil {
			return false, err.Error()
		}
		return len(task.Status.History) >= cronRuns+2, fmt.Sprintf("%d runs", len(task.Status.History))
	})
	eventually(t, 60*time.Second, "the notification in flight to be answered", func(ctx context.Context) (bool, string) {
		all := notificationJobsIn(t, ns)
		done := 0
		for _, j := range all {
			if j.Status.Succeeded > 0 {
				done++
			}
		}
		return len(all) == 1 && done == 1, fmt.Sprintf("%d notification Jobs, %d succeeded", len(all), done)
	})

	checks := []struct {
		what string
		ok   bool
	}{
		{"the running attempt's Job is the one it had (not re-created)", jobOf(t, ns, "running").UID == runningJob.UID},
		{"the running Task ran one attempt", mustGetTask(t, ns, "running").Status.Attempts == 1},
		{"the retrying Task ran its second attempt and no third", mustGetTask(t, ns, "backoff").Status.Attempts == 2},
		{"the suspended Task is suspended and has no Job", mustGetTask(t, ns, "suspended").Status.Phase == v1alpha1.PhaseSuspended && len(tasksJobs(snapshot(t, jobs), "suspended")) == 0},
		{"the notification was sent once", notified.Load() == 1},
		{"the queue never ran two at once", queued.MaxActive() <= 1},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("after the upgrade: not so that %s", c.what)
		}
	}
	for _, rec := range []*harness.JobRecorder{jobs, queued} {
		for key, js := range harness.Duplicates(snapshot(t, rec)) {
			t.Errorf("after the upgrade: attempt %v had %d Jobs %v", key, len(js), js)
		}
	}
	cron := mustGetTask(t, ns, "cron")
	seen := map[string]bool{}
	for _, h := range cron.Status.History {
		if seen[h.RunID] {
			t.Errorf("the cron Task's history has run %s twice: %+v", h.RunID, cron.Status.History)
		}
		seen[h.RunID] = true
	}

	// Downgrade: the previous release takes over again and loses nothing.
	downgraded := time.Now()
	applyRelease(t, oldOverlay, upgradeFromVersion)
	t.Logf("downgraded to %s: Available %s after the apply", upgradeFromVersion, harness.Secs(time.Since(downgraded)))
	for name, was := range before {
		now := mustGetTask(t, ns, name)
		if len(now.Status.History) < len(was.Status.History) || now.Status.Attempts < was.Status.Attempts {
			t.Errorf("%s after the downgrade: %d runs and %d attempts, had %d and %d", name, len(now.Status.History), now.Status.Attempts, len(was.Status.History), was.Status.Attempts)
		}
	}
	runs := len(mustGetTask(t, ns, "cron").Status.History)
	eventually(t, 60*time.Second, "the cron Task to run under the previous release again", func(ctx context.Context) (bool, string) {
		task, err := harness.GetTask(ctx, env.c, ns, "cron")
		if err != nil {
			return false, err.Error()
		}
		return len(task.Status.History) > runs, fmt.Sprintf("%d runs", len(task.Status.History))
	})
	for _, rec := range []*harness.JobRecorder{jobs, queued} {
		for key, js := range harness.Duplicates(snapshot(t, rec)) {
			t.Errorf("after the downgrade: attempt %v had %d Jobs %v", key, len(js), js)
		}
	}
}

// writeOverlay writes a kustomization of base running image tag with
// replicas manager pods, which reach the API server on the node's bridge
// (no kube-proxy here).
func writeOverlay(t *testing.T, dir, base, tag string, replicas int, state localcluster.State) string {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(fmt.Sprintf(`# Written by test/e2e (writeOverlay).
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
images:
- name: ghcr.io/taskops/task-operator
  newTag: %s
patches:
- target: {kind: Deployment, name: task-operator-controller-manager}
  patch: |-
    - {op: replace, path: /spec/replicas, value: %d}
    - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: KUBERNETES_SERVICE_HOST, value: "%s"}}
    - {op: add, path: /spec/template/spec/containers/0/env/-, value: {name: KUBERNETES_SERVICE_PORT, value: "%s"}}
`, base, tag, replicas, state.BridgeIP, state.APIServerPort)), 0o644))
	return dir
}

// restoreCRDs applies this release's CRDs again, for the suite's other
// tests, after a test deleted or replaced them, and waits until they serve.
// Both are tried again until then: an apply that lands on a CRD still
// being deleted is undone by that deletion, and the wait then fails at
// once (it did once, after the uninstall test), so the next round applies
// again. A failure says what kubectl said.
func restoreCRDs(t *testing.T) {
	t.Helper()
	eventually(t, 90*time.Second, "the restored CRDs to be established", func(ctx context.Context) (bool, string) {
		if out, err := env.runKubectl(ctx, "apply", "--server-side", "--force-conflicts", "-k", filepath.Join(env.ws.Root, "config", "crd")); err != nil {
			return false, fmt.Sprintf("apply: %v: %s", err, out)
		}
		out, err := env.runKubectl(ctx, "wait", "--for=condition=Established", "crd/tasks.batch.taskops.io", "crd/taskqueues.batch.taskops.io", "crd/taskcalendars.batch.taskops.io", "--timeout=5s")
		if err != nil {
			return false, fmt.Sprintf("wait: %v: %s", err, out)
		}
		return true, ""
	})
}

// applyRelease applies an overlay as `kubectl apply --server-side` of a
// release's install.yaml would, and waits until every manager pod runs
// tag.
func applyRelease(t *testing.T, overlay, tag string) {
	t.Helper()
	kubectl(t, 60*time.Second, "apply", "--server-side", "--force-conflicts", "-k", overlay)
	kubectl(t, 150*time.Second, "-n", deployNamespace, "rollout", "status", "deployment/task-operator-controller-manager", "--timeout=140s")
	eventually(t, 60*time.Second, "the manager pods to run "+tag, func(ctx context.Context) (bool, string) {
		pods := managerPods(t)
		for _, p := range pods {
			if !strings.HasSuffix(p.Spec.Containers[0].Image, ":"+tag) || p.Status.Phase != "Running" {
				return false, fmt.Sprintf("pods %v", harness.PodPhases(pods))
			}
		}
		return len(pods) == 1, fmt.Sprintf("pods %v", harness.PodPhases(pods))
	})
}

// jobOf is the one attempt Job of a Task with a single attempt.
func jobOf(t *testing.T, ns, task string) batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	must(t, env.c.List(ctxFor(t, 10*time.Second), &list))
	var found []batchv1.Job
	for _, j := range list.Items {
		if j.Namespace == ns && j.Labels[v1alpha1.LabelTask] == task && j.Labels[v1alpha1.LabelAttempt] != "" {
			found = append(found, j)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s/%s has %d attempt Jobs, want 1", ns, task, len(found))
	}
	return found[0]
}

// snapshot is every Job a recorder saw so far, recording on.
func snapshot(t *testing.T, rec *harness.JobRecorder) []batchv1.Job {
	t.Helper()
	jobs, err := rec.Snapshot(ctxFor(t, 30*time.Second))
	must(t, err)
	return jobs
}

func tasksJobs(jobs []batchv1.Job, task string) []batchv1.Job {
	var out []batchv1.Job
	for _, j := range jobs {
		if j.Labels[v1alpha1.LabelTask] == task {
			out = append(out, j)
		}
	}
	return out
}

// sh runs a shell command with extra environment (KEY=VALUE, or empty).
func sh(t *testing.T, timeout time.Duration, envVar, script string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(timeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Env = os.Environ()
	if envVar != "" {
		cmd.Env = append(cmd.Env, envVar)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}
