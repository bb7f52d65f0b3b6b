package plan

import (
	"fmt"
	"strings"

	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/chain"
	"github.com/taskops/task-operator/internal/scheduler"
	"github.com/taskops/task-operator/internal/status"
)

// chainTriggers are the new runs spec.after's upstream runs ask for now
// (internal/chain), for the scheduler, oldest first. On a skip date they
// are consumed without a run (p.ChainSkipped). Which of them start, or
// wait in the queue, is consumed at the end of stage 4 (consumeTriggers).
func (d *decision) chainTriggers(known map[string]bool) []scheduler.NewRun {
	task := d.task
	if len(task.Spec.After) == 0 {
		return nil
	}
	d.consumed = chain.Consumed(task.Status.After, d.recordedTriggers()...)
	d.p.UpstreamMissing = chain.Missing(d.in.Upstreams)
	pending := chain.Pending(task, d.in.Upstreams, d.consumed, known)
	if len(pending) == 0 {
		return nil
	}
	if skip, err := d.calendar.SkipsDay(d.now, ptr.Deref(task.Spec.TimeZone, "")); err == nil && skip {
		for _, t := range pending {
			chain.Consume(d.consumed, t.Refs)
		}
		d.p.ChainSkipped = pending
		return nil
	}
	d.triggers = map[string]chain.Trigger{}
	out := make([]scheduler.NewRun, 0, len(pending))
	for _, t := range pending {
		d.triggers[t.ID] = t
		out = append(out, scheduler.NewRun{ID: t.ID, Trigger: t.Refs})
	}
	return out
}

// recordedTriggers are the triggers the Task's own runs record: on their
// Jobs, in the history, and in the queue's line. status.after is rebuilt
// from them when it is lost.
func (d *decision) recordedTriggers() [][]v1alpha1.TriggerRef {
	var out [][]v1alpha1.TriggerRef
	for i := range d.rs {
		out = append(out, d.rs[i].Trigger())
	}
	for _, h := range d.task.Status.History {
		out = append(out, h.Trigger)
	}
	for _, q := range d.task.Status.Queued {
		out = append(out, q.Trigger)
	}
	return out
}

// consumeTriggers moves status.after past the triggers this pass took:
// started, queued, or failed at their start (InvalidParams). One that
// waits (Forbid, suspend, a full line) is not consumed and is pending
// again next pass.
func (d *decision) consumeTriggers() {
	if len(d.task.Spec.After) == 0 {
		return
	}
	for _, s := range d.p.Start {
		chain.Consume(d.consumed, s.Trigger)
	}
	for _, q := range d.p.Queued {
		chain.Consume(d.consumed, q.Trigger)
	}
	for _, dr := range d.p.Dropped {
		chain.Consume(d.consumed, dr.Queued.Trigger)
	}
	d.p.After = chain.Status(d.task, d.consumed)
}

// chained is the trigger of a chained run starting this pass.
func (d *decision) chained(id string) (chain.Trigger, bool) {
	t, ok := d.triggers[id]
	return t, ok
}

// cycleProblem is the InvalidSpec of a Task in a cycle of spec.after.
func cycleProblem(cycle []string) *status.Problem {
	return &status.Problem{Reason: v1alpha1.ReasonInvalidSpec, Message: fmt.Sprintf(
		"spec.after makes a cycle (%s): no run starts from spec.after until one of these Tasks stops naming the next",
		strings.Join(cycle, " -> "))}
}
