package main

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

// The chain scenario (spec.after, docs/chains.md): N downstream Tasks, each
// running after its own upstream Task, wait; then the N upstream one-shot
// Tasks are created in one burst, and their runs end within seconds of
// each other. Each upstream run must start exactly one downstream run.
// Measured in the same session: an upstream Task's create to its Job (the
// plain Task-to-Job latency) and an upstream run's end (its status
// showing the run finished, which is what wakes the downstream Task) to
// the downstream Job.

const chainNamespace = "bench-chain"

type chainResult struct {
	n int
	// taskToJob: upstream Task seen to its Job seen, seconds.
	taskToJob []float64
	// endToJob: upstream run seen finished to the downstream Job seen.
	endToJob []float64
	// downstreamJobs: the downstream Tasks' Jobs; duplicates: those beyond
	// one per downstream Task.
	downstreamJobs, duplicates int
}

func sessionChain(ctx context.Context, o *options, rep int) (*chainResult, error) {
	ss, err := startSession(ctx, o, o.fastKCM(), chainNamespace, fmt.Sprintf("chain-%d", rep))
	defer ss.end(ctx, o)
	if err != nil {
		return nil, err
	}
	cl, tr := ss.cl, ss.tr

	n := o.n
	if _, _, err := createAll(ctx, cl.c, n, o.workers, func(i int) client.Object {
		t := oneShotTask(chainNamespace, fmt.Sprintf("down-%05d", i))
		t.Spec.After = []v1alpha1.TaskAfter{{Task: upstreamName(i)}}
		return t
	}); err != nil {
		return nil, err
	}
	// Every downstream Task waits, Ready (a Task with spec.after is ready
	// between runs), before the upstream burst.
	if err := tr.waitFor(ctx, o, fmt.Sprintf("%d downstream Tasks Ready", n), o.timeout(5*time.Minute), func(_, ready, _, _, _ int) bool { return ready >= n }); err != nil {
		return nil, err
	}
	if _, _, err := createAll(ctx, cl.c, n, o.workers, func(i int) client.Object {
		return oneShotTask(chainNamespace, upstreamName(i))
	}); err != nil {
		return nil, err
	}
	if err := tr.waitFor(ctx, o, fmt.Sprintf("%d upstream and %d downstream Jobs", n, n), o.timeout(10*time.Minute), func(_, _, _, jobs, _ int) bool { return jobs >= 2*n }); err != nil {
		return nil, err
	}
	// Any duplicate would come within a pass or two of the first Job.
	if err := sleepUntil(ctx, time.Now().Add(5*time.Second)); err != nil {
		return nil, err
	}

	tasks, jobs := tr.snapshot()
	res := &chainResult{n: n}
	perDownstream := map[string]int{}
	for _, j := range jobs {
		switch {
		case strings.HasPrefix(j.task, "up-"):
			if t, ok := tasks[j.task]; ok {
				res.taskToJob = append(res.taskToJob, j.seen.Sub(t.seen).Seconds())
			}
		case strings.HasPrefix(j.task, "down-") && runs.IsChained(j.run):
			res.downstreamJobs++
			perDownstream[j.task]++
			var i int
			if _, err := fmt.Sscanf(j.task, "down-%05d", &i); err != nil {
				continue
			}
			if up, ok := tasks[upstreamName(i)]; ok {
				if end, ok := up.finished[runs.OneShot]; ok {
					res.endToJob = append(res.endToJob, j.seen.Sub(end).Seconds())
				}
			}
		}
	}
	for _, c := range perDownstream {
		res.duplicates += c - 1
	}
	o.logf("chain: %d downstream Jobs for %d upstream runs (%d duplicates); upstream Task->Job p99 %.3f s; upstream end->downstream Job p50 %.3f s p99 %.3f s",
		res.downstreamJobs, n, res.duplicates, percentile(res.taskToJob, 99), percentile(res.endToJob, 50), percentile(res.endToJob, 99))
	return res, nil
}

func upstreamName(i int) string { return fmt.Sprintf("up-%05d", i) }

// renderChain adds the rows of the chain section.
func (rs *results) renderChain(add adder) {
	cf := func(f func(*chainResult) float64) []float64 {
		out := make([]float64, len(rs.reps))
		for i, r := range rs.reps {
			out[i] = math.NaN()
			if r.chain != nil {
				out[i] = f(r.chain)
			}
		}
		return out
	}
	if !anyValue(cf(func(c *chainResult) float64 { return float64(c.n) })) {
		return
	}
	n := rs.o.n
	add("chain", fmt.Sprintf("%d upstream runs ending in one burst, each named by one downstream Task: downstream runs started", n),
		spread(cf(func(c *chainResult) float64 { return float64(c.downstreamJobs) }), ""), "")
	dup := cf(func(c *chainResult) float64 { return float64(c.duplicates) })
	add("chain", "  duplicates (a second Job for one upstream run)", spread(dup, ""), "0: "+verdict(dup, atMostOf(0)))
	end := cf(func(c *chainResult) float64 { return percentile(c.endToJob, 99) })
	plain := cf(func(c *chainResult) float64 { return percentile(c.taskToJob, 99) })
	add("chain", "  upstream run's end to the downstream Job, p50", secs(cf(func(c *chainResult) float64 { return percentile(c.endToJob, 50) })), "")
	add("chain", "  upstream run's end to the downstream Job, p99", secs(end), "")
	// The upstream Tasks' own latency: in this session each upstream
	// Task's creation also wakes its downstream Task (a missing upstream
	// appeared), so it is slower than the burst's.
	add("chain", "  the upstream Tasks' Task-to-Job p99 (same session; each create also wakes its downstream)", secs(plain), "")
	add("chain", "  end-to-downstream-Job p99 / the upstream Tasks' Task-to-Job p99 (ratio)", spread(ratios(end, plain), "x"), "")
	burst := make([]float64, len(rs.reps))
	for i, r := range rs.reps {
		burst[i] = math.NaN()
		if r.burst != nil {
			burst[i] = percentile(r.burst.taskToJob, 99)
		}
	}
	if anyValue(burst) {
		add("chain", "  end-to-downstream-Job p99 / the burst's plain Task-to-Job p99 (same repeat)", spread(ratios(end, burst), "x"), "")
	}
}
