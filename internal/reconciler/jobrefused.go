package reconciler

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/status"
)

// A Job the API server refuses for a reason the Task's spec does not
// decide (an admission policy or webhook, a used-up quota on Jobs,
// someone else's Job under the attempt's name) is neither an error to
// retry at once nor a final failure: the Task waits, says why
// (JobRefused, or WaitingForCapacity for a quota; status.judgeRefusal),
// and tries again a minute later. A queued Task gives its admitted place
// back meanwhile: its status no longer waits for the attempt, which has no
// Job.

// refusalRecheck is how often a Task whose Job the API server refuses
// (p.jobRefused) tries again: a policy may be lifted, a quota freed, a
// foreign Job deleted, and none of them is watched. One refused create a
// minute, not a retry loop.
const refusalRecheck = time.Minute

// waitForAPI records that the API server could not take the Job of start s
// for a reason that may pass (guards.MayPass): the Task waits (WaitingForAPI,
// naming the refusal) and tries again at a pace set by how long it has
// been waiting so far (the Ready condition's transition to this reason;
// retry.AgainAfter, as for a notification: 1 s, slowing to 30 s).
func (p *pass) waitForAPI(s plan.Start, err error) {
	since := p.now
	if c := meta.FindStatusCondition(p.old.Conditions, string(v1alpha1.ConditionReady)); c != nil && c.Reason == string(v1alpha1.ReasonWaitingForAPI) {
		since = c.LastTransitionTime.Time
	}
	again := retry.AgainAfter(p.now.Sub(since))
	p.jobRefused = &status.Problem{Reason: v1alpha1.ReasonWaitingForAPI, Message: status.Head(fmt.Sprintf(
		"run %s: attempt %d waits: the API server could not take its Job for now, tried again within 30 s: %v", s.RunID, s.Attempt, err), status.MaxMessage)}
	p.plan.Wake = earliest(p.plan.Wake, p.now.Add(again))
}

// refuse records that the API server refused the Job of start s for a
// reason that may clear without a spec change: the Task says so (reason)
// and tries again after refusalRecheck.
func (p *pass) refuse(s plan.Start, reason v1alpha1.Reason, why string) {
	p.jobRefused = &status.Problem{Reason: reason, Message: status.Head(fmt.Sprintf("run %s: attempt %d waits: %s", s.RunID, s.Attempt, why), status.MaxMessage)}
	if next := p.now.Add(refusalRecheck); p.plan.Wake.IsZero() || next.Before(p.plan.Wake) {
		p.plan.Wake = next
	}
}
