package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ---------------------------------------------------------------------------
// Burst of pre-created Tasks
// ---------------------------------------------------------------------------

// precreatedResult is the burst without its load generator: N one-shot
// Tasks created first, with no operator running, then the operator
// started. Today's burst is the user's experience (Tasks arrive while the
// operator works, and the creates compete with its Jobs); this is the
// operator's own cost.
type precreatedResult struct {
	b0     b0Result
	oracle float64 // s from the pre-created oracle's process start to its N-th Job (oracle.go), before the operator
	// oracleAfter is the same oracle run again after the operator (0: not
	// run). The two bracket the operator on one cluster: their mean is
	// its bound (bound), so a cluster that slows or speeds up over the
	// session's minutes is not counted for or against the operator.
	oracleAfter float64
	firstToNth  float64 // s from the operator's start (its process) to the N-th Job
	ready       float64 // s from the operator's start to the N-th Task Ready
	writes      writeCount
	cpuSeconds  float64
	// cost is what the API server spent on the operator's creates, from its
	// start to the N-th Job (audit log).
	cost createCost
}

// bound is the oracle's time the operator is read against: the mean of
// the runs before and after it, or the one before when only it ran.
func (r *precreatedResult) bound() float64 {
	return bracketMean(r.oracle, nonZero(r.oracleAfter))
}

// sessionPrecreated: B0, the oracle, then N one-shot Tasks with no
// operator, then the operator, then (stopped, its Tasks gone) the oracle
// again.
func sessionPrecreated(ctx context.Context, o *options, rep int) (*precreatedResult, error) {
	cl, err := upCluster(ctx, o, o.fastKCM())
	if err != nil {
		return nil, err
	}
	defer cl.down(ctx, o)
	res := &precreatedResult{}
	if res.b0, err = runB0(ctx, o, cl, false); err != nil {
		return nil, fmt.Errorf("B0: %w", err)
	}
	if res.oracle, err = runOraclePre(ctx, o, cl); err != nil {
		return nil, fmt.Errorf("oracle: %w", err)
	}
	if err := cl.ensureNamespace(ctx, benchNamespace); err != nil {
		return nil, err
	}
	tr, err := startTracker(ctx, cl, benchNamespace, true)
	if err != nil {
		return nil, err
	}
	defer tr.close()
	if _, _, err := createAll(ctx, cl.c, o.n, o.workers, func(i int) client.Object {
		return oneShotTask(benchNamespace, fmt.Sprintf("pre-%05d", i))
	}); err != nil {
		return nil, err
	}
	n := o.n
	if err := tr.waitFor(ctx, o, fmt.Sprintf("%d Tasks seen", n), time.Minute, func(tasks, _, _, _, _ int) bool { return tasks >= n }); err != nil {
		return nil, err
	}
	if err := waitQuiet(ctx, o, cl, "the operator"); err != nil {
		return nil, err
	}
	before, err := takeSnap(ctx, cl, nil)
	if err != nil {
		return nil, err
	}
	// The clock starts when the process does: its cache sync and first
	// passes are part of the cost.
	start := time.Now()
	op, err := startOperator(ctx, o, cl, operatorSettings{}, fmt.Sprintf("precreated-%d", rep))
	if err != nil {
		return nil, err
	}
	defer op.stop(o)
	var prof <-chan error
	if o.profile {
		prof = op.cpuProfile(ctx, o, time.Duration(max(3*res.b0.t0, 5)*float64(time.Second)), filepath.Join(o.workDir, "profiles", fmt.Sprintf("precreated-%d.cpu.pprof", rep)))
	}
	if err := tr.waitFor(ctx, o, fmt.Sprintf("%d Jobs", n), o.timeout(2*time.Minute), func(_, _, _, jobs, _ int) bool { return jobs >= n }); err != nil {
		return nil, err
	}
	if err := tr.waitFor(ctx, o, fmt.Sprintf("%d Tasks Ready", n), o.timeout(10*time.Minute), func(_, ready, _, _, _ int) bool { return ready >= n }); err != nil {
		return nil, err
	}
	after, err := settledSnap(ctx, o, cl, op)
	if err != nil {
		return nil, err
	}
	o.logf("precreated diagnosis: %s", diagnose(before, after))
	if prof != nil {
		if err := <-prof; err != nil {
			o.logf("CPU profile: %v", err)
		}
	}
	res.cpuSeconds = after.op.Value("process_cpu_seconds_total")
	if res.writes, err = operatorWrites(cl, before, after, nil); err != nil {
		return nil, err
	}
	tasks, jobs := tr.snapshot()
	var seen, ready []time.Time
	for _, j := range jobs {
		seen = append(seen, j.seen)
	}
	for _, t := range tasks {
		ready = append(ready, t.ready)
	}
	sort.Slice(seen, func(i, k int) bool { return seen[i].Before(seen[k]) })
	sort.Slice(ready, func(i, k int) bool { return ready[i].Before(ready[k]) })
	// As for the oracle: the N-th create's response.
	end, err := nthCreateAt(cl, benchNamespace, operatorUserAgentPrefix, start, n, seen[n-1])
	if err != nil {
		return nil, err
	}
	res.firstToNth = end.Sub(start).Seconds()
	res.ready = ready[n-1].Sub(start).Seconds()
	if res.cost, err = jobCreateCost(cl.audit, benchNamespace, start, seen[n-1]); err != nil {
		return nil, err
	}
	if err := clearForOracle(ctx, o, cl, op); err != nil {
		return nil, err
	}
	if res.oracleAfter, err = runOraclePre(ctx, o, cl); err != nil {
		return nil, fmt.Errorf("oracle after the operator: %w", err)
	}
	o.logf("precreated: operator start to %d-th Job %.2f s (%.2f x T0, %.2f x the oracles' mean: %.2f s before, %.2f s after), to %d-th Task Ready %.2f s; writes/Task %.3f (%s) + events %.2f; operator CPU %.1f s",
		n, res.firstToNth, res.firstToNth/res.b0.t0, res.firstToNth/res.bound(), res.oracle, res.oracleAfter, n, res.ready, res.writes.total()/float64(n), res.writes.breakdown(float64(n)),
		res.writes.events/float64(n), res.cpuSeconds)
	return res, nil
}
