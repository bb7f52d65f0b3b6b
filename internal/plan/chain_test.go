package plan_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/chain"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

// afterETL makes the Task run after etl.
func afterETL(t *v1alpha1.Task) { t.Spec.After = []v1alpha1.TaskAfter{{Task: "etl"}} }

// etlRan is the Task etl with run id finished successfully an hour ago.
func etlRan(id string) []chain.Upstream {
	return []chain.Upstream{{Name: "etl", History: []v1alpha1.RunRecord{{RunID: id, Result: v1alpha1.RunResultSucceeded, CompletionTime: &metav1.Time{Time: hour(9)}}}}}
}

func TestDecideChains(t *testing.T) {
	trigger := []v1alpha1.TriggerRef{{Task: "etl", RunID: "0", CompletionTime: &metav1.Time{Time: hour(9)}}}
	id := runs.ChainID(trigger)
	active := testutil.MakeRun("m0123456789").Active(ago(10)).Obj()
	tests := []struct {
		name string
		in   plan.Input
		// starts: the run ids started; consumed: status.after's run id for
		// etl ("" none); skipped: triggers a skip date consumed.
		starts   []string
		consumed string
		skipped  int
		problem  bool
	}{
		{
			name: "a Task with after and no schedule does not run at creation",
			in:   plan.Input{Task: task(afterETL)},
		},
		{
			name:     "a finished upstream run starts one run, and is consumed",
			in:       plan.Input{Task: task(afterETL), Upstreams: etlRan("0")},
			starts:   []string{id},
			consumed: "0",
		},
		{
			name: "under Forbid the trigger waits for the active run, not consumed",
			in:   plan.Input{Task: task(afterETL), Upstreams: etlRan("0"), Runs: []runs.Run{active}},
		},
		{
			name: "suspended, the trigger waits, not consumed",
			in:   plan.Input{Task: task(afterETL, testutil.Suspend(true)), Upstreams: etlRan("0")},
		},
		{
			name:     "on a skip date the trigger is consumed without a run",
			in:       plan.Input{Task: task(afterETL, func(t *v1alpha1.Task) { t.Spec.SkipDates = []string{"2026-01-01"} }), Upstreams: etlRan("0")},
			consumed: "0",
			skipped:  1,
		},
		{
			name:     "a run whose Job exists (its status write was lost) is consumed, never started again",
			in:       plan.Input{Task: task(afterETL), Upstreams: etlRan("0"), Runs: []runs.Run{testutil.MakeRun(id).Active(ago(10)).Trigger(trigger...).Obj()}},
			consumed: "0",
		},
		{
			name:    "a cycle is InvalidSpec and starts nothing",
			in:      plan.Input{Task: task(afterETL), Upstreams: etlRan("0"), Cycle: []string{"t", "etl", "t"}},
			problem: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = now
			p := plan.Decide(tc.in)
			var starts []string
			for _, s := range p.Start {
				starts = append(starts, s.RunID)
			}
			if len(starts) != len(tc.starts) || (len(starts) > 0 && starts[0] != tc.starts[0]) {
				t.Errorf("starts %v, want %v", starts, tc.starts)
			}
			consumed := ""
			for _, a := range p.After {
				if a.Task == "etl" {
					consumed = a.LastConsumedRunID
				}
			}
			if consumed != tc.consumed {
				t.Errorf("status.after consumed %q, want %q", consumed, tc.consumed)
			}
			if len(p.ChainSkipped) != tc.skipped {
				t.Errorf("%d triggers skipped, want %d", len(p.ChainSkipped), tc.skipped)
			}
			if (p.Problem != nil) != tc.problem {
				t.Errorf("problem %+v, want one: %v", p.Problem, tc.problem)
			}
		})
	}
}
