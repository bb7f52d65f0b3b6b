//go:build reliability

package reliability

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// Scenario 1, crash storm: 200 Tasks (40 fast) with maxRetry 3, every third
// one failing every attempt (so 4 attempts) and the rest succeeding at once,
// pods running 1-4 s; the operator is killed with SIGKILL 5 times (3 fast)
// at random moments and restarted after a random 0-3 s. Every Task
// finishes as it must, no attempt gets a second Job, no status moves
// backwards. The namespace is kept: the idle scenario counts writes over
// these finished Tasks.
func TestS01CrashStorm(t *testing.T) {
	n := pick(200, 30)
	kills := pick(5, 3)
	ns := s.newNamespace(t, "rel-crash", true)
	op := s.startOperator(t, "op", false)
	jobs := harness.RecordJobs(t, s.c, ns)
	mon := harness.MonitorStatus(t, s.c, ns)
	tasks, want := stormTasks(ns, "storm", n, 4, nil)
	start := time.Now()
	took := createAll(t, tasks)
	t.Logf("created %d Tasks in %s (%d failing every attempt, %d succeeding)", n, harness.Secs(took), (n+2)/3, n-(n+2)/3)

	status := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ts, err := listTasks(ctx, ns)
		if err != nil {
			return err.Error()
		}
		n, _ := countJobs(ctx, ns)
		return fmt.Sprintf("%d Jobs; %s", n, phaseCounts(ts))
	}
	downs, readies := killStorm(t, op, kills, start, status)
	rest := waitFinished(t, ns, n, pick(15*time.Minute, 5*time.Minute), op)
	total := time.Since(start)

	seen := jobs.All(t)
	checkOneShots(t, ns, seen, want)
	events := checkMonitor(t, mon)
	if op.Starts() != kills+1 {
		t.Errorf("the operator was started %d times, want %d", op.Starts(), kills+1)
	}
	var sumDown time.Duration
	for _, d := range downs {
		sumDown += d
	}
	figure(t, "%d Tasks (maxRetry %d, %d failing every attempt), %d SIGKILLs at random moments (total downtime %s): all finished %s after creation (%s after the last restart); %d Jobs for %d expected attempts, 0 duplicates wanted (got %d); %d Task versions watched, %d steps backwards",
		n, stormMaxRetry, (n+2)/3, kills, harness.Secs(sumDown), harness.Secs(total), harness.Secs(rest), len(seen), expectedAttempts(want), len(harness.Duplicates(seen)), events, len(mon.Problems()))
	t.Logf("restart readiness: %s", joinDurations(readies))
}

// killStorm kills the operator with SIGKILL kills times at random moments
// (2-12 s apart, 2-6 s fast) and restarts it after a random 0-3 s; status
// says what the namespace looked like at each kill. It returns each
// downtime and how long each restart took to be ready.
func killStorm(t *testing.T, op *harness.Operator, kills int, start time.Time, status func() string) (downs, readies []time.Duration) {
	t.Helper()
	for k := 1; k <= kills; k++ {
		time.Sleep(randDuration(2*time.Second, pick(12*time.Second, 6*time.Second)))
		at := time.Since(start)
		if err := op.Kill(); err != nil {
			t.Fatal(err)
		}
		before := status()
		down := randDuration(0, 3*time.Second)
		time.Sleep(down)
		ready, err := op.Start()
		if err != nil {
			t.Fatalf("restart %d: %v", k, err)
		}
		downs, readies = append(downs, down), append(readies, ready)
		t.Logf("kill %d (SIGKILL) at +%s: %s; down %s, /readyz %s after the restart", k, harness.Secs(at), before, harness.Secs(down), harness.Secs(ready))
	}
	return downs, readies
}

func expectedAttempts(want map[string]oneShotWant) int {
	n := 0
	for _, w := range want {
		n += int(w.attempts)
	}
	return n
}

func joinDurations(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = harness.Secs(d)
	}
	return strings.Join(parts, ", ")
}

// stormMaxRetry is the maxRetry of the crash storms' Tasks.
const stormMaxRetry = 3

// stormTasks are scenario 1's Tasks, named prefix-NNN: n with maxRetry
// stormMaxRetry whose pods run 1 to maxSeconds s, every third failing
// every attempt, and what each must end as; more, when set, adds options
// to the i-th.
func stormTasks(ns, prefix string, n, maxSeconds int, more func(i int) []testutil.TaskOpt) ([]*v1alpha1.Task, map[string]oneShotWant) {
	want := map[string]oneShotWant{}
	var tasks []*v1alpha1.Task
	for i := range n {
		name := fmt.Sprintf("%s-%03d", prefix, i)
		dur := strconv.Itoa(1 + randIntn(maxSeconds))
		opts := []testutil.TaskOpt{testutil.Retries(stormMaxRetry, 1, 4, 2), testutil.PodAnnotations(harness.SimDuration, dur)}
		if more != nil {
			opts = append(opts, more(i)...)
		}
		want[name] = oneShotWant{v1alpha1.PhaseSucceeded, 1}
		if i%3 == 0 {
			opts = append(opts, testutil.PodAnnotations(harness.SimExitCode, "1", harness.SimMessage, "reliability: attempt failed"))
			want[name] = oneShotWant{v1alpha1.PhaseFailed, stormMaxRetry + 1}
		}
		tasks = append(tasks, testutil.NewTask(ns, name, opts...))
	}
	return tasks, want
}
