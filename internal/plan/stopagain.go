package plan

import (
	"slices"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/status"
)

// stopAgain is stage 0: an attempt whose Job carries the operator's stop
// annotation but runs again (someone resumed it, or a controller did) is
// stopped again, when the Task's status confirms the operator had stopped
// it: its run is final in the history (cancelled, replaced, failed for
// good), a later attempt of its run exists, or the attempt records list it
// as stopped. The annotation alone proves nothing, since anyone may write
// it: a running Job annotated by hand stays what it is, a running attempt,
// and starts no next attempt (runs.AttemptOf).
func (d *decision) stopAgain() {
	st := &d.task.Status
	for i := range d.rs {
		run := &d.rs[i]
		final := status.RunFinal(st.History, run.ID)
		for j := range run.Attempts {
			a := &run.Attempts[j]
			if a.Phase != runs.Active || a.StopUndone == "" {
				continue
			}
			superseded := j < len(run.Attempts)-1
			if final || superseded || recordedStopped(st.AttemptRecords, a.JobName) {
				d.stop(run.ID, a, a.StopUndone, "stopped again (its Job ran again after it was stopped): "+a.StopUndoneMessage)
			}
		}
	}
}

// recordedStopped reports whether the attempt records list the Job's
// attempt as stopped.
func recordedStopped(records []v1alpha1.AttemptRecord, job string) bool {
	return slices.ContainsFunc(records, func(r v1alpha1.AttemptRecord) bool {
		return r.JobName == job && r.Result == v1alpha1.AttemptResultStopped
	})
}
