package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// The scale scenario (make bench-scale, -scenarios scale, meant for
// -n 10000; not part of "all"): one cluster and one operator carrying N
// Tasks, asked what grows with N.
//
//  0. The floor (floor.go) given step 1's two bursts before the operator
//     starts, in namespaces of its own: the CPU per 1000 Tasks that the
//     operator's traffic alone costs in each phase.
//  1. One-shot bursts: N/10 Tasks, then the other 9N/10: writes per Task,
//     CPU and memory per 1000 Tasks in each phase (the second must cost
//     what the first did).
//  2. N cron Tasks not due, then the operator restarted over the 2N
//     Tasks: time from the process start to one pass over every Task
//     (controller-runtime's reconcile count), writes (0 is right) and
//     reads in the 20 s after it.
//  3. Queue passes: a TaskQueue of maxRunning 100 with N Tasks against the
//     same queue with 600 (about 300 waiting once all are in line): mean
//     pass time, CPU and allocations per pass while the line is long,
//     admission p99, throughput against a closed loop of un-queued Tasks
//     at the same parallelism, run before the lines and (for the long
//     line) again after it, beside its Tasks, its queue suspended.
//  4. A TaskQueue of maxRunning 5000 holding 4999 places admits one more:
//     the bytes of that record write (the API server's request body
//     size) and of the stored record.
//  5. One metrics scrape with 2N Tasks: bytes and per-Task series.

// The steps of the scale scenario (-scale-steps).
const (
	scaleStepFloor   = "floor"
	scaleStepBursts  = "bursts"
	scaleStepRestart = "restart"
	scaleStepQueues  = "queues"
	scaleStepWide    = "wide"
)

var allScaleSteps = []string{scaleStepFloor, scaleStepBursts, scaleStepRestart, scaleStepQueues, scaleStepWide}

const (
	// scaleShards: the one-shot and cron Tasks are spread over this many
	// namespaces. In one namespace the Job controller (which looks through
	// the namespace's pods for each Job it syncs) completes fewer than 3
	// Jobs a second once 10,000 pods exist, and that, not the operator,
	// would be what the scenario measures.
	scaleShards = 10
	// scaleQueueParallel is the maxRunning of the queues compared in step 3.
	scaleQueueParallel = 100
	// scaleSmallQueue: Tasks of the short line. Its passes are measured
	// once every Task is in line (passesInLine): on this machine its
	// places in line are written at about 30 a second while 10 attempts a
	// second complete, so about 300 are still waiting then.
	scaleSmallQueue = 600
	// scaleFreeAttempts: attempts of the un-queued closed loop (its rate
	// is steady after a few hundred).
	scaleFreeAttempts = 2000
	// scaleLongQueueMeasured: completions of the long line measured
	// (admission, throughput); the rest of it waits in its suspended
	// queue once the windows are measured (the whole line would take a
	// quarter of an hour to drain here).
	scaleLongQueueMeasured = 2000
	// scaleLongQueueSteady: completions of the long line measured again
	// once every Task's place in line is written (queueResult.steady).
	scaleLongQueueSteady = 1000
	// scaleWideCap is the maxRunning of step 4's queue.
	scaleWideCap = 5000
)

// scalePhase is one one-shot burst of step 1.
type scalePhase struct {
	tasks      int
	firstToNth float64 // s, the first create to the N-th Job seen
	writes     writeCount
	cpu        float64 // operator CPU-s in the phase
	// rss, heap: MiB per 1000 Tasks the phase added.
	rss, heap float64
}

type scaleResult struct {
	n      int
	floor  *scaleFloor // step 0, nil when not run
	phases []scalePhase
	// restart (step 2)
	restartTasks     int
	restartFirstPass float64 // s
	restartWrites    writeCount
	// queues (step 3)
	small, big *queueResult
	// wide queue (step 4): bytes of the admission write and of the stored record
	wideWrite, wideStored float64
	// scrape (step 5)
	scrape memPoint
}

func sessionScale(ctx context.Context, o *options, rep int) (*scaleResult, error) {
	n := o.n
	s := o.fastKCM()
	s.nodePods = max(s.nodePods, 2*n+scaleWideCap+1000)
	cl, err := upCluster(ctx, o, s)
	if err != nil {
		return nil, err
	}
	defer cl.down(ctx, o)
	res := &scaleResult{n: n}
	// 0. The floor, before the operator watches the cluster.
	if o.scaleSteps[scaleStepFloor] {
		if res.floor, err = runFloorScale(ctx, o, cl); err != nil {
			return nil, fmt.Errorf("scale floor: %w", err)
		}
	}
	for _, ns := range scaleNamespaces() {
		if err := cl.ensureNamespace(ctx, ns); err != nil {
			return nil, err
		}
	}
	op, err := startOperator(ctx, o, cl, operatorSettings{}, fmt.Sprintf("scale-%d", rep))
	if err != nil {
		return nil, err
	}
	defer func() { op.stop(o) }()
	tr, err := startTrackerIn(ctx, cl, scaleNamespaces(), true)
	if err != nil {
		return nil, err
	}
	defer tr.close()

	// 1. Two one-shot bursts.
	if o.scaleSteps[scaleStepBursts] {
		if err := scaleBursts(ctx, o, cl, op, tr, res, rep); err != nil {
			return nil, err
		}
	}
	// 2. N cron Tasks, then a restart over all.
	if o.scaleSteps[scaleStepRestart] {
		if op, err = scaleRestart(ctx, o, cl, op, tr, res, rep); err != nil {
			return nil, err
		}
	}
	// 3. Short and long lines in a queue of 100, and the un-queued loop.
	if o.scaleSteps[scaleStepQueues] {
		if err := scaleQueues(ctx, o, cl, op, res, rep); err != nil {
			return nil, err
		}
	}
	// 4. The wide queue's admission write.
	if o.scaleSteps[scaleStepWide] {
		if res.wideWrite, res.wideStored, err = wideAdmission(ctx, o, cl); err != nil {
			return nil, err
		}
	}
	o.logf("scale: %s", res.summary())
	return res, nil
}

// scaleBursts is step 1: N/10 one-shot Tasks, then the other 9N/10.
func scaleBursts(ctx context.Context, o *options, cl *cluster, op *operator, tr *tracker, res *scaleResult, rep int) error {
	n := o.n
	mem, err := measureMemory(ctx, o, op, tr, fmt.Sprintf("scale-%d-0", rep), 0)
	if err != nil {
		return err
	}
	total := 0
	for _, add := range []int{max(n/10, 1), n - max(n/10, 1)} {
		if add == 0 {
			continue
		}
		ph, next, err := scaleBurst(ctx, o, cl, op, tr, total, add, mem, fmt.Sprintf("scale-%d-%d", rep, total+add))
		if err != nil {
			return err
		}
		res.phases = append(res.phases, ph)
		total += add
		mem = next
	}
	return nil
}

// scaleRestart is step 2: N cron Tasks not due, one metrics scrape, then
// the operator restarted over every Task; it returns the new operator.
func scaleRestart(ctx context.Context, o *options, cl *cluster, op *operator, tr *tracker, res *scaleResult, rep int) (*operator, error) {
	n := o.n
	schedule := fmt.Sprintf("%d %d * * *", time.Now().UTC().Minute(), (time.Now().UTC().Hour()+12)%24)
	if _, _, err := createAll(ctx, cl.c, n, o.workers, func(i int) client.Object {
		return cronTask(scaleNamespaceOf(i), fmt.Sprintf("cron-%05d", i), schedule)
	}); err != nil {
		return op, err
	}
	if err := tr.waitFor(ctx, o, fmt.Sprintf("%d cron Tasks scheduled", n), o.timeout(2*time.Minute), func(_, _, scheduled, _, _ int) bool { return scheduled >= n }); err != nil {
		return op, err
	}
	var err error
	if res.scrape, err = measureMemory(ctx, o, op, tr, fmt.Sprintf("scale-%d-cron", rep), 2*n); err != nil {
		return op, err
	}
	tasks, _, _, _, _ := tr.counts()
	res.restartTasks = tasks
	return restartOver(ctx, o, cl, op, res, fmt.Sprintf("scale-%d-restart", rep))
}

// scaleQueues is step 3: the un-queued closed loop, then the short and
// the long line in a queue of scaleQueueParallel.
func scaleQueues(ctx context.Context, o *options, cl *cluster, op *operator, res *scaleResult, rep int) error {
	n, par := o.n, scaleQueueParallel
	free, err := runUnqueued(ctx, o, cl, "bench-scale-free", min(scaleFreeAttempts, n), par)
	if err != nil {
		return err
	}
	res.small = &queueResult{parallel: par, n: min(scaleSmallQueue, n), unqueued: free}
	if err := runQueued(ctx, o, cl, op, "bench-scale-q-short", res.small, fmt.Sprintf("scale-%d-q-short", rep)); err != nil {
		return err
	}
	res.big = &queueResult{parallel: par, n: n, unqueued: free, until: min(scaleLongQueueMeasured, n), steady: steadyWindow{n: scaleLongQueueSteady}}
	const long = "bench-scale-q-long"
	if err := runQueued(ctx, o, cl, op, long, res.big, fmt.Sprintf("scale-%d-q-long", rep)); err != nil {
		return err
	}
	if res.big.steady.from.IsZero() {
		return nil
	}
	// The un-queued loop again, beside the line's Tasks: the loop before
	// ran on a cluster without them, and its rate moved by a quarter
	// between runs of the same code (10.8 to 13.7 attempts a second), more
	// than the throughput row's margin. The line is suspended and its
	// active attempts finish first, so the loop has the machine the line
	// had.
	if err := suspendAndDrain(ctx, o, cl, long, "bench"); err != nil {
		return err
	}
	after, err := runUnqueued(ctx, o, cl, "bench-scale-free-after", min(scaleFreeAttempts, n), par)
	if err != nil {
		return err
	}
	res.big.unqueuedAfter = after
	return nil
}

// suspendAndDrain suspends the TaskQueue ns/name (spec.suspend: it
// admits nothing new) and waits until its status says no attempt holds a
// place.
func suspendAndDrain(ctx context.Context, o *options, cl *cluster, ns, name string) error {
	q := &v1alpha1.TaskQueue{}
	q.Namespace, q.Name = ns, name
	if err := cl.c.Patch(ctx, q, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`))); err != nil {
		return err
	}
	gen := q.Generation
	return poll(ctx, o.timeout(time.Minute), 200*time.Millisecond, func() (bool, error) {
		if err := cl.c.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
			return false, err
		}
		return q.Status.ObservedGeneration >= gen && q.Status.Running == 0, nil
	})
}

// scaleNamespaces are the namespaces of the one-shot and cron Tasks.
func scaleNamespaces() []string { return shardNamespaces(scaleNamespaceOf) }

// shardNamespaces are the scaleShards namespaces of a namespace function
// (scaleNamespaceOf, scaleFloorNamespaceOf).
func shardNamespaces(of func(int) string) []string {
	var out []string
	for i := range scaleShards {
		out = append(out, of(i))
	}
	return out
}

// scaleNamespaceOf is the namespace of Task i.
func scaleNamespaceOf(i int) string { return fmt.Sprintf("bench-scale-%d", i%scaleShards) }

// scaleStartTimeout is the start timeout of the scale bursts' Tasks.
const scaleStartTimeout = 1800

// createScaleTasks creates the one-shot Tasks base to base+add-1 of a
// scale burst, Task i in namespace nsOf(i); it returns when the first
// create was sent.
func createScaleTasks(ctx context.Context, o *options, cl *cluster, nsOf func(int) string, base, add int) (time.Time, error) {
	start, _, err := createAll(ctx, cl.c, add, o.workers, func(i int) client.Object {
		t := oneShotTask(nsOf(base+i), fmt.Sprintf("one-%05d", base+i))
		// The local Job controller creates the pods of 9,000 Jobs made in a
		// minute over several minutes: the default start timeout (5 min)
		// would stop the last ones as StartTimeout (seen once, 1,800 of
		// them), measuring the cluster's Job controller instead of the
		// operator.
		t.Spec.StartTimeoutSeconds = ptr.To[int32](scaleStartTimeout)
		return t
	})
	return start, err
}

// scaleBurst creates add one-shot Tasks after base others, waits until
// they are Ready, and measures the phase against the memory point before.
func scaleBurst(ctx context.Context, o *options, cl *cluster, op *operator, tr *tracker, base, add int, before memPoint, label string) (scalePhase, memPoint, error) {
	ph := scalePhase{tasks: add}
	snap0, err := takeSnap(ctx, cl, op)
	if err != nil {
		return ph, memPoint{}, err
	}
	var prof <-chan error
	if o.profile { // about the creates and the Jobs (the burst's busiest part)
		prof = op.cpuProfile(ctx, o, time.Duration(max(add/40, 5))*time.Second, filepath.Join(o.workDir, "profiles", label+".cpu.pprof"))
	}
	start, err := createScaleTasks(ctx, o, cl, scaleNamespaceOf, base, add)
	if err != nil {
		return ph, memPoint{}, err
	}
	want := base + add
	if err := tr.waitFor(ctx, o, fmt.Sprintf("%d Jobs", want), o.timeout(2*time.Minute), func(_, _, _, jobs, _ int) bool { return jobs >= want }); err != nil {
		return ph, memPoint{}, err
	}
	ph.firstToNth = time.Since(start).Seconds()
	if err := tr.waitFor(ctx, o, fmt.Sprintf("%d Tasks Ready", want), o.timeout(10*time.Minute), func(_, ready, _, _, _ int) bool { return ready >= want }); err != nil {
		return ph, memPoint{}, err
	}
	if prof != nil {
		if err := <-prof; err != nil {
			o.logf("CPU profile: %v", err)
		}
	}
	snap1, err := settledSnap(ctx, o, cl, op)
	if err != nil {
		return ph, memPoint{}, err
	}
	o.logf("scale burst of %d diagnosis: %s", add, diagnose(snap0, snap1))
	ph.cpu = snap1.op.Value("process_cpu_seconds_total") - snap0.op.Value("process_cpu_seconds_total")
	if ph.writes, err = operatorWrites(cl, snap0, snap1, map[string]float64{"tasks": float64(add)}); err != nil {
		return ph, memPoint{}, err
	}
	after, err := measureMemory(ctx, o, op, tr, label, want)
	if err != nil {
		return ph, memPoint{}, err
	}
	per := float64(add) / 1000
	ph.rss, ph.heap = (after.rss-before.rss)/(1<<20)/per, (after.heap-before.heap)/(1<<20)/per
	o.logf("scale burst: %d Tasks (%d in all): %d-th Job after %.1f s; writes/Task %.3f (%s); CPU %.2f s per 1000; RSS %.2f, heap %.2f MiB per 1000",
		add, want, add, ph.firstToNth, ph.writes.total()/float64(add), ph.writes.breakdown(float64(add)), ph.cpu/per, ph.rss, ph.heap)
	return ph, after, nil
}

// restartOver stops the operator and starts a new one over the Tasks in
// the cluster; it returns the new operator.
func restartOver(ctx context.Context, o *options, cl *cluster, op *operator, res *scaleResult, name string) (*operator, error) {
	op.stop(o)
	before, err := takeSnap(ctx, cl, nil)
	if err != nil {
		return op, err
	}
	start := time.Now()
	op, err = startOperator(ctx, o, cl, operatorSettings{}, name)
	if err != nil {
		return op, err
	}
	task := func(l map[string]string) bool { return l["controller"] == "task" }
	want := float64(res.restartTasks)
	if err := poll(ctx, o.timeout(2*time.Minute), 250*time.Millisecond, func() (bool, error) {
		m, err := op.metrics(ctx)
		if err != nil {
			return false, err
		}
		return m.Sum("controller_runtime_reconcile_total", task) >= want, nil
	}); err != nil {
		return op, fmt.Errorf("waiting for %d reconciles after the restart: %w", res.restartTasks, err)
	}
	res.restartFirstPass = time.Since(start).Seconds()
	if err := sleepUntil(ctx, time.Now().Add(4*o.settle)); err != nil {
		return op, err
	}
	after, err := takeSnap(ctx, cl, op)
	if err != nil {
		return op, err
	}
	o.logf("restart diagnosis: %s", diagnose(before, after))
	if res.restartWrites, err = operatorWrites(cl, before, after, nil); err != nil {
		return op, err
	}
	o.logf("restart over %d Tasks: one pass over all %.1f s after the process started; then, to %.0f s: %.0f writes (%s), %.0f events, reads %s",
		res.restartTasks, res.restartFirstPass, after.at.Sub(start).Seconds(), res.restartWrites.total(), res.restartWrites.breakdown(1), res.restartWrites.events, breakdown(res.restartWrites.reads, 1))
	return op, nil
}

// wideAdmission fills a TaskQueue of maxRunning scaleWideCap with
// scaleWideCap-1 long attempts, then adds one Task: the mean body of the
// record writes in that step (the API server's request_body_size for
// taskqueues) and the stored record's size, in bytes.
func wideAdmission(ctx context.Context, o *options, cl *cluster) (write, stored float64, err error) {
	const ns = "bench-scale-wide"
	if err := cl.ensureNamespace(ctx, ns); err != nil {
		return 0, 0, err
	}
	tr, err := startTracker(ctx, cl, ns, false)
	if err != nil {
		return 0, 0, err
	}
	defer tr.close()
	q := testutil.NewTaskQueue(ns, "wide", scaleWideCap)
	if err := cl.c.Create(ctx, q); err != nil {
		return 0, 0, err
	}
	long := func(name string) client.Object {
		t := queueTask(ns, name, 0, "wide")
		testutil.PodAnnotations(harness.SimDuration, "3600")(t) // hold the place
		return t
	}
	fill := scaleWideCap - 1
	if _, _, err := createAll(ctx, cl.c, fill, o.workers, func(i int) client.Object { return long(fmt.Sprintf("wide-%05d", i)) }); err != nil {
		return 0, 0, err
	}
	if err := tr.waitFor(ctx, o, fmt.Sprintf("%d wide-queue Jobs", fill), o.timeout(5*time.Minute), func(_, _, _, jobs, _ int) bool { return jobs >= fill }); err != nil {
		return 0, 0, err
	}
	// The API server's counters once the last writes of a step landed.
	settled := func() (metrics, error) {
		if err := sleepUntil(ctx, time.Now().Add(o.settle)); err != nil {
			return nil, err
		}
		return cl.apiMetrics(ctx)
	}
	before, err := settled()
	if err != nil {
		return 0, 0, err
	}
	if err := cl.c.Create(ctx, long("wide-last")); err != nil {
		return 0, 0, err
	}
	if err := tr.waitFor(ctx, o, "the last wide-queue Job", time.Minute, func(_, _, _, jobs, _ int) bool { return jobs >= fill+1 }); err != nil {
		return 0, 0, err
	}
	after, err := settled()
	if err != nil {
		return 0, 0, err
	}
	queues := func(l map[string]string) bool { return l["resource"] == "taskqueues" }
	sum := after.Sum("apiserver_request_body_size_bytes_sum", queues) - before.Sum("apiserver_request_body_size_bytes_sum", queues)
	count := after.Sum("apiserver_request_body_size_bytes_count", queues) - before.Sum("apiserver_request_body_size_bytes_count", queues)
	write = ratio(sum, count)
	var got v1alpha1.TaskQueue
	if err := cl.c.Get(ctx, client.ObjectKeyFromObject(q), &got); err != nil {
		return 0, 0, err
	}
	body, err := json.Marshal(&got)
	if err != nil {
		return 0, 0, err
	}
	o.logf("wide queue: %d places held, one more admitted: %.0f record writes of %.0f bytes on average; the stored record %d bytes (%d names)",
		fill, count, write, len(body), len(got.Status.Admitted))
	return write, float64(len(body)), nil
}

func (r *scaleResult) summary() string {
	s := fmt.Sprintf("N=%d", r.n)
	if r.restartTasks > 0 {
		s += fmt.Sprintf("; restart over %d Tasks: first pass %.1f s, %.0f writes", r.restartTasks, r.restartFirstPass, r.restartWrites.total())
	}
	if r.small != nil && r.big != nil {
		s += fmt.Sprintf("; queue pass mean %.1f ms with %d->%d waiting vs %.1f ms with %d->%d (%.2fx)",
			r.big.pass.mean*1000, r.big.waitingFrom, r.big.waitingTo, r.small.pass.mean*1000, r.small.waitingFrom, r.small.waitingTo, ratio(r.big.pass.mean, r.small.pass.mean))
	}
	if r.wideStored > 0 {
		s += fmt.Sprintf("; wide queue admission write %.0f bytes (stored %.0f)", r.wideWrite, r.wideStored)
	}
	return s
}

// renderScaleFloor adds the rows of step 0's floor under the CPU rows
// (op and grow: the operator's CPU per 1000 over the next b Tasks, and its
// next / first).
func (rs *results) renderScaleFloor(add adder, sf func(func(*scaleResult) float64) []float64, op, grow []float64, a, b int) {
	fl := func(f func(*scaleFloor) float64) func(*scaleResult) float64 {
		return func(r *scaleResult) float64 {
			if r.floor == nil {
				return math.NaN()
			}
			return f(r.floor)
		}
	}
	first, next := sf(fl(func(f *scaleFloor) float64 { return f.first })), sf(fl(func(f *scaleFloor) float64 { return f.next }))
	if !anyValue(next) {
		return
	}
	const scen = "scale"
	add(scen, fmt.Sprintf("  floor: a program making the operator's traffic alone (watches, Job create, 2 status patches, pod list), per 1000 Tasks, the first %d / the next %d", a, b),
		spread(first, "CPU-s")+" / "+spread(next, "CPU-s"), floorVerdict(next, op, 5))
	add(scen, "  operator / floor, the next (ratio: the operator's own work)", spread(ratios(op, next), "x"), "")
	fgrow := sf(fl(func(f *scaleFloor) float64 { return ratio(f.next, f.first) }))
	add(scen, "  floor's next / first (what the cluster's growth costs the traffic alone)", spread(fgrow, "x"), floorVerdict(fgrow, grow, 1.1))
}

// renderScale adds the scale scenario's rows.
func (rs *results) renderScale(add adder) {
	sf := func(f func(*scaleResult) float64) []float64 {
		return rs.collect(func(r *repeatResult) float64 {
			if r.scale == nil {
				return math.NaN()
			}
			return f(r.scale)
		})
	}
	if !anyValue(sf(func(r *scaleResult) float64 { return float64(r.n) })) {
		return
	}
	last := rs.reps[len(rs.reps)-1].scale
	const scen = "scale"
	phase := func(i int, f func(scalePhase) float64) func(*scaleResult) float64 {
		return func(r *scaleResult) float64 {
			if len(r.phases) <= i {
				return math.NaN()
			}
			return f(r.phases[i])
		}
	}
	writes := func(p scalePhase) float64 { return p.writes.total() / float64(p.tasks) }
	cpu := func(p scalePhase) float64 { return p.cpu / float64(p.tasks) * 1000 }
	rss := func(p scalePhase) float64 { return p.rss }
	heap := func(p scalePhase) float64 { return p.heap }
	if len(last.phases) == 2 {
		a, b := last.phases[0].tasks, last.phases[1].tasks
		for _, m := range []struct {
			what   string
			f      func(scalePhase) float64
			unit   string
			target float64
		}{
			{"operator writes per one-shot Task, events excluded", writes, "", 3},
			{"operator CPU per 1000 Tasks", cpu, "CPU-s", 5},
			{"RSS growth per 1000 Tasks", rss, "MiB", memRSSTarget},
			{"live Go heap growth per 1000 Tasks", heap, "MiB", memHeapTarget},
		} {
			first, rest := sf(phase(0, m.f)), sf(phase(1, m.f))
			add(scen, fmt.Sprintf("%s: the first %d / the next %d", m.what, a, b), spread(first, m.unit)+" / "+spread(rest, m.unit), atMost(rest, m.target))
			grow := sf(func(r *scaleResult) float64 { return ratio(phase(1, m.f)(r), phase(0, m.f)(r)) })
			add(scen, "  the next / the first (target <= 1.1: the same within 10%)", spread(grow, "x"), atMost(grow, 1.1))
			if m.unit == "CPU-s" {
				rs.renderScaleFloor(add, sf, rest, grow, a, b)
			}
		}
	}
	if last.restartTasks > 0 {
		first := sf(func(r *scaleResult) float64 { return r.restartFirstPass })
		add(scen, fmt.Sprintf("restart over %d finished and cron Tasks: process start to one pass over all", last.restartTasks), spread(first, "s"), atMost(first, 60))
		w := sf(func(r *scaleResult) float64 { return r.restartWrites.total() })
		add(scen, "  operator writes in the restart window, events excluded", spread(w, "")+" ("+last.restartWrites.breakdown(1)+")", "0: "+verdict(w, atMostOf(0)))
		add(scen, "  operator reads in the restart window (last repeat)", breakdown(last.restartWrites.reads, 1), "")
	}
	if last.small != nil && last.big != nil {
		pass := sf(func(r *scaleResult) float64 { return ratio(r.big.pass.mean, r.small.pass.mean) })
		add(scen, fmt.Sprintf("queue of maxRunning %d: mean pass with %d->%d waiting / with %d->%d", last.big.parallel, last.big.waitingFrom, last.big.waitingTo, last.small.waitingFrom, last.small.waitingTo),
			spread(pass, "x")+fmt.Sprintf(" (%s ms / %s ms)", fmtNum(last.big.pass.mean*1000), fmtNum(last.small.pass.mean*1000)), atMost(pass, 2))
		// The floor of that row: a pass that admits waits for its record
		// write, so the long line's pass takes at least that write's time
		// at the API server, measured in the same window; over the short
		// line's whole pass it is the best the row can show on this API
		// server under the line's load (the line's own creates and Queued
		// writes, which the contract asks for).
		floor := sf(func(r *scaleResult) float64 { return ratio(r.big.pass.recordWrite, r.small.pass.mean) })
		add(scen, "  floor: the long line's record write alone at the API server / the short line's whole pass",
			spread(floor, "x")+fmt.Sprintf(" (%s ms / %s ms; the short line's record write %s ms)", fmtNum(last.big.pass.recordWrite*1000), fmtNum(last.small.pass.mean*1000), fmtNum(last.small.pass.recordWrite*1000)), "")
		cpu := sf(func(r *scaleResult) float64 { return ratio(r.big.pass.cpu, r.small.pass.cpu) })
		add(scen, "  CPU per pass, long line / short", spread(cpu, "x")+fmt.Sprintf(" (%s ms / %s ms)", fmtNum(last.big.pass.cpu*1000), fmtNum(last.small.pass.cpu*1000)), atMost(cpu, 2))
		alloc := sf(func(r *scaleResult) float64 { return ratio(r.big.pass.bytes, r.small.pass.bytes) })
		add(scen, "  bytes allocated per pass, long line / short", spread(alloc, "x")+fmt.Sprintf(" (%s KiB / %s KiB)", fmtNum(last.big.pass.bytes/1024), fmtNum(last.small.pass.bytes/1024)), "")
		// A busy pass admits several attempts at once (places freed while
		// it waited its turn): per admitted attempt the two windows compare
		// like for like.
		cpuA := sf(func(r *scaleResult) float64 {
			return ratio(r.big.perAdmitted(r.big.pass.cpu), r.small.perAdmitted(r.small.pass.cpu))
		})
		add(scen, fmt.Sprintf("  CPU per admitted attempt, long line / short (%s / %s admitted per pass)", fmtNum(last.big.admittedPerPass()), fmtNum(last.small.admittedPerPass())),
			spread(cpuA, "x")+fmt.Sprintf(" (%s ms / %s ms)", fmtNum(last.big.perAdmitted(last.big.pass.cpu)*1000), fmtNum(last.small.perAdmitted(last.small.pass.cpu)*1000)), atMost(cpuA, 2))
		allocA := sf(func(r *scaleResult) float64 {
			return ratio(r.big.perAdmitted(r.big.pass.bytes), r.small.perAdmitted(r.small.pass.bytes))
		})
		add(scen, "  bytes allocated per admitted attempt, long line / short", spread(allocA, "x")+fmt.Sprintf(" (%s KiB / %s KiB)", fmtNum(last.big.perAdmitted(last.big.pass.bytes)/1024), fmtNum(last.small.perAdmitted(last.small.pass.bytes)/1024)), atMost(allocA, 2))
		renderLongLine(add, sf, last.big)
		inv := sf(func(r *scaleResult) float64 { return float64(r.big.inversions) })
		add(scen, "  priority inversions", spread(inv, ""), "0: "+verdict(inv, atMostOf(0)))
		most := sf(func(r *scaleResult) float64 { return float64(r.big.maxActive) })
		add(scen, "  most attempts active at once", spread(most, ""), atMost(most, float64(last.big.parallel)))
	}
	if last.wideStored > 0 {
		wide := sf(func(r *scaleResult) float64 { return r.wideWrite })
		add(scen, fmt.Sprintf("queue of maxRunning %d, full: bytes of the admission write", scaleWideCap), spread(wide, "B"), atMost(wide, 10240))
		add(scen, "  the stored record", spread(sf(func(r *scaleResult) float64 { return r.wideStored }), "B"), "")
	}
	if last.restartTasks > 0 {
		add(scen, fmt.Sprintf("one metrics scrape with %d Tasks: size / per-Task series", last.scrape.tasks),
			spread(sf(func(r *scaleResult) float64 { return r.scrape.scrape / 1024 }), "KiB")+" / "+spread(sf(func(r *scaleResult) float64 { return r.scrape.taskSeries }), ""), "")
	}
}

// renderLongLine adds the long line's admission and throughput rows: the
// line at its length (every Task in line) with the targets, its arrival
// as context, and kwok's pace in each window. The figures are over the
// repeats (sf); big, the last repeat's long line, names them.
func renderLongLine(add adder, sf func(func(*scaleResult) float64) []float64, big *queueResult) {
	const scen = "scale"
	p99 := sf(func(r *scaleResult) float64 { return percentile(r.big.admit, 99) })
	thr := sf(func(r *scaleResult) float64 { return r.big.queued / r.big.unqueued })
	if w := big.steady; !w.from.IsZero() {
		// The line at its length: every Task's place in line written,
		// the arrival over. The first window is then context: its one
		// Queued write per Task (the contract's) goes out while its
		// completions run.
		sp99 := sf(func(r *scaleResult) float64 { return percentile(r.big.steady.admit, 99) })
		add(scen, fmt.Sprintf("  %d queued Tasks, every one in line (%d waiting), the next %d completions: admission latency p99", big.n, w.waiting, w.n), spread(sp99, "s"), atMost(sp99, 1))
		sthr := sf(func(r *scaleResult) float64 { return ratio(r.big.steady.queued, r.big.baseline()) })
		base := fmtNum(big.unqueued)
		if big.unqueuedAfter > 0 {
			base = fmt.Sprintf("%s, the mean of %s before the lines and %s after this window beside its Tasks", fmtNum(big.baseline()), fmtNum(big.unqueued), fmtNum(big.unqueuedAfter))
		}
		add(scen, fmt.Sprintf("  the same: queued / un-queued attempts per second (%s / %s)", fmtNum(w.queued), base), spread(sthr, "x"), ">= 0.8: "+verdict(sthr, atLeastOf(0.8)))
		add(scen, "  (context) the same window, "+kwokRowName, kwokRowBy(sf, func(r *scaleResult) kwokPace { return r.big.steady.kwok }), "")
		add(scen, fmt.Sprintf("  (context) the arrival, first create to the %d-th completion, the places in line written meanwhile (the last %s s after the first create): admission latency p99", big.until, fmtNum(w.lineWritten)), spread(p99, "s"), "")
		add(scen, fmt.Sprintf("  (context) the arrival: queued / un-queued attempts per second (%s / %s)", fmtNum(big.queued), fmtNum(big.unqueued)), spread(thr, "x"), "")
		add(scen, "  (context) the arrival, "+kwokRowName, kwokRowBy(sf, func(r *scaleResult) kwokPace { return r.big.kwok }), "")
	} else {
		add(scen, fmt.Sprintf("  %d queued Tasks, the first %d completions: admission latency p99", big.n, big.until), spread(p99, "s"), atMost(p99, 1))
		add(scen, fmt.Sprintf("  queued / un-queued attempts per second (%s / %s)", fmtNum(big.queued), fmtNum(big.unqueued)), spread(thr, "x"), ">= 0.8: "+verdict(thr, atLeastOf(0.8)))
	}
}
