package status

import (
	"slices"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/notify"
	"github.com/taskops/task-operator/internal/runs"
)

// newlyFinished are the indexes of the records of st.History (newest
// first) that ended in this status and not in the stored one, oldest
// first: each is counted and told once.
func newlyFinished(st, old *v1alpha1.TaskStatus) []int {
	var out []int
	for i := len(st.History) - 1; i >= 0; i-- {
		h := st.History[i]
		if h.Result != v1alpha1.RunResultRunning && !RunFinal(old.History, h.RunID) {
			out = append(out, i)
		}
	}
	return out
}

// countFailures keeps status.consecutiveFailures: a failed run adds one, a
// successful run starts over, a stopped or cancelled run says nothing of
// the work. A spec change (a new generation) starts over too: it is how a
// person answers a streak, and what resumes a Task the streak suspended.
func countFailures(task *v1alpha1.Task, st *v1alpha1.TaskStatus, ended []int) {
	if old := &task.Status; old.ObservedGeneration != 0 && old.ObservedGeneration != task.Generation {
		st.ConsecutiveFailures = 0
	}
	for _, i := range ended {
		switch st.History[i].Result {
		case v1alpha1.RunResultFailed:
			st.ConsecutiveFailures++
		case v1alpha1.RunResultSucceeded:
			st.ConsecutiveFailures = 0
		}
	}
}

// markNotifications marks Pending the newly finished runs spec.notify
// tells about (the pass then creates their notification Jobs, before the
// status write, and computes the status again with what the creates came
// to: in.NotificationTries), and moves each Pending one on: its Job seen
// is recorded (NotificationJob) and, once finished, says Sent or Failed;
// a Job created in this pass is recorded; a refused create fails it when
// the refusal will not pass or the deadline has passed since the run
// ended, with the reason added to the run's message; otherwise it stays
// Pending and is tried again. Only a run that ends after spec.notify
// lists its outcome is told: adding an entry never tells about runs of
// the past.
func markNotifications(task *v1alpha1.Task, st *v1alpha1.TaskStatus, ended []int, in Input) {
	if len(task.Spec.Notify) > 0 {
		for _, i := range ended {
			h := &st.History[i]
			if h.Notification != "" {
				continue
			}
			if ev, ok := notify.Event(*h, notify.Previous(st.History, i)); ok && len(notify.Targets(task.Spec.Notify, ev)) > 0 {
				h.Notification = v1alpha1.NotificationPending
			}
		}
	}
	for i := range st.History {
		h := &st.History[i]
		if h.Notification != v1alpha1.NotificationPending {
			continue
		}
		if j, seen := in.Notifications[h.RunID]; seen {
			h.NotificationJob = j.Name
			if state, done := notify.Resolve(j, true); done {
				h.Notification = state
			}
			continue
		}
		switch try := in.NotificationTries[h.RunID]; {
		case try.Job != "":
			h.NotificationJob = try.Job
		case try.Refusal != "" && (try.Final || notify.PastDeadline(*h, in.Now, in.NotificationDeadline)):
			h.Notification = v1alpha1.NotificationFailed
			h.Message = Head(h.Message+"; notification not sent: "+try.Refusal, MaxMessage)
		}
	}
}

// recordFinishedToken names, in status.lastFinishedRunNowToken, the token
// of the newest run a run-now token started among those this status ends
// (ended runs oldest first, so the newest wins). It changes in the very
// write that records the run's end: that is what lets plain kubectl wait
// for one re-run and never see the previous outcome.
func recordFinishedToken(task *v1alpha1.Task, st *v1alpha1.TaskStatus, ended []int, rs []runs.Run) {
	for _, i := range ended {
		id := st.History[i].RunID
		if token := runs.RunNowToken(task.Annotations[v1alpha1.AnnotationRunNow], id, runs.Find(rs, id)); token != "" {
			st.LastFinishedRunNowToken = token
		}
	}
}

// recordFinishedTrigger keeps the trigger of the newest chained run that
// ended (status.lastFinishedTrigger), in the write that records its end:
// what `kubectl wait` on a downstream run waits for.
func recordFinishedTrigger(st *v1alpha1.TaskStatus, ended []int) {
	for _, i := range ended {
		h := st.History[i]
		if len(h.Trigger) > 0 {
			st.LastFinishedTrigger = &v1alpha1.FinishedTrigger{RunID: h.RunID, Result: h.Result, Trigger: slices.Clone(h.Trigger)}
		}
	}
}
