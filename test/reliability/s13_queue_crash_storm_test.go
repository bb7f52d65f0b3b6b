//go:build reliability

package reliability

import (
	"fmt"
	"testing"
	"time"

	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// Scenario 13, crash storm in a queue: scenario 1's 200 Tasks (30 fast),
// every third failing every attempt, all in one TaskQueue of maxRunning 10,
// and the operator killed with SIGKILL 5 times (3 fast) at random moments.
// At no Job event are more than 10 attempts active; every Task finishes as
// it must, with no second Job for any attempt and at most maxRetry + 1
// attempts.
func TestS13QueueCrashStorm(t *testing.T) {
	n := pick(200, 30)
	kills := pick(5, 3)
	const maxRunning = 10
	ns := s.newNamespace(t, "rel-queue", false)
	op := s.startOperator(t, "op", false)
	jobs := harness.RecordJobs(t, s.c, ns)
	if err := s.c.Create(ctxFor(t, 10*time.Second), testutil.NewTaskQueue(ns, "storm", maxRunning)); err != nil {
		t.Fatal(err)
	}

	tasks, want := stormTasks(ns, "queued", n, 3, func(int) []testutil.TaskOpt {
		return []testutil.TaskOpt{testutil.Queue("storm"), testutil.Priority(int32(randIntn(3)))}
	})
	start := time.Now()
	createAll(t, tasks)
	killStorm(t, op, kills, start, func() string { return fmt.Sprintf("at most %d attempts active so far", jobs.MaxActive()) })
	waitFinished(t, ns, n, pick(20*time.Minute, 6*time.Minute), op)
	total := time.Since(start)

	seen := jobs.All(t)
	checkOneShots(t, ns, seen, want)
	if m := jobs.MaxActive(); m > maxRunning {
		t.Errorf("%d attempts were active at once; the queue admits %d", m, maxRunning)
	}
	figure(t, "%d Tasks in a queue of maxRunning %d (%d failing every attempt), %d SIGKILLs: all finished in %s; at most %d attempts active at any Job event (cap %d); %d Jobs for %d expected attempts, %d duplicates",
		n, maxRunning, (n+2)/3, kills, harness.Secs(total), jobs.MaxActive(), maxRunning, len(seen), expectedAttempts(want), len(harness.Duplicates(seen)))
}
