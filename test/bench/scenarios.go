package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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
	b0, err := runB0(ctx, o, cl, true)
	b.t0, b.tTasks, b.t1 = b0.t0, b0.tTasks, b0.t1
	if err != nil {
		return nil, nil, fmt.Errorf("B0: %w", err)
	}
	ob, err := runOracleBurst(ctx, o, cl)
	if err != nil {
		return nil, nil, fmt.Errorf("oracle burst: %w", err)
	}
	b.oracle = ob.firstToNth
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

	before, err := takeSnap(ctx, cl, op)
	if err != nil {
		return nil, nil, err
	}
	var prof <-chan error
	if o.profile {
		prof = op.cpuProfile(ctx, o, time.Duration(max(4*b.t0, 5)*float64(time.Second)), filepath.Join(o.workDir, "profiles", fmt.Sprintf("burst-%d.cpu.pprof", rep)))
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
	if prof != nil {
		if err := <-prof; err != nil {
			o.logf("CPU profile: %v", err)
		}
	}
	// Let the last events and writes of the pass that made a Task Ready land.
	if err := sleepUntil(ctx, time.Now().Add(o.settle)); err != nil {
		return nil, nil, err
	}
	after, err := takeSnap(ctx, cl, op)
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
	var nth []time.Time
	for _, j := range jobs {
		nth = append(nth, j.seen)
		t, ok := tasks[j.task]
		if !ok {
			continue
		}
		b.taskToJob = append(b.taskToJob, j.seen.Sub(t.seen).Seconds())
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

// ---------------------------------------------------------------------------
// Memory
// ---------------------------------------------------------------------------

type memPoint struct {
	tasks, jobs int
	rss, heap   float64 // bytes
	// scrape is the size of one scrape of the operator's metrics (bytes),
	// taskSeries how many of its series are per-Task ones (the
	// cardinality spec.notify's metrics add).
	scrape, taskSeries float64
}

type memResult struct{ points []memPoint }

// slope is MiB per 1000 Tasks between points i and j.
func (m memResult) slope(i, j int, heap bool) float64 {
	if len(m.points) <= max(i, j) {
		return math.NaN()
	}
	a, b := m.points[i], m.points[j]
	va, vb := a.rss, b.rss
	if heap {
		va, vb = a.heap, b.heap
	}
	return (vb - va) / (1 << 20) / (float64(b.tasks-a.tasks) / 1000)
}

func sessionMemory(ctx context.Context, o *options, rep int) (*memResult, error) {
	s := o.fastKCM()
	s.nodePods = max(s.nodePods, 5*o.n+100)
	cl, err := upCluster(ctx, o, s)
	if err != nil {
		return nil, err
	}
	defer cl.down(ctx, o)
	if err := cl.ensureNamespace(ctx, benchNamespace); err != nil {
		return nil, err
	}
	op, err := startOperator(ctx, o, cl, operatorSettings{}, fmt.Sprintf("memory-%d", rep))
	if err != nil {
		return nil, err
	}
	defer op.stop(o)
	tr, err := startTracker(ctx, cl, benchNamespace, true)
	if err != nil {
		return nil, err
	}
	defer tr.close()

	res := &memResult{}
	measure := func(tasks int) error {
		p, err := measureMemory(ctx, o, op, tr, fmt.Sprintf("memory-%d-%d", rep, tasks), tasks)
		if err == nil {
			res.points = append(res.points, p)
		}
		return err
	}
	if err := measure(0); err != nil {
		return nil, err
	}
	total := 0
	for _, add := range []int{o.n, 4 * o.n} {
		base := total
		if _, _, err := createAll(ctx, cl.c, add, o.workers, func(i int) client.Object {
			return oneShotTask(benchNamespace, fmt.Sprintf("mem-%06d", base+i))
		}); err != nil {
			return nil, err
		}
		total += add
		want := total
		if err := tr.waitFor(ctx, o, fmt.Sprintf("%d Tasks Ready", want), o.timeout(15*time.Minute), func(_, ready, _, _, _ int) bool { return ready >= want }); err != nil {
			return nil, err
		}
		if err := measure(total); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// measureMemory is the operator's memory with tasks Tasks in the cluster:
// after a pause, three samples a second apart, each after a forced GC (the
// median), the first heap profile kept as label.heap.pprof; and the size
// of one metrics scrape with its per-Task series.
func measureMemory(ctx context.Context, o *options, op *operator, tr *tracker, label string, tasks int) (memPoint, error) {
	p := memPoint{tasks: tasks}
	if err := sleepUntil(ctx, time.Now().Add(2*o.settle)); err != nil {
		return p, err
	}
	var rss, heap []float64
	for i := range 3 {
		save := ""
		if i == 0 {
			save = filepath.Join(o.workDir, "profiles", label+".heap.pprof")
		}
		r, h, err := op.memory(ctx, save)
		if err != nil {
			return p, err
		}
		rss, heap = append(rss, r), append(heap, h)
		time.Sleep(time.Second)
	}
	_, _, _, p.jobs, _ = tr.counts()
	p.rss, p.heap = median(rss), median(heap)
	body, err := op.get(ctx, op.MetricsURL())
	if err != nil {
		return p, err
	}
	p.scrape = float64(len(body))
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "taskoperator_task_") {
			p.taskSeries++
		}
	}
	o.logf("memory: %d Tasks, %d Jobs: RSS %.1f MiB, heap %.1f MiB; metrics scrape %.0f KiB with %.0f per-Task series",
		tasks, p.jobs, p.rss/(1<<20), p.heap/(1<<20), p.scrape/1024, p.taskSeries)
	return p, nil
}

// ---------------------------------------------------------------------------
// Cron fire
// ---------------------------------------------------------------------------

// cronKind is one cron run: the operator with some flags, or the CronJob
// controller.
type cronKind struct {
	name     string // row label
	operator bool
	// oracle: the cron oracle (oracle.go) creates the slot's Jobs of the
	// Tasks, with no operator running.
	oracle   bool
	settings operatorSettings
	// life: after the slot period, follow the slot's runs to the end of
	// their lives (each Job complete and its finish recorded by the
	// controller) and count the writes of the whole life. Only for the
	// operator at its defaults and the CronJob controller, the pair the
	// target compares: at 20/30 the Job controller needs minutes to
	// complete N Jobs.
	life bool
}

// tasks: the kind's objects are Tasks (not CronJobs).
func (k cronKind) tasks() bool { return k.operator || k.oracle }

type cronResult struct {
	b0          b0Result
	slot        time.Time
	n, started  int
	late        int // runs started after the slot period (counted as missed)
	skew        []float64
	writes      writeCount
	setup       float64 // s from the first create until every Task was scheduled (operator)
	setupLate   bool    // the operator had not scheduled every Task 3 s before the slot
	scheduledAt int     // Tasks scheduled for the slot 3 s before it
	// fire is from the slot to the last started run's Job; fireStatus
	// counts the controller's status writes in it (audit log; -1 without
	// one): records that competed with the creates that decide the skew.
	fire       float64
	fireStatus float64
	// fireCost is what the API server spent on the fire's creates (audit
	// log).
	fireCost createCost
	// shown is from the last Job of the slot until every started run's
	// Task showed it (Running, or already finished), operator only.
	shown float64
	// lifeWrites counts the controller's writes from 3 s before the slot
	// until every one of the slot's N runs (also those started after the
	// period) had finished and its finish was recorded (the Task's
	// history, the CronJob's lastSuccessfulTime with no active Job), plus
	// the settle pause (kind.life only; lifeDone false if that end never
	// came).
	lifeWrites writeCount
	lifeDone   bool
	life       float64 // s from the slot to that end
}

// lifeOrNaN is the slot to the end of every run's life, NaN if not
// measured.
func (r cronResult) lifeOrNaN() float64 {
	if !r.lifeDone {
		return math.NaN()
	}
	return r.life
}

// lifePerRun is the writes per run over the runs' whole lives, events
// apart.
func (r cronResult) lifePerRun() float64 {
	if !r.lifeDone {
		return math.NaN()
	}
	return ratio(r.lifeWrites.total(), float64(r.n))
}

func (r cronResult) perRun() float64 { return ratio(r.writes.total(), float64(r.started)) }
func (r cronResult) eventsPerRun() float64 {
	return ratio(r.writes.events, float64(r.started))
}

// sessionCron: B0, then N cron Tasks (or CronJobs) all due in one slot, the
// first minute boundary after they exist and are scheduled. Their schedule
// names that slot's minute and hour ("M H * * *"), so no earlier slot fires
// while they are being created; the slot period (60 s, like "* * * * *")
// is the window measured.
func sessionCron(ctx context.Context, o *options, rep int, kind cronKind) (*cronResult, error) {
	cl, err := upCluster(ctx, o, o.defaultKCM())
	if err != nil {
		return nil, err
	}
	defer cl.down(ctx, o)
	res := &cronResult{n: o.n}
	if res.b0, err = runB0(ctx, o, cl, false); err != nil {
		return nil, fmt.Errorf("B0: %w", err)
	}
	if err := cl.ensureNamespace(ctx, benchNamespace); err != nil {
		return nil, err
	}
	var op *operator
	if kind.operator {
		if op, err = startOperator(ctx, o, cl, kind.settings, fmt.Sprintf("cron-%s-%d", kind.name, rep)); err != nil {
			return nil, err
		}
		defer op.stop(o)
	}
	tr, err := startTracker(ctx, cl, benchNamespace, kind.operator)
	if err != nil {
		return nil, err
	}
	defer tr.close()

	// Lead time: creating the objects (a few x T0) plus, for the operator,
	// its first pass over every Task (about 2 writes each: finalizer and
	// status), which a client-side limit stretches to 2N/qps.
	lead := 15*time.Second + time.Duration(3*res.b0.t0*float64(time.Second))
	if kind.operator {
		if kind.settings.qps > 0 {
			lead += time.Duration(2.6 * float64(o.n) / kind.settings.qps * float64(time.Second))
		} else {
			lead += time.Duration(float64(o.n)/50) * time.Second
		}
	}
	slot := time.Now().Add(lead).Truncate(time.Minute).Add(time.Minute)
	res.slot = slot
	schedule := fmt.Sprintf("%d %d * * *", slot.UTC().Minute(), slot.UTC().Hour())
	o.logf("cron %s: %d objects with schedule %q, slot %s (in %.0f s)", kind.name, o.n, schedule, slot.UTC().Format(time.TimeOnly), time.Until(slot).Seconds())

	start, end, err := createAll(ctx, cl.c, o.n, o.workers, func(i int) client.Object {
		name := fmt.Sprintf("cron-%05d", i)
		if kind.tasks() {
			return cronTask(benchNamespace, name, schedule)
		}
		return cronJob(benchNamespace, name, schedule)
	})
	if err != nil {
		return nil, err
	}
	o.logf("cron %s: created in %.2f s", kind.name, end.Sub(start).Seconds())
	snapAt := slot.Add(-3 * time.Second)
	var oracle *oracleProcess
	if kind.oracle {
		if oracle, err = startOracle(ctx, o, cl, oracleArgs{namespace: benchNamespace, mode: oracleCron, n: o.n, slot: slot}); err != nil {
			return nil, err
		}
	}
	if kind.operator {
		n := o.n
		err := tr.waitFor(ctx, o, fmt.Sprintf("%d Tasks scheduled", n), time.Until(snapAt), func(_, _, scheduled, _, _ int) bool { return scheduled >= n })
		tasks, _ := tr.snapshot()
		for _, t := range tasks {
			if t.next.Equal(slot) {
				res.scheduledAt++
			}
		}
		if err != nil {
			res.setupLate = true
			o.logf("cron %s: WARNING: only %d of %d Tasks scheduled 3 s before the slot: %v", kind.name, res.scheduledAt, n, err)
		}
		res.setup = time.Since(start).Seconds()
		o.logf("cron %s: %d Tasks scheduled for the slot, %.1f s after the first create", kind.name, res.scheduledAt, res.setup)
	}
	if err := sleepUntil(ctx, snapAt); err != nil {
		return nil, err
	}
	before, err := takeSnap(ctx, cl, op)
	if err != nil {
		return nil, err
	}
	var prof <-chan error
	if o.profile && kind.operator {
		// The fire only (3 s before the slot to about 3 x T0 after it):
		// what the operator spends its CPU on while the starts are due,
		// not the records that follow.
		prof = op.cpuProfile(ctx, o, 3*time.Second+time.Duration(max(3*res.b0.t0, 5)*float64(time.Second)), filepath.Join(o.workDir, "profiles", fmt.Sprintf("cron-%s-%d.cpu.pprof", kind.name, rep)))
	}
	periodEnd := slot.Add(time.Minute)
	if err := sleepUntil(ctx, periodEnd); err != nil {
		return nil, err
	}
	after, err := takeSnap(ctx, cl, op)
	if err != nil {
		return nil, err
	}
	o.logf("cron %s diagnosis: %s", kind.name, diagnose(before, after))
	switch {
	case kind.operator:
		res.writes, err = operatorWrites(cl, before, after, nil)
	case kind.oracle:
		err = oracle.wait() // it creates the Jobs and nothing else
	default:
		res.writes, err = cronJobWrites(ctx, cl, benchNamespace, before, after)
	}
	if err != nil {
		return nil, err
	}
	if prof != nil {
		if err := <-prof; err != nil {
			o.logf("CPU profile: %v", err)
		}
	}

	runID := "s" + strconv.FormatInt(slot.Unix(), 10)
	_, jobs := tr.snapshot()
	for name, j := range jobs {
		forSlot := false
		if kind.tasks() {
			forSlot = j.run == runID
		} else {
			forSlot = j.scheduled.Equal(slot) || (j.scheduled.IsZero() && name == j.cronJob+"-"+strconv.FormatInt(slot.Unix()/60, 10))
		}
		if !forSlot {
			continue
		}
		if j.seen.After(periodEnd) {
			res.late++
			continue
		}
		res.started++
		res.skew = append(res.skew, j.seen.Sub(slot).Seconds())
	}
	res.fire, res.fireStatus = percentile(res.skew, 100), -1
	if cl.audit != "" && res.started > 0 {
		counts, err := countAuditFile(cl.audit, slot, slot.Add(time.Duration(res.fire*float64(time.Second))+time.Millisecond))
		if err != nil {
			return nil, err
		}
		who := actorCronJob
		switch {
		case kind.operator:
			who = actorOperator
		case kind.oracle:
			who = actorOracle
		}
		res.fireStatus = counts[who]["tasks/status"] + counts[who]["cronjobs/status"]
		if res.fireCost, err = jobCreateCost(cl.audit, benchNamespace, slot, slot.Add(time.Duration(res.fire*float64(time.Second))+time.Millisecond)); err != nil {
			return nil, err
		}
	}
	if kind.operator {
		res.shown = tr.shownAfter(runID, slot.Add(time.Duration(res.fire*float64(time.Second))))
	}
	if kind.life {
		if err := followLives(ctx, o, cl, op, tr, kind, res, runID, before); err != nil {
			return nil, err
		}
	}
	o.logf("cron %s: %d of %d runs started within the slot period; skew p50 %.3f s p99 %.3f s max %.3f s; writes/run %.2f (%s) + events %.2f; "+
		"status writes inside the fire (slot to last Job, %.2f s): %.0f; every run shown %.2f s after the last Job",
		kind.name, res.started, res.n, percentile(res.skew, 50), percentile(res.skew, 99), percentile(res.skew, 100),
		res.perRun(), res.writes.breakdown(float64(max(res.started, 1))), res.eventsPerRun(), res.fire, res.fireStatus, res.shown)
	return res, nil
}

// followLives waits, after the slot period, until every one of the
// slot's N runs has finished and the controller has recorded that (the
// Task's history shows the run with a final result; the CronJob has no
// active Job and a lastSuccessfulTime at or after the slot), then counts
// the controller's writes from before (3 s before the slot) to then. If
// that end does not come within the wait, lifeDone stays false: the row
// shows no value and the log says why.
func followLives(ctx context.Context, o *options, cl *cluster, op *operator, tr *tracker, kind cronKind, res *cronResult, runID string, before writeSnap) error {
	done := func() (int, time.Time) {
		if kind.tasks() {
			return tr.runsFinished(runID)
		}
		return tr.cronJobsDone(res.slot)
	}
	want := res.n
	err := tr.waitFor(ctx, o, fmt.Sprintf("the slot's %d runs finished and recorded", want), o.timeout(8*time.Minute), func(_, _, _, _, _ int) bool {
		n, _ := done()
		return n >= want
	})
	if err != nil {
		o.logf("cron %s: WARNING: the whole lives not measured: %v", kind.name, err)
		return nil
	}
	_, last := done()
	res.life = last.Sub(res.slot).Seconds()
	if err := sleepUntil(ctx, time.Now().Add(o.settle)); err != nil {
		return err
	}
	after, err := takeSnap(ctx, cl, op)
	if err != nil {
		return err
	}
	if kind.operator {
		res.lifeWrites, err = operatorWrites(cl, before, after, nil)
	} else {
		res.lifeWrites, err = cronJobWrites(ctx, cl, benchNamespace, before, after)
	}
	if err != nil {
		return err
	}
	res.lifeDone = true
	o.logf("cron %s: every run finished and recorded %.1f s after the slot; writes per run over their whole lives %.3f (%s)",
		kind.name, res.life, res.lifePerRun(), res.lifeWrites.breakdown(float64(res.n)))
	return nil
}
