package plan

import (
	"fmt"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
)

// heldCause is what an attempt whose Job is held suspended waits for.
const heldCause = "the Job is suspended until admitted (by Kueue or another controller)"

// checkDeadlines stops the active attempts that reached their
// activeDeadlineSeconds (DeadlineExceeded, retried like any failed
// attempt), after keepOutputs kept what their pods printed, and wakes the
// pass at the deadline of the others. A Job held suspended runs no clock.
func (d *decision) checkDeadlines() {
	kueue := jobs.KueueManaged(d.task)
	for i := range d.rs {
		a := d.rs[i].Latest()
		if a.Phase != runs.Active {
			continue
		}
		at, ok := retry.Deadline(&d.task.Spec, a, kueue)
		if !ok {
			continue
		}
		if d.now.Before(at) {
			d.wake.add(at)
			continue
		}
		d.stop(d.rs[i].ID, a, v1alpha1.AttemptDeadlineExceeded, DeadlineMessage)
	}
}

// DeadlineMessage is the message of an attempt stopped at its deadline:
// the Job controller's own words for the same end.
const DeadlineMessage = "Job was active longer than specified deadline"

// checkStarts is stage 1: attempts whose pods could not start in time are
// stopped; those waiting for capacity wait, up to capacityTimeoutSeconds;
// the others are looked at again when their check is due.
func (d *decision) checkStarts() {
	task, now, in := d.task, d.now, d.in
	timeout := retry.StartTimeout(&task.Spec)
	first := retry.FirstStartCheck(&task.Spec) // when pods are first looked at
	kueue := jobs.KueueManaged(task)
	for i := range d.rs {
		a := d.rs[i].Latest()
		if a.Phase != runs.Active || a.PodsStarted {
			continue
		}
		var check retry.StartCheck
		switch {
		case a.Held:
			// A Job held suspended (by Kueue, say) waits for admission from
			// the start; its unsuspending brings the next pass, and what
			// holds it is looked at again every start timeout, as for an
			// Unschedulable pod.
			check = retry.StartCheck{Waiting: true, Cause: heldCause, RecheckAt: now.Add(timeout)}
			if by := in.HeldBy[a.JobName]; by != "" {
				check.Cause = by
			}
		case (kueue || a.Remote) && a.Resumed.IsZero():
			// Admitted by Kueue a moment ago: the Job controller has not
			// started the Job yet (status.startTime), where the start
			// timeout begins, or, for a remote attempt, the worker has not
			// started its copy (or its status is not mirrored yet); that
			// update brings the next pass.
			d.wake.add(now.Add(timeout))
			continue
		case !retry.StartCheckDue(a.StartBase(), first, now):
			d.wake.add(a.StartBase().Add(first))
			continue
		case a.Remote:
			// Its pods are on a worker cluster: only the mirrored counts
			// tell whether they started.
			check = retry.CheckRemoteStart(a.StartBase(), in.Remote[a.JobName], timeout, now)
		default:
			check = retry.CheckStart(a.StartBase(), in.Pods[a.JobName], in.Refused[a.JobName], timeout, now)
		}
		switch {
		case check.Stuck:
			d.stop(d.rs[i].ID, a, v1alpha1.AttemptStartTimeout, check.Message)
		case check.Waiting:
			// Waiting for capacity is not a failure: only
			// capacityTimeoutSeconds ends it.
			if ct := retry.CapacityTimeout(&task.Spec); ct > 0 {
				deadline := a.Created.Add(ct)
				if !now.Before(deadline) {
					d.stop(d.rs[i].ID, a, v1alpha1.AttemptCapacityTimeout, fmt.Sprintf("waited %s for capacity: %s", ct, check.Cause))
					continue
				}
				d.wake.add(deadline)
			}
			if d.p.Waiting == nil {
				d.p.Waiting = map[string]string{}
			}
			d.p.Waiting[a.JobName] = check.Cause
			d.wake.add(check.RecheckAt)
		default:
			d.wake.add(check.RecheckAt)
		}
	}
}
