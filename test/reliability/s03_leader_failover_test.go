//go:build reliability

package reliability

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/test/harness"
)

// leaseHolder is the holder of the operator's leader election Lease.
func leaseHolder(ctx context.Context) (string, error) {
	l := &coordv1.Lease{}
	if err := s.c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: leaseName}, l); err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *l.Spec.HolderIdentity, nil
}

var acquired = []byte("Successfully acquired lease")

// leads reports whether an operator's log says it acquired the lease since
// offset.
func leads(op *harness.Operator, offset int) bool {
	log := op.Log()
	return len(log) > offset && bytes.Contains(log[offset:], acquired)
}

// Tasks for the leader and failover scenarios: every third one fails every
// attempt (maxRetry 2, 2 s backoff), pods run 2-6 s.
func failoverTasks(ns, prefix string, n int, want map[string]oneShotWant) []*v1alpha1.Task {
	var out []*v1alpha1.Task
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		opts := []harness.TaskOpt{harness.Retries(2, 2, 2, 1), harness.PodAnnotations(harness.SimDuration, strconv.Itoa(2+randIntn(5)))}
		if i%3 == 0 {
			opts = append(opts, harness.PodAnnotations(harness.SimExitCode, "1"))
			want[name] = oneShotWant{v1alpha1.PhaseFailed, 3}
		} else {
			want[name] = oneShotWant{v1alpha1.PhaseSucceeded, 1}
		}
		out = append(out, harness.ShellTask(ns, name, opts...))
	}
	return out
}

// Scenario 3, leader failover: two replicas with --leader-elect; the
// leader is paused (SIGSTOP) while it works, past its lease (15 s); the
// standby takes over; the old leader, resumed (SIGCONT), must exit
// non-zero on finding it lost the lease, and whatever it still wrote must
// be refused or harmless: no duplicate Job, no status step backwards, every
// Task ends right.
func TestS03LeaderFailover(t *testing.T) {
	n1, n2 := pick(60, 14), pick(30, 8)
	ns := s.newNamespace(t, "rel-leader", false)
	// A lease left by an earlier run would hold both replicas off for 15 s.
	ctx := ctxFor(t, 20*time.Second)
	if err := s.c.Delete(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: leaseName}}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	args := []string{"--leader-elect", "--leader-election-namespace=" + operatorNamespace}
	a := s.startOperator(t, "replica-a", true, args...)
	harness.Eventually(t, 60*time.Second, "replica-a to lead", note(a), func(context.Context) (bool, string) {
		return leads(a, 0), "no \"Successfully acquired lease\" in its log yet"
	})
	b := s.startOperator(t, "replica-b", true, args...)
	bLogStart := 0
	if leads(b, bLogStart) {
		t.Fatal("replica-b leads while replica-a holds the lease")
	}
	holderA, err := leaseHolder(ctxFor(t, 10*time.Second))
	if err != nil || holderA == "" {
		t.Fatalf("lease holder %q: %v", holderA, err)
	}
	jobs := harness.RecordJobs(t, s.c, ns)
	mon := harness.MonitorStatus(t, s.c, ns)

	want := map[string]oneShotWant{}
	start := time.Now()
	// Victims: Tasks waiting out a 30 s backoff when the leader is paused;
	// they are deleted (and finalized by the new leader) during the pause,
	// and their retry falls due before the old leader resumes.
	const backoff = 30
	var victims []*v1alpha1.Task
	for i := 0; i < pick(5, 3); i++ {
		victims = append(victims, harness.ShellTask(ns, fmt.Sprintf("victim-%d", i), harness.Retries(2, backoff, backoff, 1), harness.PodAnnotations(harness.SimExitCode, "1")))
	}
	createAll(t, victims)
	createAll(t, failoverTasks(ns, "first", n1, want))
	var retryAt time.Time
	harness.Eventually(t, 2*time.Minute, "half the first Tasks to be running or done, the victims Retrying", note(a, b), func(ctx context.Context) (bool, string) {
		ts, err := listTasks(ctx, ns)
		if err != nil {
			return false, err.Error()
		}
		k, v := 0, 0
		for _, task := range ts {
			if strings.HasPrefix(task.Name, "victim-") {
				if task.Status.Phase == v1alpha1.PhaseRetrying && task.Status.NextRetryTime != nil {
					v++
					if task.Status.NextRetryTime.After(retryAt) {
						retryAt = task.Status.NextRetryTime.Time
					}
				}
			} else if task.Status.Attempts > 0 {
				k++
			}
		}
		return k >= n1/2 && v == len(victims), phaseCounts(ts)
	})

	// A second burst, and the leader is paused in the middle of handling it.
	base, err := operatorRequests(a.MetricsURL())
	if err != nil {
		t.Fatalf("scraping replica-a: %v", err)
	}
	createAll(t, failoverTasks(ns, "second", n2, want))
	time.Sleep(300 * time.Millisecond)
	if err := a.Send(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()
	t.Logf("replica-a (leader, %s) paused with SIGSTOP %s after the first Tasks were created, 300ms into a burst of %d Tasks", holderA, harness.Secs(pausedAt.Sub(start)), n2)
	takeover := harness.Eventually(t, 90*time.Second, "replica-b to take over", note(a, b), func(ctx context.Context) (bool, string) {
		h, err := leaseHolder(ctx)
		if err != nil {
			return false, err.Error()
		}
		return h != holderA && h != "" && leads(b, bLogStart), "lease holder " + h
	})
	holderB, _ := leaseHolder(ctxFor(t, 10*time.Second))
	// The victims go; the new leader removes their finalizers.
	victimsDeleted := time.Now()
	for _, v := range victims {
		if err := s.c.Delete(ctxFor(t, 10*time.Second), v.DeepCopy()); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	harness.Eventually(t, time.Minute, "the victims to be gone", note(b), func(ctx context.Context) (bool, string) {
		left := 0
		for _, v := range victims {
			if _, err := harness.GetTask(ctx, s.c, ns, v.Name); err == nil {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d left", left)
	})
	// Let the new leader work a while with the old one still frozen, and
	// the victims' retry fall due (1 s resolution: a second more).
	time.Sleep(5 * time.Second)
	if wait := time.Until(retryAt.Add(2 * time.Second)); wait > 0 {
		time.Sleep(wait)
	}
	pausedFor := time.Since(pausedAt)
	logOffset := len(a.Log())
	if err := a.Send(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	// Count what the old leader still sends before it exits: from the
	// first scrape after SIGCONT to the last one before it is gone.
	var first, last clientCounts
	var firstAt time.Duration
	scrapes := 0
	for a.Alive() && time.Since(resumedAt) < 60*time.Second {
		if c, err := operatorRequests(a.MetricsURL()); err == nil {
			if scrapes == 0 {
				first, firstAt = c, time.Since(resumedAt)
			}
			last, scrapes = c, scrapes+1
		}
		time.Sleep(20 * time.Millisecond)
	}
	if scrapes == 0 {
		first, last = base, base
	}
	exitErr, exited := a.WaitExit(60 * time.Second)
	exitAfter := time.Since(resumedAt)
	if !exited {
		t.Fatalf("replica-a is still running %s after SIGCONT: a replica that lost its lease must exit", harness.Secs(exitAfter))
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(exitErr, &ee) {
		code = ee.ExitCode()
	}
	if exitErr == nil || code == 0 {
		t.Errorf("replica-a exited with %v (code %d) after losing its lease; want a non-zero exit", exitErr, code)
	}
	after := a.Log()[logOffset:]
	if !bytes.Contains(after, []byte("leader election lost")) {
		t.Errorf("replica-a's log after SIGCONT does not say \"leader election lost\":\n%s", tailBytes(after, 3000))
	}
	sent := last.minus(first)
	createdAfter := logLinesSince(after, "created Job", resumedAt)
	stoppedAfter := logLinesSince(after, "stopped attempt", resumedAt)
	if createdAfter+stoppedAfter > 0 {
		t.Logf("the old leader acted as leader for %s after SIGCONT (until its renew deadline passed): it created %d Job(s) and stopped %d attempt(s) then; harmless only because Job names are deterministic (the new leader finds them: no duplicate, see below) and status patches use optimistic locking (409s above)",
			harness.Secs(exitAfter), createdAfter, stoppedAfter)
	}

	rest := waitFinished(t, ns, n1+n2, pick(10*time.Minute, 5*time.Minute), b)
	// What became of the victims: no Job may be created after their
	// deletion (the contract: no Job for a Task being deleted).
	var late []string
	var lateJobs []batchv1.Job
	snap, _ := jobs.Snapshot(ctxFor(t, 20*time.Second))
	for _, j := range snap {
		if strings.HasPrefix(j.Labels[v1alpha1.LabelTask], "victim-") && !j.CreationTimestamp.Time.Before(victimsDeleted.Truncate(time.Second)) {
			late = append(late, fmt.Sprintf("%s (attempt %s, created %s)", j.Name, j.Labels[v1alpha1.LabelAttempt], j.CreationTimestamp.UTC().Format(time.TimeOnly)))
			lateJobs = append(lateJobs, j)
		}
	}
	gcTook := time.Duration(0)
	if len(late) > 0 {
		// Their owner is gone: the garbage collector should remove them.
		gcTook = harness.Eventually(t, 2*time.Minute, "the garbage collector to remove the victims' late Jobs", nil, func(ctx context.Context) (bool, string) {
			var list batchv1.JobList
			if err := s.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return false, err.Error()
			}
			n := 0
			for _, j := range list.Items {
				if strings.HasPrefix(j.Labels[v1alpha1.LabelTask], "victim-") {
					n++
				}
			}
			return n == 0, fmt.Sprintf("%d victim Jobs left", n)
		})
		var lives []string
		for _, j := range lateJobs {
			first, gone := jobs.Seen(j.UID)
			if !gone.IsZero() {
				lives = append(lives, harness.Secs(gone.Sub(first)))
			}
		}
		violation(t, "the resumed old leader created %d Job(s) for Tasks deleted (and finalized by the new leader) while it was paused, from its stale cache when their retry fell due: %v (Tasks deleted at %s); the garbage collector removed them (lifetimes seen: %s; all gone %s after the check began)",
			len(late), late, victimsDeleted.UTC().Format(time.TimeOnly), strings.Join(lives, ", "), harness.Secs(gcTook))
	}
	if !b.Alive() {
		t.Errorf("replica-b exited: %v", b.ExitErr())
	}
	seen := jobs.All(t)
	checkOneShots(t, ns, seen, want)
	events := checkMonitor(t, mon)
	figure(t, "%d victims deleted during the pause: %d Jobs created for them afterwards; %d+%d Tasks; leader paused (SIGSTOP) for %s: the standby (%s) took over %s after the pause; after SIGCONT the old leader exited with code %d after %s (\"leader election lost\"); from %s after SIGCONT to its exit it sent %.0f writes (requests %s; codes %s; %d scrapes) and logged %d \"created Job\", %d \"stopped attempt\"; all Tasks finished %s later; %d Jobs, %d duplicates, %d Task versions watched, %d steps backwards",
		len(victims), len(late), n1, n2, harness.Secs(pausedFor), holderB, harness.Secs(takeover), code, harness.Secs(exitAfter), harness.Secs(firstAt), sent.writes, fmtCounts(sent.byMethod), fmtCounts(sent.byCode), scrapes,
		createdAfter, stoppedAfter, harness.Secs(rest), len(seen), len(harness.Duplicates(seen)), events, len(mon.Problems()))
}

func tailBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// logLinesSince counts the log lines holding what that are stamped at or
// after since (console format: the line starts with an RFC 3339 time).
func logLinesSince(log []byte, what string, since time.Time) int {
	n := 0
	for _, line := range bytes.Split(log, []byte("\n")) {
		if !bytes.Contains(line, []byte(what)) {
			continue
		}
		f := bytes.Fields(line)
		if len(f) == 0 {
			continue
		}
		ts, err := time.Parse("2006-01-02T15:04:05.000Z0700", string(f[0]))
		if err != nil || !ts.Before(since.Truncate(time.Millisecond)) {
			n++
		}
	}
	return n
}
