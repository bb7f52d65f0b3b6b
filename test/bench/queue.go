package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// The queue scenario: N one-shot Tasks in one TaskQueue, pods finishing in
// about a second, against the same work with no queue but a load generator
// that keeps as many attempts running as the queue admits, creating the
// next Task whenever a Job completes (the un-queued burst at equal
// parallelism), in the same session. Throughput is attempts completed per
// second, from the first Task created to the N-th Job complete: what the
// queue dispatches, without the status writes that follow.

const (
	queueNamespace    = "bench-queue"
	unqueuedNamespace = "bench-unqueued"
	// queuePodSeconds is how long each pod runs (kwok).
	queuePodSeconds = "1"
	// urgentEvery: every urgentEvery-th Task of the second half has
	// priority 10, the rest 0, so priority order is exercised.
	urgentEvery = 10
)

type queueResult struct {
	parallel int
	// Throughputs: attempts completed per second, from the first Task
	// created to the N-th Job complete.
	queued, unqueued float64
	// unqueuedAfter: the un-queued closed loop run again after the queued
	// run, beside its Tasks (0 when not run): in the queue scenario after
	// every attempt finished, for a long line after its second window
	// (steady), its queue suspended and its active attempts finished. The
	// queued rate is read against the mean of both loops (baseline), as
	// the oracles' rows are: the loop before runs on a cluster without
	// the queued Tasks, so a single loop carries alone whatever the
	// session drifts by in between.
	unqueuedAfter float64
	// queuedReady: Tasks Ready per second (to the N-th Task Ready), queued.
	queuedReady float64
	// maxActive: the most attempts active at once (Job seen, not yet seen
	// complete), from the tracker's observations.
	maxActive int
	// admit: from a place freeing (a Job seen complete) to the next Job
	// seen created, seconds.
	admit []float64
	// inversions: a lower-priority Task admitted (its Job name first seen
	// in the queue's record) while a higher-priority Task had been waiting
	// (its status.queued seen) for more than inversionGrace and was
	// admitted later.
	inversions, inversionsNear int
	// admitToJob: from an admission to its Job, seconds.
	admitToJob []float64
	writes     writeCount
	// eventsDropped: Events the operator's recorder did not send in the
	// run (eventsDropped).
	eventsDropped float64
	n             int
	// until: measure only until this many attempts completed (0: all n;
	// a long line's first part).
	until int
	// pass is the queue controller's passes while the line was long:
	// from waitingFrom Tasks waiting down to waitingTo.
	pass                   passCost
	waitingFrom, waitingTo int
	// steady is a long line's second window (steady.n > 0 and until < n):
	// steady.n more completions from when every Task's place in line had
	// been written.
	steady steadyWindow
	// kwok is the simulated kubelet's pace (kwokpace.go) over the pods
	// bound from the first create to the until-th completion.
	kwok kwokPace
}

// steadyWindow is a long line measured at its length with its arrival
// over: the first window (from the first create) carries the writes that
// put every Task in line, one per Task, which the contract asks for
// (Queued) and which a line of 10,000 arriving at once sends, at most 4
// at a time, beside its first thousands of attempts.
type steadyWindow struct {
	n int // completions to measure (0: no such window)
	// lineWritten: s from the first create to every Task in line.
	lineWritten float64
	// waiting: Tasks waiting when the window began.
	waiting int
	// queued: attempts completed per second in the window.
	queued float64
	// admit: admission latencies of the Jobs created in the window.
	admit []float64
	// from, to: the window (from zero: not measured). It is read against
	// queueResult.baseline.
	from, to time.Time
	// kwok: the simulated kubelet's pace over the window's pods.
	kwok kwokPace
}

// baseline is the un-queued rate the queued run is read against: the
// mean of the loop run before it and after it (bracketMean), or before
// alone.
func (q *queueResult) baseline() float64 {
	return bracketMean(q.unqueued, nonZero(q.unqueuedAfter))
}

// admittedPerPass is how many attempts a pass of the window admitted on
// average: the line's shrinking over the window (every Task exists before
// it) over the passes.
func (q *queueResult) admittedPerPass() float64 {
	return float64(q.waitingFrom-q.waitingTo) / q.pass.passes
}

// perAdmitted is a per-pass cost of the window per admitted attempt.
func (q *queueResult) perAdmitted(perPass float64) float64 {
	return perPass / q.admittedPerPass()
}

func (q *queueResult) passDescription() string {
	return fmt.Sprintf("queue passes with %d -> %d waiting: %s", q.waitingFrom, q.waitingTo, q.pass)
}

// inversionGrace is how long a waiting Task may be unknown to the queue's
// cache when another is admitted: the status write that puts it in line
// reaches the operator's watch some time after the benchmark's own (under
// a burst on 2 cores, hundreds of milliseconds). inversionsNear counts
// with a tenth of it, to show how much is that lag.
const inversionGrace = time.Second

func queueTask(ns, name string, priority int32, queue string) *v1alpha1.Task {
	t := oneShotTask(ns, name)
	t.Spec.QueueName, t.Spec.Priority = queue, priority
	testutil.PodAnnotations(harness.SimDuration, queuePodSeconds)(t)
	return t
}

func sessionQueue(ctx context.Context, o *options, rep int) (*queueResult, error) {
	cl, err := upCluster(ctx, o, o.fastKCM())
	if err != nil {
		return nil, err
	}
	defer cl.down(ctx, o)
	op, err := startOperator(ctx, o, cl, operatorSettings{}, fmt.Sprintf("queue-%d", rep))
	if err != nil {
		return nil, err
	}
	defer op.stop(o)
	n := o.n
	res := &queueResult{parallel: min(50, max(n/20, 5)), n: n}
	if res.unqueued, err = runUnqueued(ctx, o, cl, unqueuedNamespace, n, res.parallel); err != nil {
		return nil, err
	}
	if err := runQueued(ctx, o, cl, op, queueNamespace, res, fmt.Sprintf("queue-%d", rep)); err != nil {
		return nil, err
	}
	// The loop again, beside both runs' Tasks: every queued attempt has
	// finished (runQueued waits for all N Ready).
	if res.unqueuedAfter, err = runUnqueued(ctx, o, cl, unqueuedNamespace+"-after", n, res.parallel); err != nil {
		return nil, err
	}
	// The row's figure as the report reads it (baseline), so a repeat's
	// log line and the table agree.
	o.logf("queue: queued / un-queued %.3f (%.1f attempts/s against %.1f, the mean of %.1f before and %.1f after)",
		res.queued/res.baseline(), res.queued, res.baseline(), res.unqueued, res.unqueuedAfter)
	return res, nil
}

// runUnqueued: no queue, a closed loop keeps parallel Tasks in flight
// until n attempts completed; attempts completed per second.
func runUnqueued(ctx context.Context, o *options, cl *cluster, ns string, n, parallel int) (float64, error) {
	if err := cl.ensureNamespace(ctx, ns); err != nil {
		return 0, err
	}
	utr, err := startTracker(ctx, cl, ns, true)
	if err != nil {
		return 0, err
	}
	defer utr.close()
	freed := make(chan struct{}, n)
	utr.mu.Lock()
	utr.onComplete = func() { freed <- struct{}{} }
	utr.mu.Unlock()
	start := time.Now()
	// A place that never frees is a broken run (an operator that exited),
	// not a slow one: fail instead of waiting until CI's deadline.
	stall := o.timeout(2 * time.Minute)
	for i := 0; i < n; i++ {
		if i >= parallel {
			select {
			case <-freed:
			case <-time.After(stall):
				return 0, fmt.Errorf("no un-queued attempt completed for %s (%d of %d Tasks created)", stall, i, n)
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		if err := cl.c.Create(ctx, queueTask(ns, fmt.Sprintf("free-%05d", i), 0, "")); err != nil {
			return 0, err
		}
	}
	if err := utr.waitFor(ctx, o, fmt.Sprintf("%d un-queued Jobs complete", n), o.timeout(10*time.Minute), func(_, _, _, _, complete int) bool { return complete >= n }); err != nil {
		return 0, err
	}
	thr := float64(n) / time.Since(start).Seconds()
	o.logf("un-queued: %d attempts, %d at a time: %.1f attempts/s", n, parallel, thr)
	if err := utr.waitFor(ctx, o, fmt.Sprintf("%d un-queued Tasks Ready", n), o.timeout(10*time.Minute), func(_, ready, _, _, _ int) bool { return ready >= n }); err != nil {
		return 0, err
	}
	return thr, nil
}

// runQueued: one queue of res.parallel in namespace ns, res.n Tasks
// created at once; it fills res (all but unqueued). The queue's passes are
// measured once every Task is in line, for passWindowLength
// (passesInLine). label names the saved profiles.
func runQueued(ctx context.Context, o *options, cl *cluster, op *operator, ns string, res *queueResult, label string) error {
	n := res.n
	if err := cl.ensureNamespace(ctx, ns); err != nil {
		return err
	}
	tr, err := startTracker(ctx, cl, ns, true)
	if err != nil {
		return err
	}
	defer tr.close()
	q := testutil.NewTaskQueue(ns, "bench", int32(res.parallel))
	if err := cl.c.Create(ctx, q); err != nil {
		return err
	}
	if err := sleepUntil(ctx, time.Now().Add(2*time.Second)); err != nil {
		return err
	}
	before, err := takeSnap(ctx, cl, op)
	if err != nil {
		return err
	}
	start, _, err := createAll(ctx, cl.c, n, o.workers, func(i int) client.Object {
		prio := int32(0)
		if i >= n/2 && i%urgentEvery == 0 {
			prio = 10
		}
		return queueTask(ns, fmt.Sprintf("queued-%05d", i), prio, "bench")
	})
	if err != nil {
		return err
	}
	until := n
	if res.until > 0 {
		until = min(res.until, n)
	}
	// A line's passes are measured once it is in line; a long line's
	// after its second window (measureSteady), whose admissions are timed.
	twoWindows := res.steady.n > 0 && until < n
	var window passWindow
	if !twoWindows {
		if window, err = passesInLine(ctx, o, cl, op, tr, res, label); err != nil {
			return err
		}
	}
	if err := tr.waitFor(ctx, o, fmt.Sprintf("%d queued Jobs complete", until), o.timeout(10*time.Minute), func(_, _, _, _, complete int) bool { return complete >= until }); err != nil {
		return err
	}
	firstEnd := time.Now()
	res.queued = float64(until) / firstEnd.Sub(start).Seconds()
	if twoWindows {
		if err := measureSteady(ctx, o, tr, start, res); err != nil {
			return err
		}
		if window, err = passesInLine(ctx, o, cl, op, tr, res, label); err != nil {
			return err
		}
	}
	if until < n {
		// A part of a long line: its Ready rate and writes per attempt
		// would mix in the writes that put the whole line in queue.
		res.queuedReady, res.writes = math.NaN(), writeCount{core: map[string]float64{}}
	} else {
		if err := tr.waitFor(ctx, o, fmt.Sprintf("%d queued Tasks Ready", n), o.timeout(10*time.Minute), func(_, ready, _, _, _ int) bool { return ready >= n }); err != nil {
			return err
		}
		res.queuedReady = float64(n) / time.Since(start).Seconds()
		after, err := settledSnap(ctx, o, cl, op)
		if err != nil {
			return err
		}
		if res.writes, err = operatorWrites(cl, before, after, map[string]float64{"tasks": float64(n)}); err != nil {
			return err
		}
		res.eventsDropped = eventsDropped(before, after)
	}
	// Everything timed is measured: the window's profiles can be read now.
	res.pass = window.cost(ctx, o)
	tasks, jobs := tr.snapshot()
	if err := writeQueueTimes(filepath.Join(o.workDir, "logs", label+".jobs.tsv"), start, tasks, jobs); err != nil {
		o.logf("  %s: %v", label, err) // evidence for a look, not a figure: the run goes on
	}
	res.maxActive, res.admit = activeAndAdmission(jobs, res.parallel)
	readKwokPace(o, cl, ns, label, start, firstEnd, until, res)
	if !res.steady.from.IsZero() {
		res.steady.admit = admissionsBetween(jobs, res.parallel, res.steady.from, res.steady.to)
		o.logf("queue: with every Task in line (%.1f s after the first create, %d waiting): %.1f attempts/s over %d completions (%.2f x un-queued before the line), admission p50 %.3f s p99 %.3f s",
			res.steady.lineWritten, res.steady.waiting, res.steady.queued, res.steady.n, res.steady.queued/res.unqueued, percentile(res.steady.admit, 50), percentile(res.steady.admit, 99))
	}
	res.inversions = inversions(tasks, jobs, inversionGrace, func(ex string) { o.logf("  inversion: %s", ex) })
	res.inversionsNear = inversions(tasks, jobs, inversionGrace/10, nil)
	for _, j := range jobs {
		if !j.admitted.IsZero() {
			res.admitToJob = append(res.admitToJob, j.seen.Sub(j.admitted).Seconds())
		}
	}
	o.logf("queue: %d Tasks (measured to the %d-th completion), maxRunning %d: %.1f attempts/s queued vs %.1f attempts/s un-queued at equal parallelism before it (%.2f x the loop before); Tasks Ready %.1f/s; at most %d active; admission p50 %.3f s p99 %.3f s (admitted to Job p99 %.3f s); %d priority inversions (%d within %s); writes/attempt %.2f (%s) + events %.2f (%.0f dropped); %s",
		n, until, res.parallel, res.queued, res.unqueued, res.queued/res.unqueued, res.queuedReady, res.maxActive, percentile(res.admit, 50), percentile(res.admit, 99), percentile(res.admitToJob, 99),
		res.inversions, res.inversionsNear, inversionGrace/10, res.writes.total()/float64(n), res.writes.breakdown(float64(n)), res.writes.events/float64(n), res.eventsDropped, res.passDescription())
	return nil
}

// readKwokPace reads the simulated kubelet's pace (kwokpace.go) in the
// run's windows from the audit log: context for the figures that follow
// the Jobs' completions. Without an audit log it stays not known.
func readKwokPace(o *options, cl *cluster, ns, label string, start, firstEnd time.Time, until int, res *queueResult) {
	if cl.audit == "" {
		return
	}
	k, err := readKwokPodsFile(cl.audit, ns)
	if err != nil {
		o.logf("  %s: reading kwok's pace: %v", label, err) // context, not a figure: the run goes on
		return
	}
	res.kwok = k.pace(start, firstEnd)
	o.logf("%s: kwok, first create to the %d-th completion: %s", label, until, res.kwok)
	if w := &res.steady; !w.from.IsZero() {
		w.kwok = k.pace(w.from, w.to)
		o.logf("%s: kwok, every Task in line: %s", label, w.kwok)
	}
}

// measureSteady measures a long line's second window (res.steady): it
// waits until every Task is in line, then for res.steady.n more
// completions.
func measureSteady(ctx context.Context, o *options, tr *tracker, start time.Time, res *queueResult) error {
	n, w := res.n, &res.steady
	if err := waitInLine(ctx, o, tr, n); err != nil {
		return err
	}
	w.from = time.Now()
	w.lineWritten = w.from.Sub(start).Seconds()
	_, _, _, _, done := tr.counts()
	w.waiting = res.waitingNow(tr)
	want := min(done+w.n, n)
	if err := tr.waitFor(ctx, o, fmt.Sprintf("%d queued Jobs complete (every Task in line)", want), o.timeout(10*time.Minute), func(_, _, _, _, complete int) bool { return complete >= want }); err != nil {
		return err
	}
	w.to = time.Now()
	w.queued = float64(want-done) / w.to.Sub(w.from).Seconds()
	return nil
}

// waitingNow is how many of the line's Tasks wait now: neither running
// (at most res.parallel) nor complete.
func (q *queueResult) waitingNow(tr *tracker) int {
	_, _, _, _, done := tr.counts()
	return max(q.n-q.parallel-done, 0)
}

// waitInLine waits until the tracker has seen all n Tasks in line.
func waitInLine(ctx context.Context, o *options, tr *tracker, n int) error {
	if err := poll(ctx, o.timeout(10*time.Minute), 50*time.Millisecond, func() (bool, error) { return tr.lined() >= n, nil }); err != nil {
		return fmt.Errorf("waiting for all %d Tasks in line: %w (%d are)", n, err, tr.lined())
	}
	return nil
}

// passesInLine captures the queue's passes (measurePasses) once every
// Task of the line is in line, so that what a pass costs is read at the
// line's length and not beside the writes that put it in line (one per
// Task, which a long line sends for minutes: steadyWindow); it sets
// res.waitingFrom and res.waitingTo, the Tasks waiting at the window's
// ends.
func passesInLine(ctx context.Context, o *options, cl *cluster, op *operator, tr *tracker, res *queueResult, label string) (passWindow, error) {
	if err := waitInLine(ctx, o, tr, res.n); err != nil {
		return passWindow{}, err
	}
	res.waitingFrom = res.waitingNow(tr)
	window, err := measurePasses(ctx, o, cl, op, label)
	if err != nil {
		return window, err
	}
	res.waitingTo = res.waitingNow(tr)
	return window, nil
}

// admissionsBetween are the admission latencies (activeAndAdmission) of
// the Jobs created from from to to.
func admissionsBetween(jobs map[string]jobTrack, parallel int, from, to time.Time) []float64 {
	var out []float64
	for _, a := range admissions(jobs, parallel) {
		if !a.at.Before(from) && !a.at.After(to) {
			out = append(out, a.latency)
		}
	}
	return out
}

// admission is a Job created after the first `parallel`: when, and how
// long after the completion that freed its place.
type admission struct {
	at      time.Time
	latency float64
}

// admissions pairs the k-th Job created after the first `parallel` with
// the k-th completion, in time order.
func admissions(jobs map[string]jobTrack, parallel int) []admission {
	var created, completed []time.Time
	for _, j := range jobs {
		created = append(created, j.seen)
		if !j.complete.IsZero() {
			completed = append(completed, j.complete)
		}
	}
	sort.Slice(created, func(i, k int) bool { return created[i].Before(created[k]) })
	sort.Slice(completed, func(i, k int) bool { return completed[i].Before(completed[k]) })
	var out []admission
	for k := parallel; k < len(created) && k-parallel < len(completed); k++ {
		out = append(out, admission{at: created[k], latency: created[k].Sub(completed[k-parallel]).Seconds()})
	}
	return out
}

// activeAndAdmission replays the Jobs' creations and completions in time
// order: the most active at once, and for every Job created after the
// first `parallel`, how long after the completion that freed its place.
func activeAndAdmission(jobs map[string]jobTrack, parallel int) (int, []float64) {
	type ev struct {
		at    time.Time
		delta int
	}
	var evs []ev
	for _, j := range jobs {
		evs = append(evs, ev{j.seen, +1})
		if !j.complete.IsZero() {
			evs = append(evs, ev{j.complete, -1})
		}
	}
	sort.Slice(evs, func(i, k int) bool {
		if evs[i].at.Equal(evs[k].at) {
			return evs[i].delta < evs[k].delta // a completion first at the same instant
		}
		return evs[i].at.Before(evs[k].at)
	})
	active, most := 0, 0
	for _, e := range evs {
		active += e.delta
		most = max(most, active)
	}
	var admit []float64
	for _, a := range admissions(jobs, parallel) {
		admit = append(admit, a.latency)
	}
	return most, admit
}

// inversions counts Tasks admitted while a Task of higher priority had
// been waiting longer than grace and was admitted later.
func inversions(tasks map[string]taskTrack, jobs map[string]jobTrack, grace time.Duration, examples func(string)) int {
	type entry struct {
		name          string
		prio          int32
		queued, start time.Time
	}
	var es []entry
	var t0 time.Time
	for _, j := range jobs {
		t, ok := tasks[j.task]
		if !ok || j.admitted.IsZero() {
			continue
		}
		es = append(es, entry{j.task, t.priority, t.queued, j.admitted})
		if t0.IsZero() || t.seen.Before(t0) {
			t0 = t.seen
		}
	}
	count := 0
	for _, low := range es {
		for _, high := range es {
			if high.prio > low.prio && !high.queued.IsZero() && high.queued.Add(grace).Before(low.start) && high.start.After(low.start) {
				if count < 3 && examples != nil {
					examples(fmt.Sprintf("%s (priority %d) admitted at +%.3f s while %s (priority %d) waited since +%.3f s, admitted at +%.3f s",
						low.name, low.prio, low.start.Sub(t0).Seconds(), high.name, high.prio, high.queued.Sub(t0).Seconds(), high.start.Sub(t0).Seconds()))
				}
				count++
				break
			}
		}
	}
	return count
}

// writeQueueTimes saves, per Job of a queue run, when the benchmark saw
// its Task first waiting, the queue's record list it, the Job and its
// completion (seconds from the first create; empty: never seen), so a
// latency's tail can be followed to the attempts that make it.
func writeQueueTimes(path string, start time.Time, tasks map[string]taskTrack, jobs map[string]jobTrack) error {
	at := func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return strconv.FormatFloat(t.Sub(start).Seconds(), 'f', 3, 64)
	}
	names := slices.Sorted(maps.Keys(jobs))
	var b strings.Builder
	b.WriteString("job\ttask\tpriority\tqueued\tadmitted\tseen\tcomplete\n")
	for _, name := range names {
		j := jobs[name]
		t := tasks[j.task]
		fmt.Fprintf(&b, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", name, j.task, t.priority, at(t.queued), at(j.admitted), at(j.seen), at(j.complete))
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
