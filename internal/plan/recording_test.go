package plan_test

import (
	"testing"
	"time"

	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/status"
	"github.com/taskops/task-operator/internal/testutil"
)

// The write of a pass that only saw an attempt start waits (the fast
// path's RecordStartDelay) unless the pass has anything else to say.
func TestARecordWaitsOnlyWhenAllItSaysIsThatAnAttemptStarted(t *testing.T) {
	const delay = 2 * time.Second
	task := testutil.NewTask("ns", "t")
	justStarted := []runs.Run{testutil.MakeRun("0").Active(now).Obj()}
	input := func(change func(*plan.RecordInput)) plan.RecordInput {
		in := plan.RecordInput{Status: status.Input{Task: task, Runs: justStarted, Now: now}, Acted: true, RecordStartDelay: delay}
		change(&in)
		return in
	}
	p := &plan.Plan{}
	unchanged := p.Record(input(func(*plan.RecordInput) {})).Status
	for _, c := range []struct {
		name  string
		in    plan.RecordInput
		waits bool
	}{
		{"an attempt just started, nothing else: the write waits", input(func(*plan.RecordInput) {}), true},
		{"without the fast path's delay: now", input(func(in *plan.RecordInput) { in.RecordStartDelay = 0 }), false},
		{"acting failed: now", input(func(in *plan.RecordInput) { in.Acted = false }), false},
		{"a problem with the spec: now", input(func(in *plan.RecordInput) { in.Status.Problem = &status.Problem{Reason: "InvalidSpec"} }), false},
		{"a Job refused: now", input(func(in *plan.RecordInput) { in.Status.Refusal = &status.Problem{Reason: "JobRefused"} }), false},
		{"the status would not change: now (nothing to write)", input(func(in *plan.RecordInput) { in.Old = unchanged }), false},
		{"nothing started: now", input(func(in *plan.RecordInput) { in.Status.Runs = nil }), false},
	} {
		got := p.Record(c.in).WriteAt
		if waits := !got.IsZero(); waits != c.waits {
			t.Errorf("%s: WriteAt %v", c.name, got)
		}
	}
}
