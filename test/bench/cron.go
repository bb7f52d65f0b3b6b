package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/internal/runs"
)

// Cron fire: N cron Tasks (or CronJobs) due in one slot.

// cronKind is one cron run: the operator with some flags, or the CronJob
// controller.
type cronKind struct {
	name     string // row label
	operator bool
	// oracle: the cron oracle (oracle.go) creates the slot's Jobs of the
	// Tasks, with no operator running, on a cluster of its own.
	oracle bool
	// withOracle: before the operator starts, and again after it has
	// stopped, the cron oracle fires a slot of its own on the same cluster
	// (oracleCronSlot): the two bracket the operator's, and their mean is
	// the bound its skew is read against (cronResult.oracleP99).
	withOracle bool
	settings   operatorSettings
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
	// oracleSkew are the skews of the oracle's slot on the same cluster,
	// minutes before the operator's (kind.withOracle); oracleSkewAfter
	// those of its slot after the operator's (stopped, its Tasks gone).
	oracleSkew, oracleSkewAfter []float64
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

// oracleP99 is the p99 skew the operator's is read against: the mean of
// the oracle slots' p99 before and after the operator's, which bracket it
// on one cluster (a cluster that slows or speeds up over the session's
// minutes then counts neither for nor against the operator); the one
// before alone when only it ran; NaN without an oracle.
func (r cronResult) oracleP99() float64 {
	return bracketMean(percentile(r.oracleSkew, 99), percentile(r.oracleSkewAfter, 99))
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
	if kind.withOracle {
		if res.oracleSkew, err = oracleCronSlot(ctx, o, cl, res.b0.t0); err != nil {
			return nil, fmt.Errorf("oracle slot: %w", err)
		}
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
	slot, schedule := nextSlot(o, kind, res.b0.t0)
	res.slot = slot
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
		waitScheduled(ctx, o, tr, kind.name, slot, snapAt, start, res)
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
	if err := periodWrites(ctx, cl, kind, oracle, before, after, res); err != nil {
		return nil, err
	}
	if prof != nil {
		if err := <-prof; err != nil {
			o.logf("CPU profile: %v", err)
		}
	}

	runID := runs.ScheduledID(slot)
	countSlotRuns(tr, kind, slot, runID, res)
	res.fire, res.fireStatus = percentile(res.skew, 100), -1
	if err := fireCosts(cl, kind, slot, res); err != nil {
		return nil, err
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
	if kind.withOracle {
		if err := oracleSlotAfter(ctx, o, cl, op, kind, res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// oracleSlotAfter fires the oracle's slot again after the operator's, on
// a cluster as the first slot met it (the operator stopped, its Tasks,
// Jobs and pods deleted): the other side of the bracket.
func oracleSlotAfter(ctx context.Context, o *options, cl *cluster, op *operator, kind cronKind, res *cronResult) error {
	if err := clearForOracle(ctx, o, cl, op); err != nil {
		return err
	}
	var err error
	if res.oracleSkewAfter, err = oracleCronSlot(ctx, o, cl, res.b0.t0); err != nil {
		return fmt.Errorf("oracle slot after the operator: %w", err)
	}
	o.logf("cron %s: p99 skew %.3f s against the oracle slots' %.3f s before and %.3f s after (mean %.3f s): %.2f x",
		kind.name, percentile(res.skew, 99), percentile(res.oracleSkew, 99), percentile(res.oracleSkewAfter, 99), res.oracleP99(), percentile(res.skew, 99)/res.oracleP99())
	return nil
}

// periodWrites counts the controller's writes over the slot period
// (before to after) into res; the oracle's process is waited for instead
// (it creates the Jobs and nothing else).
func periodWrites(ctx context.Context, cl *cluster, kind cronKind, oracle *oracleProcess, before, after writeSnap, res *cronResult) error {
	var err error
	switch {
	case kind.operator:
		res.writes, err = operatorWrites(cl, before, after, nil)
	case kind.oracle:
		err = oracle.wait()
	default:
		res.writes, err = cronJobWrites(ctx, cl, benchNamespace, before, after)
	}
	return err
}

// nextSlot is the first minute boundary after kind's lead time, and the
// schedule naming it ("M H * * *").
func nextSlot(o *options, kind cronKind, t0 float64) (time.Time, string) {
	slot := time.Now().Add(cronLead(o, kind, t0)).Truncate(time.Minute).Add(time.Minute)
	return slot, fmt.Sprintf("%d %d * * *", slot.UTC().Minute(), slot.UTC().Hour())
}

// cronLead is how long before the slot the session starts creating:
// creating the objects (a few x T0) plus, for the operator, its first pass
// over every Task (about 2 writes each: finalizer and status), which a
// client-side limit stretches to 2N/qps.
func cronLead(o *options, kind cronKind, t0 float64) time.Duration {
	lead := 15*time.Second + time.Duration(3*t0*float64(time.Second))
	if kind.operator {
		if kind.settings.qps > 0 {
			lead += time.Duration(2.6 * float64(o.n) / kind.settings.qps * float64(time.Second))
		} else {
			lead += time.Duration(float64(o.n)/50) * time.Second
		}
	}
	return lead
}

// waitScheduled waits, until snapAt, for the operator to have scheduled
// every Task for the slot, and records how many it had and how long it
// took (setupLate when not all in time).
func waitScheduled(ctx context.Context, o *options, tr *tracker, name string, slot, snapAt, start time.Time, res *cronResult) {
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
		o.logf("cron %s: WARNING: only %d of %d Tasks scheduled 3 s before the slot: %v", name, res.scheduledAt, n, err)
	}
	res.setup = time.Since(start).Seconds()
	o.logf("cron %s: %d Tasks scheduled for the slot, %.1f s after the first create", name, res.scheduledAt, res.setup)
}

// countSlotRuns counts the slot's runs whose Job appeared within the slot
// period (started, with their skew) and after it (late).
func countSlotRuns(tr *tracker, kind cronKind, slot time.Time, runID string, res *cronResult) {
	periodEnd := slot.Add(time.Minute)
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
}

// fireCosts reads from the audit log what the controller wrote to status
// inside the fire (slot to last Job), and what the Job creates cost.
func fireCosts(cl *cluster, kind cronKind, slot time.Time, res *cronResult) error {
	if cl.audit != "" && res.started > 0 {
		counts, err := countAuditFile(cl.audit, slot, slot.Add(time.Duration(res.fire*float64(time.Second))+time.Millisecond))
		if err != nil {
			return err
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
			return err
		}
	}
	return nil
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
	after, err := settledSnap(ctx, o, cl, op)
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

// oracleCronSlot fires one slot of N cron Tasks through the cron oracle
// (the slot's Job creates and nothing else) in a namespace of its own on
// cl, before the operator starts there, and returns the skews of the runs
// started within the slot period. The operator's skew is then read
// against a bound from the same cluster, minutes apart, as the burst's
// oracle: an oracle on a cluster of its own carried the variance of two
// clusters (README.md, the cron scenario). It cleans up as
// runOracleBurst does.
func oracleCronSlot(ctx context.Context, o *options, cl *cluster, t0 float64) ([]float64, error) {
	if err := cl.ensureNamespace(ctx, oracleNamespace); err != nil {
		return nil, err
	}
	tr, err := startTracker(ctx, cl, oracleNamespace, false)
	if err != nil {
		return nil, err
	}
	defer tr.close()
	kind := cronKind{name: "oracle (same cluster)", oracle: true}
	slot, schedule := nextSlot(o, kind, t0)
	if _, _, err := createAll(ctx, cl.c, o.n, o.workers, func(i int) client.Object {
		return cronTask(oracleNamespace, fmt.Sprintf("oracle-cron-%05d", i), schedule)
	}); err != nil {
		return nil, err
	}
	p, err := startOracle(ctx, o, cl, oracleArgs{namespace: oracleNamespace, mode: oracleCron, n: o.n, slot: slot})
	if err != nil {
		return nil, err
	}
	if err := sleepUntil(ctx, slot.Add(time.Minute)); err != nil {
		return nil, err
	}
	if err := p.wait(); err != nil {
		return nil, err
	}
	var r cronResult
	countSlotRuns(tr, kind, slot, runs.ScheduledID(slot), &r)
	o.logf("cron oracle on the same cluster: %d of %d runs started within the slot period; skew p50 %.3f s p99 %.3f s max %.3f s",
		r.started, o.n, percentile(r.skew, 50), percentile(r.skew, 99), percentile(r.skew, 100))
	return r.skew, cleanNamespace(ctx, o, cl, oracleNamespace)
}
