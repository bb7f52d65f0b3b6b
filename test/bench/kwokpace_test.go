package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestKwokPaceIsFromAPodsBindingToKwoksFirstStatusWrite(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 21, 0, 0, 0, time.UTC)
	named := func(line, pod string) string {
		return strings.Replace(line, `"namespace":"bench"`, `"namespace":"bench","name":"`+pod+`"`, 1)
	}
	bind := func(pod string, at time.Time) string {
		return named(auditLine("ResponseComplete", "create", "kube-scheduler/v1.37.2", "system:kube-scheduler", "pods", "binding", 201, at), pod)
	}
	kwok := func(pod string, code int, at time.Time) string {
		return named(auditLine("ResponseComplete", "patch", "kwok/v0.8.0", "kwok", "pods", "status", code, at), pod)
	}
	s := time.Second
	lines := []string{
		bind("a", t0.Add(1*s)),
		kwok("a", 200, t0.Add(3*s)), // logged before kwok's earlier write: the log is in order of completion
		kwok("a", 200, t0.Add(2*s)), // a: 1 s
		bind("b", t0.Add(2*s)),
		kwok("b", 422, t0.Add(17*s)), // b: 15 s, a refused write (a stale copy)
		kwok("b", 200, t0.Add(18*s)),
		bind("c", t0.Add(90*s)), // bound after the window
		kwok("c", 200, t0.Add(91*s)),
		bind("d", t0.Add(3*s)), // bound, kwok never wrote: not counted
		named(auditLine("ResponseComplete", "patch", "kube-controller-manager/v1.37.2", "job-controller", "pods", "status", 200, t0.Add(2*s)), "d"),
	}
	k, err := readKwokPods(strings.NewReader(strings.Join(lines, "\n")), "bench")
	if err != nil {
		t.Fatal(err)
	}
	p := k.pace(t0, t0.Add(time.Minute))
	if len(p.lag) != 2 || p.p50() != 1 || p.p99() != 15 || p.refused != 1 {
		t.Errorf("pace = %s (lags %v), want 2 pods, p50 1 s, p99 15 s, 1 refused", p, p.lag)
	}
	if p := k.pace(t0.Add(time.Minute), t0.Add(2*time.Minute)); len(p.lag) != 1 || p.p99() != 1 || p.refused != 0 {
		t.Errorf("the next minute = %s, want pod c alone, 1 s", p)
	}
	if other, _ := readKwokPods(strings.NewReader(strings.Join(lines, "\n")), "other"); len(other.pace(t0, t0.Add(time.Hour)).lag) != 0 {
		t.Error("another namespace's pods counted")
	}
	var unknown kwokPace
	if v := unknown.p99(); !math.IsNaN(v) {
		t.Errorf("without an audit log p99 = %v, want NaN", v)
	}
}

// The queue's and the long line's rows carry kwok's pace in each window.
func TestTheLinesRowsPrintKwoksPace(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pace := func(lags ...float64) kwokPace { return kwokPace{lag: lags, refused: 3, known: true} }
	big := &queueResult{parallel: 100, n: 10000, until: 2000, queued: 4, unqueued: 9, admit: []float64{0.5}, kwok: pace(15),
		steady: steadyWindow{n: 1000, from: now, to: now.Add(time.Minute), queued: 9, admit: []float64{0.4}, kwok: pace(0.25)}}
	small := &queueResult{parallel: 100, n: 600, queued: 8, unqueued: 9, admit: []float64{0.3}}
	out := (&results{o: &options{n: 10000, workers: 4}, began: now, ended: now.Add(time.Minute),
		reps: []*repeatResult{{
			scale: &scaleResult{n: 10000, small: small, big: big},
			queue: &queueResult{parallel: 50, queued: 5, unqueued: 6, n: 1000, admit: []float64{0.1}, kwok: pace(0.05),
				writes: writeCount{core: map[string]float64{"jobs": 10}}},
		}}}).render()
	for _, want := range []string{
		"(context) the same window, " + kwokRowName,
		"0.250 s / 0.250 s; refused 3",
		"(context) the arrival, " + kwokRowName,
		"15 s / 15 s; refused 3",
		"(context) " + kwokRowName,
		"0.050 s / 0.050 s; refused 3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}
