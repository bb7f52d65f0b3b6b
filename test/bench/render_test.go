package main

import (
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
