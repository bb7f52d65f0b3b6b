package main

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

const benchNamespace = "bench"

// ---------------------------------------------------------------------------
// B0: the API server's own limit
// ---------------------------------------------------------------------------

// runB0 creates N Jobs of the operator's shape from o.workers goroutines with
// no client-side limit and returns T0, then deletes them again. With tasks,
// it then measures T1 (runT1) and does the same with N one-shot Tasks (no
// operator runs yet, so they stay untouched) and returns their creation
// time too: the part of a burst that is the API server's work on Tasks
// alone. It runs before the session's operator starts.
func runB0(ctx context.Context, o *options, cl *cluster, tasks bool) (b0 b0Result, err error) {
	const ns = "bench-b0"
	if err := cl.ensureNamespace(ctx, ns); err != nil {
		return b0, err
	}
	owner := oneShotTask(ns, "b0-owner")
	if err := cl.c.Create(ctx, owner); err != nil {
		return b0, err
	}
	start, end, err := createAll(ctx, cl.c, o.n, o.workers, func(i int) client.Object { return b0Job(owner, i) })
	if err != nil {
		return b0, err
	}
	b0.t0 = end.Sub(start).Seconds()
	o.logf("B0: %d Jobs in %.2f s (%.0f Jobs/s)", o.n, b0.t0, float64(o.n)/b0.t0)
	b0From, b0To := start, end
	if tasks {
		if b0.t1, err = runT1(ctx, o, cl); err != nil {
			return b0, err
		}
		o.logf("T1: %d Jobs the Job controller acts on in %.2f s (%.2f x T0)", o.n, b0.t1, b0.t1/b0.t0)
		start, end, err := createAll(ctx, cl.c, o.n, o.workers, func(i int) client.Object {
			return oneShotTask(ns, fmt.Sprintf("b0-%05d", i))
		})
		if err != nil {
			return b0, err
		}
		b0.tTasks = end.Sub(start).Seconds()
		o.logf("B0: %d Tasks in %.2f s (%.0f Tasks/s)", o.n, b0.tTasks, float64(o.n)/b0.tTasks)
	}

	// Clean up, so the session's operator starts on an empty cluster (no
	// operator has seen these Tasks, but the finalizer policy gave them the
	// finalizer: cleanNamespace removes it first).
	err = cleanNamespace(ctx, o, cl, ns)
	if err == nil {
		// Read after the cleanup, when the log surely holds the creates.
		b0.cost, err = jobCreateCost(cl.audit, ns, b0From, b0To)
	}
	return b0, err
}

// runT1 creates B0's Jobs again without spec.managedBy, so the Job
// controller, the scheduler and kwok act on them as on the operator's, in
// a namespace of their own, and returns how long the creates took once
// they and their pods are gone again.
func runT1(ctx context.Context, o *options, cl *cluster) (float64, error) {
	const ns = "bench-t1"
	if err := cl.ensureNamespace(ctx, ns); err != nil {
		return 0, err
	}
	owner := oneShotTask(ns, "t1-owner")
	if err := cl.c.Create(ctx, owner); err != nil {
		return 0, err
	}
	start, end, err := createAll(ctx, cl.c, o.n, o.workers, func(i int) client.Object {
		j := b0Job(owner, i)
		j.Spec.ManagedBy = nil
		return j
	})
	if err != nil {
		return 0, err
	}
	if err := cleanNamespace(ctx, o, cl, ns); err != nil {
		return 0, fmt.Errorf("cleaning up after T1: %w", err)
	}
	return end.Sub(start).Seconds(), nil
}

// b0Result is one run of B0.
type b0Result struct {
	t0, tTasks float64
	// t1: N Jobs of the same shape that the Job controller acts on.
	t1 float64
	// cost is what the API server spent on B0's creates (audit log).
	cost createCost
}

// ---------------------------------------------------------------------------
// Burst of one-shot Tasks, then idle
// ---------------------------------------------------------------------------

type burstResult struct {
	t0          float64 // this session's B0
	t1          float64 // this session's T1 (Jobs the Job controller acts on)
	oracle      float64 // this session's oracle burst: first Task to N-th Job (s)
	tTasks      float64 // this session's N Tasks created with no operator running
	create      float64 // s to create the N Tasks
	firstToNth  float64 // s from the first Task create to the N-th Job
	taskToJob   []float64
	finishReady []float64
	writes      writeCount
	jobs        int
	cpuSeconds  float64      // the operator's CPU during the burst
	floor       *floorResult // the floor's figures per 1000 Tasks (floor.go), same cluster
	short       *shortResult // the short runs after it (short.go), nil without an audit log
	// apiCPUSeconds is the API server's CPU over the same window (first
	// create to the last Task Ready, settled); followOn what the Job
	// controller, the scheduler and kwok wrote per Job create in it.
	apiCPUSeconds float64
	followOn      createCost
}

type idleResult struct {
	window float64 // s
	writes writeCount
}

func (r idleResult) perMinute() float64 {
	return (r.writes.total() + r.writes.events) / r.window * 60
}

// burstBaselines measures, before the operator starts, what the burst is
// read against: B0 (T0, T_tasks, T1), the oracle burst and the floor.
func burstBaselines(ctx context.Context, o *options, cl *cluster, b *burstResult) error {
	b0, err := runB0(ctx, o, cl, true)
	b.t0, b.tTasks, b.t1 = b0.t0, b0.tTasks, b0.t1
	if err != nil {
		return fmt.Errorf("B0: %w", err)
	}
	ob, err := runOracleBurst(ctx, o, cl)
	if err != nil {
		return fmt.Errorf("oracle burst: %w", err)
	}
	b.oracle = ob.firstToNth
	if b.floor, err = runFloorBurst(ctx, o, cl); err != nil {
		return fmt.Errorf("floor burst: %w", err)
	}
	return nil
}

// sessionBurst: B0, then the operator, N one-shot Tasks at once, (when
// idle) N cron Tasks not due, left alone for the idle window, then the
// short runs (short.go).
func sessionBurst(ctx context.Context, o *options, rep int, withIdle bool) (b *burstResult, idle *idleResult, err error) {
	cl, err := upCluster(ctx, o, o.fastKCM())
	if err != nil {
		return nil, nil, err
	}
	defer cl.down(ctx, o)
	b = &burstResult{}
	if err := burstBaselines(ctx, o, cl, b); err != nil {
		return nil, nil, err
	}
	if err := cl.ensureNamespace(ctx, benchNamespace); err != nil {
		return nil, nil, err
	}
	op, err := startOperator(ctx, o, cl, operatorSettings{}, fmt.Sprintf("burst-%d", rep))
	if err != nil {
		return nil, nil, err
	}
	defer op.stop(o)
	tr, err := startTracker(ctx, cl, benchNamespace, true)
	if err != nil {
		return nil, nil, err
	}
	defer tr.close()
	if err := sleepUntil(ctx, time.Now().Add(3*time.Second)); err != nil {
		return nil, nil, err
	}
	if err := waitQuiet(ctx, o, cl, "the burst"); err != nil {
		return nil, nil, err
	}

	before, err := takeSnap(ctx, cl, op)
	if err != nil {
		return nil, nil, err
	}
	// The profile covers the whole burst: first create to the last Task
	// Ready, the window of the operator's CPU figure.
	var prof <-chan error
	burstOver := make(chan struct{})
	if o.profile {
		prof = op.cpuProfileUntil(ctx, o, burstOver, filepath.Join(o.workDir, "profiles", fmt.Sprintf("burst-%d.cpu.pprof", rep)))
	}
	start, end, err := createAll(ctx, cl.c, o.n, o.workers, func(i int) client.Object {
		return oneShotTask(benchNamespace, fmt.Sprintf("burst-%05d", i))
	})
	if err != nil {
		return nil, nil, err
	}
	b.create = end.Sub(start).Seconds()
	n := o.n
	if err := tr.waitFor(ctx, o, fmt.Sprintf("%d Jobs", n), o.timeout(2*time.Minute), func(_, _, _, jobs, _ int) bool { return jobs >= n }); err != nil {
		return nil, nil, err
	}
	if err := tr.waitFor(ctx, o, fmt.Sprintf("%d Tasks Ready", n), o.timeout(10*time.Minute), func(_, ready, _, _, _ int) bool { return ready >= n }); err != nil {
		return nil, nil, err
	}
	close(burstOver)
	if prof != nil {
		if err := <-prof; err != nil {
			o.logf("CPU profile: %v", err)
		}
	}
	// Let the last events and writes of the pass that made a Task Ready land.
	after, err := settledSnap(ctx, o, cl, op)
	if err != nil {
		return nil, nil, err
	}
	o.logf("burst diagnosis: %s", diagnose(before, after))
	b.cpuSeconds = after.op.Value("process_cpu_seconds_total") - before.op.Value("process_cpu_seconds_total")
	b.apiCPUSeconds = after.api.Value("process_cpu_seconds_total") - before.api.Value("process_cpu_seconds_total")
	if b.followOn, err = jobCreateCost(cl.audit, benchNamespace, before.at, after.at); err != nil {
		return nil, nil, err
	}
	if b.writes, err = operatorWrites(cl, before, after, map[string]float64{"tasks": float64(n)}); err != nil {
		return nil, nil, err
	}

	tasks, jobs := tr.snapshot()
	b.taskToJob = taskToJob(tasks, jobs)
	var nth []time.Time
	for _, j := range jobs {
		nth = append(nth, j.seen)
		t, ok := tasks[j.task]
		if !ok {
			continue
		}
		if !j.complete.IsZero() && !t.ready.IsZero() {
			b.finishReady = append(b.finishReady, t.ready.Sub(j.complete).Seconds())
		}
	}
	sort.Slice(nth, func(i, k int) bool { return nth[i].Before(nth[k]) })
	// As for the oracle: the N-th create's response (the watch above sees
	// a Job a little later).
	nthDone, err := nthCreateAt(cl, benchNamespace, operatorUserAgentPrefix, start, n, nth[n-1])
	if err != nil {
		return nil, nil, err
	}
	b.firstToNth = nthDone.Sub(start).Seconds()
	b.jobs = len(jobs)
	o.logf("burst: %d Tasks created in %.2f s; %d-th Job after %.2f s (%.2f x T0, %.2f x oracle); Task->Job p50 %.3f s p99 %.3f s; Job finished->Ready p50 %.3f s p99 %.3f s; writes/Task %.2f (%s) + events %.2f; operator CPU %.1f s",
		n, b.create, n, b.firstToNth, b.firstToNth/b.t0, b.firstToNth/b.oracle, percentile(b.taskToJob, 50), percentile(b.taskToJob, 99),
		percentile(b.finishReady, 50), percentile(b.finishReady, 99), b.writes.total()/float64(n), b.writes.breakdown(float64(n)), b.writes.events/float64(n), b.cpuSeconds)

	if withIdle {
		if idle, err = runIdle(ctx, o, cl, op, tr); err != nil {
			return nil, nil, err
		}
	}
	if b.short, err = runShort(ctx, o, cl, op, tr); err != nil {
		return nil, nil, fmt.Errorf("short runs: %w", err)
	}
	return b, idle, nil
}

// runIdle adds N cron Tasks that are not due for hours next to the N
// finished one-shot Tasks, waits until the operator has scheduled them,
// and counts its writes in the idle window.
func runIdle(ctx context.Context, o *options, cl *cluster, op *operator, tr *tracker) (*idleResult, error) {
	// Due in about 12 hours, whenever the benchmark runs.
	schedule := fmt.Sprintf("%d %d * * *", time.Now().UTC().Minute(), (time.Now().UTC().Hour()+12)%24)
	if _, _, err := createAll(ctx, cl.c, o.n, o.workers, func(i int) client.Object {
		return cronTask(benchNamespace, fmt.Sprintf("idle-%05d", i), schedule)
	}); err != nil {
		return nil, err
	}
	n := o.n
	if err := tr.waitFor(ctx, o, fmt.Sprintf("%d cron Tasks scheduled", n), o.timeout(2*time.Minute), func(_, _, scheduled, _, _ int) bool { return scheduled >= n }); err != nil {
		return nil, err
	}
	if err := sleepUntil(ctx, time.Now().Add(2*o.settle)); err != nil {
		return nil, err
	}
	before, err := takeSnap(ctx, cl, op)
	if err != nil {
		return nil, err
	}
	o.logf("idle: %d finished one-shot Tasks and %d cron Tasks not due; watching the operator for %s", n, n, o.idleWindow)
	if err := sleepUntil(ctx, time.Now().Add(o.idleWindow)); err != nil {
		return nil, err
	}
	after, err := takeSnap(ctx, cl, op)
	if err != nil {
		return nil, err
	}
	r := &idleResult{window: after.at.Sub(before.at).Seconds()}
	if r.writes, err = operatorWrites(cl, before, after, nil); err != nil {
		return nil, err
	}
	o.logf("idle: %.1f writes/min (%s; events %.0f), %.1f reconciles/min", r.perMinute(), r.writes.breakdown(1), r.writes.events, r.writes.reconciles/r.window*60)
	return r, nil
}
