package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

// The report renders each scenario measured as its own section of rows,
// and nothing for a scenario not measured.
func TestRenderShowsTheScenariosMeasured(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rs := &results{o: &options{n: 10, workers: 4}, began: now, ended: now.Add(time.Minute),
		reps: []*repeatResult{{
			burst: &burstResult{t0: 2, firstToNth: 4, tTasks: 3, create: 1, taskToJob: []float64{0.1, 0.2}, finishReady: []float64{0.3},
				writes: writeCount{core: map[string]float64{"tasks/status": 20}}},
			queue: &queueResult{parallel: 2, queued: 5, unqueued: 6, n: 10, admit: []float64{0.1},
				writes: writeCount{core: map[string]float64{"jobs": 10}}},
		}}}
	out := rs.render()
	for _, want := range []string{"limit (B0)", "\nburst ", "\nqueue ", "first Task to 10-th Job / T0 (ratio, target <= 3)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	for _, absent := range []string{"\ncron", "\nidle", "\nmemory", "\nprecreated"} {
		if strings.Contains(out, absent) {
			t.Errorf("the report has a %q section for a scenario not measured:\n%s", absent, out)
		}
	}
}

// A row is met only when the median keeps the target and no repeat is
// more than worstSlack past it (the Task-to-Job row once read "met" with a
// 2.11 s repeat of a 1.5 s target).
func TestVerdictNeedsTheMedianAndTheWorstRepeat(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		b    bound
		want string
	}{
		{"median and worst within an upper bound", []float64{1.1, 1.2, 1.7}, atMostOf(1.5), "met"},
		{"a worst repeat past 1.2x of an upper bound", []float64{0.98, 1.19, 2.11}, atMostOf(1.5), "MISSED (worst repeat 2.11)"},
		{"a median past an upper bound", []float64{1.6, 1.6, 1.0}, atMostOf(1.5), "MISSED"},
		{"a zero target allows no slack", []float64{0, 0, 1}, atMostOf(0), "MISSED (worst repeat 1)"},
		{"a worst repeat under a lower bound divided by 1.2", []float64{0.85, 0.9, 0.6}, atLeastOf(0.8), "MISSED (worst repeat 0.600)"},
		{"a lower bound kept", []float64{0.85, 0.9, 0.7}, atLeastOf(0.8), "met"},
		{"missing repeats are not counted", []float64{math.NaN(), 1, 1.1}, atMostOf(1.5), "met"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := verdict(tc.xs, tc.b); got != tc.want {
				t.Fatalf("verdict(%v) = %q, want %q", tc.xs, got, tc.want)
			}
		})
	}
}

// A floor above the target in every repeat says the row cannot be met by
// any program making the same traffic; a floor under it says nothing of
// the kind, and neither does one the operator did better than in a repeat.
func TestFloorVerdictSaysWhetherTheTargetIsUnderTheFloor(t *testing.T) {
	op := []float64{9, 9, 9}
	for _, tc := range []struct {
		xs, op []float64
		want   string
	}{
		{[]float64{7.6, 7.1, 8.0}, op, "above 5 in every repeat: the row's floor"},
		{[]float64{4.9, 5.2, 5.3}, op, "above 5 (median)"},
		{[]float64{4.2, 4.9, 5.3}, op, "under 5"},
		{[]float64{math.NaN()}, op, ""},
		{[]float64{7.6, 7.1, 8.0}, []float64{9, 7.0, 9}, "no bound: the operator did better in a repeat"},
		{[]float64{7.6, 7.1, 8.0}, []float64{9, math.NaN(), 9}, "above 5 in every repeat: the row's floor"},
	} {
		if got := floorVerdict(tc.xs, tc.op, 5); got != tc.want {
			t.Errorf("floorVerdict(%v, %v, 5) = %q, want %q", tc.xs, tc.op, got, tc.want)
		}
	}
}

// The floor process's figures come back from its output; a figure missing
// is an error, not a zero.
func TestParseFloor(t *testing.T) {
	got, err := parseFloor("cpu 7.609\npatches 2144\nheap 9437184\nrss 16777216\n", false)
	if err != nil || got != (floorResult{cpu: 7.609, patches: 2144, heap: 9437184, rss: 16777216}) {
		t.Fatalf("parseFloor = %+v, %v", got, err)
	}
	if _, err := parseFloor("cpu 7.609\n", false); err == nil {
		t.Fatal("parseFloor without heap, rss and patches: no error")
	}
}

// A floor run with a split prints its CPU at the split too (the scale
// scenario's first burst); parseFloor reads past that line.
func TestParseFloorSplit(t *testing.T) {
	out := "cpu 61.5\npatches 20000\nheap 9437184\nrss 16777216\ncpu-split 6.25\n"
	if got, err := parseFloor(out, true); err != nil || got.cpuSplit != 6.25 {
		t.Fatalf("parseFloor with its split = %+v, %v", got, err)
	}
	if _, err := parseFloor(out, false); err != nil {
		t.Fatalf("parseFloor with a split: %v", err)
	}
	if _, err := parseFloor("cpu 61.5\npatches 20000\nheap 9437184\nrss 16777216\n", true); err == nil {
		t.Fatal("parseFloor asked for a split without the line: no error")
	}
}

// The floor's first Task to N-th Job is read over the oracle's when the
// audit log gave it, and left out when it did not (NaN).
func TestTheFloorsArrivalRowNeedsItsAuditFigure(t *testing.T) {
	render := func(floorFirst float64) string {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		return (&results{o: &options{n: 10, workers: 4}, began: now, ended: now.Add(time.Minute),
			reps: []*repeatResult{{burst: &burstResult{t0: 2, firstToNth: 4, oracle: 2, tTasks: 3, create: 1,
				taskToJob: []float64{0.1}, finishReady: []float64{0.3},
				floor: &floorResult{cpu: 6, firstToNth: floorFirst}}}}}).render()
	}
	const row = "floor / oracle-burst, first Task to 10-th Job"
	if out := render(3); !strings.Contains(out, row) || !strings.Contains(out, "1.50 x") || !strings.Contains(out, "above 1.15 in every repeat: the row's floor") {
		t.Errorf("with the floor's 3 s over the oracle's 2 s, the report lacks %q at 1.50 x, above 1.15 in every repeat:\n%s", row, out)
	}
	if out := render(math.NaN()); strings.Contains(out, row) {
		t.Errorf("without the floor's figure, the report has %q:\n%s", row, out)
	}
}

// The floor's Task-to-Job p99 stands under the operator's row with the
// floor's verdict against the row's target, and is left out when the
// floor did not run.
func TestTheFloorsTaskToJobRow(t *testing.T) {
	render := func(opP99 float64, fl *floorResult) string {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		return (&results{o: &options{n: 10, workers: 4}, began: now, ended: now.Add(time.Minute),
			reps: []*repeatResult{{burst: &burstResult{t0: 2, firstToNth: 4, oracle: 2, tTasks: 3, create: 1,
				taskToJob: []float64{opP99}, finishReady: []float64{0.3}, floor: fl}}}}).render()
	}
	const row = "floor's Task-to-Job latency p99"
	fl := &floorResult{cpu: 6, firstToNth: math.NaN(), taskToJobP99: 1.9}
	if out := render(2.1, fl); !strings.Contains(out, row) || !strings.Contains(out, "above 1.50 in every repeat: the row's floor") {
		t.Errorf("with the floor's p99 1.9 s and the operator's 2.1 s, the report lacks %q above 1.50 in every repeat:\n%s", row, out)
	}
	if out := render(1.7, fl); !strings.Contains(out, "no bound: the operator did better in a repeat") {
		t.Errorf("with the operator's p99 1.7 s under the floor's 1.9 s, the report still calls the floor a bound:\n%s", out)
	}
	if out := render(2.1, nil); strings.Contains(out, row) {
		t.Errorf("without a floor, the report has %q:\n%s", row, out)
	}
}

// The pre-created burst is read against the oracle's runs before and
// after it (their mean), and against the one before when the other did
// not run: a cluster that slowed down between the oracle and the
// operator is no longer counted against the operator, nor one that sped
// up for it.
func TestThePrecreatedRowReadsTheOraclesAroundIt(t *testing.T) {
	render := func(after float64) string {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		return (&results{o: &options{n: 10, workers: 4}, began: now, ended: now.Add(time.Minute),
			reps: []*repeatResult{{pre: &precreatedResult{b0: b0Result{t0: 1}, oracle: 2, oracleAfter: after, firstToNth: 3.3}}}}).render()
	}
	const row = "operator / oracle-pre, the mean of before and after (ratio, target <= 1.2)"
	out := render(4)
	if line := lineWith(out, row); !strings.Contains(line, "1.10 x") || !strings.Contains(line, "met") {
		t.Errorf("with oracles of 2 and 4 s around the operator's 3.3 s, the row is not 1.10 x, met: %q\n%s", line, out)
	}
	if !strings.Contains(out, "the same oracle after the operator") || !strings.Contains(lineWith(out, "oracle-pre after / before"), "2 x") {
		t.Errorf("the report does not show the oracle after the operator and its ratio to the one before:\n%s", out)
	}
	out = render(0)
	if line := lineWith(out, row); !strings.Contains(line, "1.65 x") || !strings.Contains(line, "MISSED") {
		t.Errorf("with only the oracle before (2 s), the row is not 1.65 x, missed: %q\n%s", line, out)
	}
	if strings.Contains(out, "the same oracle after the operator") {
		t.Errorf("without an oracle after the operator, the report shows one:\n%s", out)
	}
}

// The cron skew's bound is the mean of the oracle slots' p99 before and
// after the operator's, the one before alone when only it ran, and none
// without an oracle.
func TestTheCronBoundIsTheOracleSlotsAroundTheOperators(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after []float64
		want          float64
	}{
		{"both slots: their mean", []float64{1, 2}, []float64{3, 4}, 3},
		{"only the slot before", []float64{1, 2}, nil, 2},
		{"no oracle", nil, nil, math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cronResult{oracleSkew: tc.before, oracleSkewAfter: tc.after}.oracleP99()
			if got != tc.want && !(math.IsNaN(got) && math.IsNaN(tc.want)) {
				t.Fatalf("oracleP99 = %v, want %v", got, tc.want)
			}
		})
	}
}

// A queued rate is read against the un-queued loop before the queued run
// and after it (their mean), or the one before alone: the queue
// scenario's, and the long line's in line (its loop after its window).
func TestTheQueuedThroughputReadsTheLoopsAroundIt(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after float64
		want          float64
	}{
		{"long line, both loops: their mean", 10, 14, 12},
		{"long line, only the loop before", 10, math.NaN(), 10},
		{"queue, both loops: their mean", 13.8, 12.2, 13},
		{"queue, only the loop before", 15, 0, 15},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &queueResult{unqueued: tc.before, unqueuedAfter: tc.after}
			if got := q.baseline(); got != tc.want {
				t.Fatalf("baseline = %v, want %v", got, tc.want)
			}
		})
	}
}

// lineWith is the first line of out holding s ("" when none does).
func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
