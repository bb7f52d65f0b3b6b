//go:build reliability

package reliability

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/test/harness"
)

// stopAPIServer stops the cluster's kube-apiserver (SIGTERM, SIGKILL after
// 5 s: the scenario wants a bounded outage) and returns its command line,
// to start it again the same way.
func stopAPIServer(t *testing.T) []string {
	t.Helper()
	args, err := s.cluster.StopComponent("kube-apiserver", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return args
}

// startAPIServer starts kube-apiserver with args the way
// hack/local-cluster.sh does and returns when /readyz says ok, with how
// long that took.
func startAPIServer(t *testing.T, args []string) time.Duration {
	t.Helper()
	start := time.Now()
	if err := s.cluster.StartComponent("kube-apiserver", args, "by reliability "+t.Name()); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 2*time.Minute, "kube-apiserver /readyz", nil, func(ctx context.Context) (bool, string) {
		return s.cluster.APIServerReady(ctx)
	})
	return time.Since(start)
}

// Scenario 2: the API server restarts under load (100 Tasks, 30 fast, a
// third failing every attempt with maxRetry 2). The operator (one process,
// no leader election) is never restarted: it must recover by itself, and
// the invariants hold.
func TestS02APIServerRestart(t *testing.T) {
	slowScenario(t)
	n := pick(100, 30)
	down := pick(15*time.Second, 8*time.Second)
	ns := s.newNamespace(t, "rel-apiserver", false)
	op := s.startOperator(t, "op", false)
	jobs := harness.RecordJobs(t, s.c, ns)
	mon := harness.MonitorStatus(t, s.c, ns)
	want := map[string]oneShotWant{}
	start := time.Now()
	createAll(t, failoverTasks(ns, "load", n, want))
	waitForTasks(t, 2*time.Minute, "a third of the Tasks to have started", ns, op, n/3, func(task *v1alpha1.Task) bool {
		return task.Status.Attempts > 0
	})
	before, _ := listTasks(ctxFor(t, 10*time.Second), ns)
	logOffset := len(op.Log())
	stopAt := time.Now()
	args := stopAPIServer(t)
	stopped := time.Since(stopAt)
	t.Logf("kube-apiserver stopped %s after the Tasks were created (SIGTERM, gone in %s): %s", harness.Secs(stopAt.Sub(start)), harness.Secs(stopped), phaseCounts(before))
	time.Sleep(down - stopped)
	startAt := time.Now()
	readyIn := startAPIServer(t, args)
	readyAt := time.Now()
	// Until its authorizer has loaded the roles, a starting API server
	// refuses requests it will allow a moment later.
	s.excuse(startAt, readyAt.Add(5*time.Second))
	t.Logf("kube-apiserver restarted after %s down; /readyz in %s", harness.Secs(readyAt.Sub(stopAt)-readyIn), harness.Secs(readyIn))

	// Recovery: the operator's first Job created after the API server
	// came back.
	recovered := harness.Eventually(t, 3*time.Minute, "the operator to create a Job again", note(op), func(ctx context.Context) (bool, string) {
		seen, err := jobs.Snapshot(ctx)
		if err != nil {
			return false, err.Error()
		}
		return len(jobsCreatedAfter(seen, readyAt)) > 0, fmt.Sprintf("%d Jobs so far", len(seen))
	})
	rest := waitFinished(t, ns, n, pick(10*time.Minute, 5*time.Minute), op)
	seen := jobs.All(t)
	checkOneShots(t, ns, seen, want)
	events := checkMonitor(t, mon)
	if !op.Alive() || op.Starts() != 1 {
		t.Errorf("the operator did not ride it out: alive %v, started %d times (exit: %v)", op.Alive(), op.Starts(), op.ExitErr())
	}
	outage := op.Log()[logOffset:]
	errLines := bytes.Count(outage, []byte("\tERROR\t"))
	refused := bytes.Count(outage, []byte("connection refused"))
	_, rbacAtStart := rbacRefusals(outage)
	lostEvents := bytes.Count(outage, []byte("Server rejected event (will not retry!)"))
	figure(t, "%d Tasks (maxRetry 2, a third failing every attempt); kube-apiserver stopped %s after creation for %s (SIGTERM; back to /readyz in %s); the operator (never restarted, still running: %v) created its next Job %s after /readyz and finished all Tasks %s after it (%s in all); operator log during and after the outage: %d ERROR lines, %d \"connection refused\", %d requests refused by RBAC while the API server started (before /readyz), %d events dropped (\"Server rejected event (will not retry!)\"); %d Jobs, %d duplicates, %d Task versions watched, %d steps backwards",
		n, harness.Secs(stopAt.Sub(start)), harness.Secs(readyAt.Sub(stopAt)-readyIn), harness.Secs(readyIn), op.Alive(), harness.Secs(recovered), harness.Secs(recovered+rest), harness.Secs(time.Since(start)),
		errLines, refused, rbacAtStart, lostEvents, len(seen), len(harness.Duplicates(seen)), events, len(mon.Problems()))
}
