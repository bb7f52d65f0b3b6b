package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// Short runs: the burst's Tasks run about 1 s once their pod is Running,
// which under the burst's load puts their Jobs' completion 2.5-4 s after
// creation, past the wait of a start's record (plan.RecordStartAt): they
// get a "Running" write and a finished one. This step measures the other
// case the writes target names, runs under 2 s: Tasks whose pods finish
// at once, created at a steady pace. The Job controller completes such a
// Job about a second after its creation at best (it batches pod updates),
// later when busy, so how many runs come in under 2 s is a row of its own.

const (
	// shortRate is the pace of the short Tasks' creates (per second).
	shortRate = 20
	// shortPodDuration is how long their pods run (kwok; a Go duration,
	// so the stage does not read it as whole seconds).
	shortPodDuration = "10ms"
	// shortLimit is the run length the target is set for.
	shortLimit = 2 * time.Second
	// shortWritesTarget is the target: operator writes per Task for runs
	// under shortLimit.
	shortWritesTarget = 2
)

type shortResult struct {
	tasks int
	// under and over count the Tasks whose Job completed within
	// shortLimit of its creation (as the benchmark's watch saw both), and
	// the others; writesUnder and writesOver their operator writes (Job
	// creates, Task and status patches, by object name in the audit log).
	under, over             int
	writesUnder, writesOver float64
	// writes is the window's whole count (events apart), a cross-check of
	// the per-name sums.
	writes writeCount
	// lengths are the runs' lengths (s), Job created to complete.
	lengths []float64
}

func (r shortResult) perTaskUnder() float64 { return ratio(r.writesUnder, float64(r.under)) }
func (r shortResult) perTaskOver() float64  { return ratio(r.writesOver, float64(r.over)) }

// runShort creates max(N/5, 20) one-shot Tasks whose pods finish at once,
// shortRate per second, waits until all are Ready, and counts the
// operator's writes for each Task by its run's length. It needs the audit
// log (the per-name counts); without one it reports nothing.
func runShort(ctx context.Context, o *options, cl *cluster, op *operator, tr *tracker) (*shortResult, error) {
	if cl.audit == "" {
		return nil, nil
	}
	count := max(o.n/5, 20)
	_, readyBefore, _, _, _ := tr.counts()
	before, err := takeSnap(ctx, cl, op)
	if err != nil {
		return nil, err
	}
	tick := time.NewTicker(time.Second / shortRate)
	defer tick.Stop()
	for i := range count {
		t := oneShotTask(benchNamespace, fmt.Sprintf("short-%05d", i))
		testutil.PodAnnotations(harness.SimDuration, shortPodDuration)(t)
		if err := cl.c.Create(ctx, t); err != nil {
			return nil, fmt.Errorf("creating %s: %w", t.Name, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
	}
	if err := tr.waitFor(ctx, o, fmt.Sprintf("%d short Tasks Ready", count), o.timeout(3*time.Minute), func(_, ready, _, _, _ int) bool {
		return ready >= readyBefore+count
	}); err != nil {
		return nil, err
	}
	after, err := settledSnap(ctx, o, cl, op)
	if err != nil {
		return nil, err
	}
	r := &shortResult{tasks: count}
	if r.writes, err = operatorWrites(cl, before, after, map[string]float64{"tasks": float64(count)}); err != nil {
		return nil, err
	}
	_, jobs := tr.snapshot()
	taskOfJob := map[string]string{}
	length := map[string]time.Duration{} // by Task; unknown (never complete) counts as long
	for name, j := range jobs {
		if !strings.HasPrefix(j.task, "short-") {
			continue
		}
		taskOfJob[name] = j.task
		length[j.task] = time.Hour
		if !j.complete.IsZero() {
			length[j.task] = j.complete.Sub(j.seen)
			r.lengths = append(r.lengths, length[j.task].Seconds())
		}
	}
	byTask, err := operatorWritesByTaskFile(cl.audit, benchNamespace, taskOfJob, before.at, after.at)
	if err != nil {
		return nil, err
	}
	var more []string // short runs that cost more than the target, for the log
	for i := range count {
		name := fmt.Sprintf("short-%05d", i)
		l, ok := length[name]
		if !ok || l > shortLimit {
			r.over++
			r.writesOver += byTask[name]
			continue
		}
		r.under++
		r.writesUnder += byTask[name]
		if byTask[name] > shortWritesTarget && len(more) < 10 {
			more = append(more, fmt.Sprintf("%s %.0f writes after a %.2f s run", name, byTask[name], l.Seconds()))
		}
	}
	o.logf("short runs: %d Tasks at %d/s, pods %s: run length (Job created to complete) p50 %.2f s p90 %.2f s; %d ran under %s (%.3f writes per Task), %d longer (%.3f); all in the window: %.3f per Task (%s); short runs with more than %d writes: %s",
		count, shortRate, shortPodDuration, percentile(r.lengths, 50), percentile(r.lengths, 90), r.under, shortLimit, r.perTaskUnder(), r.over, r.perTaskOver(),
		r.writes.total()/float64(count), r.writes.breakdown(float64(count)), shortWritesTarget, orNA(strings.Join(more, ", ")))
	return r, nil
}
