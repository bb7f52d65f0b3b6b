//go:build reliability

package reliability

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
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
	"github.com/taskops/task-operator/internal/testutil"
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
		opts := []testutil.TaskOpt{testutil.Retries(2, 2, 2, 1), testutil.PodAnnotations(harness.SimDuration, strconv.Itoa(2+randIntn(5)))}
		if i%3 == 0 {
			opts = append(opts, testutil.PodAnnotations(harness.SimExitCode, "1"))
			want[name] = oneShotWant{v1alpha1.PhaseFailed, 3}
		} else {
			want[name] = oneShotWant{v1alpha1.PhaseSucceeded, 1}
		}
		out = append(out, testutil.NewTask(ns, name, opts...))
	}
	return out
}

// Scenario 3, leader failover: two replicas with --leader-elect; the
// leader is paused (SIGSTOP) while it works, past its lease (15 s); the
// standby takes over; the old leader, resumed (SIGCONT), must exit
// non-zero on finding it lost the lease, and must not act as leader
// meanwhile (internal/leader: its lease counts as held only up to the
// renew deadline after its last renewal was sent): no Job created after
// SIGCONT, none for the Tasks deleted during the pause, and no write once
// it has finished what it had in flight at the pause. That must be refused
// or harmless: no duplicate Job, no status step backwards, every Task ends
// right.
func TestS03LeaderFailover(t *testing.T) {
	n1, n2 := pick(60, 14), pick(30, 8)
	ns := s.newNamespace(t, "rel-leader", false)
	// A lease left by an earlier run would hold both replicas off for 15 s.
	ctx := ctxFor(t, 20*time.Second)
	if err := s.c.Delete(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: leaseName}}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	// Debug logs show the passes a replica skips because its lease lapsed.
	args := []string{"--leader-elect", "--leader-election-namespace=" + operatorNamespace, "--log-level=debug"}
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
		victims = append(victims, testutil.NewTask(ns, fmt.Sprintf("victim-%d", i), testutil.Retries(2, backoff, backoff, 1), testutil.PodAnnotations(harness.SimExitCode, "1")))
	}
	createAll(t, victims)
	createAll(t, failoverTasks(ns, "first", n1, want))
	var retryAt time.Time
	eventuallyTasks(t, 2*time.Minute, "half the first Tasks to be running or done, the victims Retrying", note(a, b), ns, func(ctx context.Context, ts map[string]*v1alpha1.Task) (bool, string) {
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
	createAll(t, failoverTasks(ns, "second", n2, want))
	time.Sleep(300 * time.Millisecond)
	// What it sends from here to 2 s after SIGCONT (settle, below) is what
	// it had in flight at the pause (and a few ms of work before it).
	atPause, err := operatorRequests(a.MetricsURL())
	if err != nil {
		t.Fatalf("scraping replica-a: %v", err)
	}
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
	// Count what the old leader still sends before it exits, a scrape
	// every 20 ms. On resume it first finishes what it was doing at the
	// pause: requests on the wire get their answers, and passes that
	// began before the pause (so while it held the lease) make their
	// remaining writes: a status patch or an event after a Job create.
	// That is over within 2 s (0.1-0.3 s in the full runs measured, see
	// inFlightEnd below); from then to its exit, every pass finds the
	// lease lapsed and the elector only reads the Lease: any write there is
	// the old leader acting on its stale cache.
	const settle = 2 * time.Second
	var settled, last clientCounts
	var settledAt time.Duration
	haveSettled, scrapes := false, 0
	for a.Alive() && time.Since(resumedAt) < 60*time.Second {
		at := time.Since(resumedAt)
		if c, err := operatorRequests(a.MetricsURL()); err == nil {
			if !haveSettled && at >= settle {
				settled, settledAt, haveSettled = c, at, true
			}
			last, scrapes = c, scrapes+1
		}
		time.Sleep(20 * time.Millisecond)
	}
	if scrapes == 0 {
		last = atPause
	}
	if !haveSettled {
		settled = last
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
	sent := last.minus(settled)
	inFlight := settled.minus(atPause)
	// A Job create it had in flight at the pause is logged only on resume;
	// the Job's creationTimestamp (below) tells it from one made after.
	createdLogged := jobNamesSince(after, "created Job", resumedAt)
	stoppedAfter := logLinesSince(after, "stopped attempt", resumedAt.Add(settle))
	lapsed := logLinesSince(after, "the leader lease lapsed", resumedAt)
	// When the passes it had begun before the pause were done: the last
	// line of a pass after SIGCONT other than a lapsed lease (a pass begun
	// after SIGCONT logs only that, as long as the lease check works).
	var inFlightEnd time.Duration
	for _, line := range linesSince(after, "reconcileID", resumedAt) {
		if bytes.Contains(line, []byte("the leader lease lapsed")) {
			continue
		}
		if ts, err := time.Parse("2006-01-02T15:04:05.000Z0700", string(bytes.Fields(line)[0])); err == nil && ts.Sub(resumedAt) > inFlightEnd {
			inFlightEnd = ts.Sub(resumedAt)
		}
	}
	inFlightEndText := "none after SIGCONT"
	if inFlightEnd > 0 {
		inFlightEndText = harness.Secs(inFlightEnd) + " after SIGCONT"
	}
	if inFlightEnd > settle {
		t.Logf("replica-a's passes logged more than a lapsed lease until %s after SIGCONT, past the %s the write count below leaves to what it had in flight at the pause", harness.Secs(inFlightEnd), harness.Secs(settle))
	}
	if stoppedAfter > 0 {
		t.Errorf("the old leader stopped %d attempt(s) from %s after SIGCONT on (it exited %s after it); a replica whose lease lapsed must start or stop nothing (finding 2)",
			stoppedAfter, harness.Secs(settle), harness.Secs(exitAfter))
	}
	if sent.writes > 0 {
		t.Errorf("the old leader sent %.0f write(s) between %s after SIGCONT and its exit %s after it (requests %s; codes %s); a replica whose lease lapsed must write nothing (finding 2)",
			sent.writes, harness.Secs(settledAt), harness.Secs(exitAfter), fmtCounts(sent.byMethod), fmtCounts(sent.byCode))
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
		t.Errorf("CONTRACT VIOLATION (finding 2): the resumed old leader created %d Job(s) for Tasks deleted (and finalized by the new leader) while it was paused, from its stale cache when their retry fell due: %v (Tasks deleted at %s); the garbage collector removed them (lifetimes seen: %s; all gone %s after the check began)",
			len(late), late, victimsDeleted.UTC().Format(time.TimeOnly), strings.Join(lives, ", "), harness.Secs(gcTook))
	}
	if !b.Alive() {
		t.Errorf("replica-b exited: %v", b.ExitErr())
	}
	seen := jobs.All(t)
	var createdAfter, createdInFlight []string
	for _, name := range createdLogged {
		when := "never seen"
		for _, j := range seen {
			if j.Name == name {
				when = j.CreationTimestamp.UTC().Format(time.TimeOnly)
				if j.CreationTimestamp.Time.Before(resumedAt.Truncate(time.Second)) {
					createdInFlight = append(createdInFlight, name+" (created "+when+")")
					name = ""
				}
				break
			}
		}
		if name != "" {
			createdAfter = append(createdAfter, name+" (created "+when+")")
		}
	}
	if len(createdAfter) > 0 {
		t.Errorf("the old leader created %d Job(s) after SIGCONT (SIGCONT at %s; it exited %s after it): %v; a replica whose lease lapsed must start nothing (finding 2)",
			len(createdAfter), resumedAt.UTC().Format("15:04:05.000"), harness.Secs(exitAfter), createdAfter)
	}
	if len(createdInFlight) > 0 {
		t.Logf("the old leader logged %d Job(s) as created after SIGCONT that the API server had created before it (in flight at the pause): %v", len(createdInFlight), createdInFlight)
	}
	checkOneShots(t, ns, seen, want)
	events := checkMonitor(t, mon)
	figure(t, "%d victims deleted during the pause: %d Jobs created for them afterwards; %d+%d Tasks; leader paused (SIGSTOP) for %s: the standby (%s) took over %s after the pause; after SIGCONT the old leader exited with code %d after %s (\"leader election lost\"); from %s after SIGCONT to its exit it sent %.0f writes (requests %s; codes %s; %d scrapes); after SIGCONT it created %d Jobs (its log names %d more whose create was in flight at the pause), stopped %d attempts and skipped %d passes as \"the leader lease lapsed\"; what it had in flight at the pause (last scrape before SIGSTOP to %s after SIGCONT; its last line from a pass begun before the pause: %s): %.0f writes (requests %s; codes %s); all Tasks finished %s later; %d Jobs, %d duplicates, %d Task versions watched, %d steps backwards",
		len(victims), len(late), n1, n2, harness.Secs(pausedFor), holderB, harness.Secs(takeover), code, harness.Secs(exitAfter), harness.Secs(settledAt), sent.writes, fmtCounts(sent.byMethod), fmtCounts(sent.byCode), scrapes,
		len(createdAfter), len(createdInFlight), stoppedAfter, lapsed, harness.Secs(settledAt), inFlightEndText, inFlight.writes, fmtCounts(inFlight.byMethod), fmtCounts(inFlight.byCode), harness.Secs(rest), len(seen), len(harness.Duplicates(seen)), events, len(mon.Problems()))
}

func tailBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// jobNamesSince returns the "job" field of the log lines holding what that
// are stamped at or after since.
func jobNamesSince(log []byte, what string, since time.Time) []string {
	var out []string
	for _, line := range linesSince(log, what, since) {
		if m := jobField.FindSubmatch(line); m != nil {
			out = append(out, string(m[1]))
		}
	}
	return out
}

var jobField = regexp.MustCompile(`"job": "([^"]+)"`)

// logLinesSince counts the log lines holding what that are stamped at or
// after since (console format: the line starts with an RFC 3339 time).
func logLinesSince(log []byte, what string, since time.Time) int {
	return len(linesSince(log, what, since))
}

func linesSince(log []byte, what string, since time.Time) [][]byte {
	var out [][]byte
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
			out = append(out, line)
		}
	}
	return out
}
