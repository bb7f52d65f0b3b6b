package plan

import (
	"maps"
	"slices"
	"time"

	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/notify"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/scheduler"
	"github.com/taskops/task-operator/internal/status"
)

// pruneRuns picks the finished runs beyond the history limits, whose Jobs
// go, and returns the runs kept (oldest first). Only runs the stored status
// already records as finished are pruned: the status must remember a run
// before its Jobs go, or a lost status write could make the run look new
// again. A run that is over the limits but not recorded yet is pruned by a
// pass right after this one (the operator's own status write does not
// trigger a pass): again is true then.
//
// A run's notification Job goes with it, once the stored status records
// how the notification ended; until then the run waits (its Job's end
// brings the pass that records it). A notification Job whose run has no
// Jobs left goes on its own, under the same rule.
func pruneRuns(task *v1alpha1.Task, rs []runs.Run, steps map[string]retry.Step, notes map[string]notify.Job) (kept []runs.Run, prune []Prune, again bool) {
	keepOK := int(ptr.Deref(task.Spec.SuccessfulRunsHistoryLimit, 3))
	keepFailed := int(ptr.Deref(task.Spec.FailedRunsHistoryLimit, 1))
	// Newest first, so the newest finished runs are the ones kept.
	for i := len(rs) - 1; i >= 0; i-- {
		run := rs[i]
		step := steps[run.ID]
		drop := false
		if step.Finished() {
			if step.Kind == retry.Succeeded {
				drop = keepOK <= 0
				keepOK--
			} else {
				drop = keepFailed <= 0
				keepFailed--
			}
		}
		if drop && !status.RunFinal(task.Status.History, run.ID) {
			drop, again = false, true
		}
		note, hasNote := notes[run.ID]
		if drop && hasNote && !notificationSettled(task, run.ID) {
			drop = false
			again = again || note.Finished
		}
		if !drop {
			kept = append(kept, run)
			continue
		}
		names := make([]string, 0, len(run.Attempts)+1)
		for _, a := range run.Attempts {
			names = append(names, a.JobName)
		}
		if hasNote {
			names = append(names, note.Name)
		}
		prune = append(prune, Prune{RunID: run.ID, JobNames: names})
	}
	for _, id := range slices.Sorted(maps.Keys(notes)) {
		if runs.Find(rs, id) != nil {
			continue
		}
		switch {
		case notificationSettled(task, id):
			prune = append(prune, Prune{RunID: id, JobNames: []string{notes[id].Name}})
		case notes[id].Finished:
			again = true
		}
	}
	// Back to oldest first.
	for i, j := 0, len(kept)-1; i < j; i, j = i+1, j-1 {
		kept[i], kept[j] = kept[j], kept[i]
	}
	return kept, prune, again
}

// notificationSettled reports whether the stored status records how the
// notification of run id ended (or that none is due).
func notificationSettled(task *v1alpha1.Task, id string) bool {
	for _, h := range task.Status.History {
		if h.RunID == id {
			return h.Notification != v1alpha1.NotificationPending
		}
	}
	return true // a run the history no longer holds
}

// notifying reports whether a notification of the Task is still being
// sent: its Job has not finished, or the stored status waits for a Job
// the pass does not see finished. A finished one-shot Task is deleted
// only after its notification went out.
func notifying(task *v1alpha1.Task, notes map[string]notify.Job) bool {
	for _, n := range notes {
		if !n.Finished {
			return true
		}
	}
	for _, h := range task.Status.History {
		if h.Notification == v1alpha1.NotificationPending && !notes[h.RunID].Finished {
			return true
		}
	}
	return false
}

// expiresAt is when a finished one-shot Task with ttlSecondsAfterFinished
// is deleted: that long after its last run finished. ok is false while
// there is nothing to expire: no TTL, a cron Task, no run, or a run that
// is unfinished or about to start.
func expiresAt(task *v1alpha1.Task, kept []runs.Run, steps map[string]retry.Step, sp scheduler.Plan) (at time.Time, ok bool) {
	ttl := task.Spec.TTLSecondsAfterFinished
	if ttl == nil || task.Spec.Schedule != nil || len(kept) == 0 || len(sp.Start) > 0 || sp.RunNowWaiting {
		return time.Time{}, false
	}
	var finished time.Time
	for _, r := range kept {
		s := steps[r.ID]
		if !s.Finished() {
			return time.Time{}, false
		}
		if s.At.After(finished) {
			finished = s.At
		}
	}
	return finished.Add(time.Duration(*ttl) * time.Second), true
}
