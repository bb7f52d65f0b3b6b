package notify

import (
	"slices"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
)

// Event is the outcome a finished run tells: Failed, Succeeded or
// Recovered (a success whose previous finished run failed). ok is false
// for a run that did not end in success or failure (still running,
// stopped, cancelled): those are not told.
func Event(rec v1alpha1.RunRecord, previous *v1alpha1.RunRecord) (v1alpha1.NotifyOn, bool) {
	switch rec.Result {
	case v1alpha1.RunResultFailed:
		return v1alpha1.NotifyOnFailed, true
	case v1alpha1.RunResultSucceeded:
		if previous != nil && previous.Result == v1alpha1.RunResultFailed {
			return v1alpha1.NotifyOnRecovered, true
		}
		return v1alpha1.NotifyOnSucceeded, true
	}
	return "", false
}

// Previous is the newest run before history[i] that ended in success or
// failure (history is newest first), or nil: what Recovered is judged by.
// Stopped and cancelled runs say nothing about the work and are passed
// over.
func Previous(history []v1alpha1.RunRecord, i int) *v1alpha1.RunRecord {
	for j := i + 1; j < len(history); j++ {
		if r := history[j].Result; r == v1alpha1.RunResultFailed || r == v1alpha1.RunResultSucceeded {
			return &history[j]
		}
	}
	return nil
}

// Targets are the indexes of the spec.notify entries told about ev. A
// recovery is a success too: an entry that lists Succeeded hears of it
// (as Recovered); one that lists only Recovered hears of nothing else.
func Targets(entries []v1alpha1.Notification, ev v1alpha1.NotifyOn) []int {
	var out []int
	for i, n := range entries {
		if slices.Contains(n.On, ev) || (ev == v1alpha1.NotifyOnRecovered && slices.Contains(n.On, v1alpha1.NotifyOnSucceeded)) {
			out = append(out, i)
		}
	}
	return out
}

// Due are the runs whose notification Job a pass creates: those the new
// status (updated) marks Pending that have no Job yet, neither seen
// (jobs) nor recorded (NotificationJob). A create the API server refused
// for a reason that may pass leaves a run Pending, and the next pass makes
// it due again; a create after a lost status write finds the Job
// (AlreadyExists, taken as created). One Job per run outcome.
func Due(updated []v1alpha1.RunRecord, jobs map[string]Job) []v1alpha1.RunRecord {
	var out []v1alpha1.RunRecord
	for _, r := range updated {
		if _, seen := jobs[r.RunID]; r.Notification == v1alpha1.NotificationPending && r.NotificationJob == "" && !seen {
			out = append(out, r)
		}
	}
	return out
}

// Order is one notification a new status makes due: the run, the document
// it sends and the spec.notify entries (by index) that hear it. The
// reconciler turns each into a Job and decides nothing more.
type Order struct {
	RunID    string
	Document Document
	Targets  []int
}

// Orders are the notifications a new history (updated) of task makes due
// (Due, given the notification Jobs seen), each ready for its Job: what
// the run tells (Recovered is judged against the run before it in the new
// history) and to whom.
func Orders(task *v1alpha1.Task, updated []v1alpha1.RunRecord, jobs map[string]Job) []Order {
	var out []Order
	for _, rec := range Due(updated, jobs) {
		i := slices.IndexFunc(updated, func(r v1alpha1.RunRecord) bool { return r.RunID == rec.RunID })
		ev, _ := Event(rec, Previous(updated, i))
		out = append(out, Order{RunID: rec.RunID, Document: NewDocument(task, rec, ev), Targets: Targets(task.Spec.Notify, ev)})
	}
	return out
}

// Try is what one pass's create of a run's notification Job came to: the
// Job (created, or found to be this run's), or why the API server refused
// it and whether that refusal will pass (Final: it will not).
type Try struct {
	Job     string
	Refusal string
	Final   bool
}

// DefaultDeadline is how long after a run's end its notification may
// wait for its Job to be created (the manager's --notification-deadline):
// past it, a create the API server still refuses fails the notification.
const DefaultDeadline = 10 * time.Minute

// PastDeadline reports whether the notification of rec may no longer
// wait for its Job at now.
func PastDeadline(rec v1alpha1.RunRecord, now time.Time, deadline time.Duration) bool {
	return rec.CompletionTime != nil && !now.Before(rec.CompletionTime.Add(deadline))
}

// RetryAfter is how long after a create refused for a reason that may
// pass the next one is tried (retry.AgainAfter), the refusals counted
// from the run's end: nothing else is stored.
func RetryAfter(rec v1alpha1.RunRecord, now time.Time) time.Duration {
	var since time.Duration
	if rec.CompletionTime != nil {
		since = now.Sub(rec.CompletionTime.Time)
	}
	return retry.AgainAfter(since)
}

// Job is what a notification Job of a Task says: the run it tells about
// and, once finished, whether every webhook accepted it.
type Job struct {
	Name     string
	RunID    string
	Finished bool
	Sent     bool
}

// FromJobs picks the notification Jobs (LabelNotification) among the Jobs
// the Task with UID owner controls, by run id.
func FromJobs(owner types.UID, jobs []batchv1.Job) map[string]Job {
	out := map[string]Job{}
	for i := range jobs {
		job := &jobs[i]
		id := job.Labels[v1alpha1.LabelNotification]
		if id == "" || !runs.ControlledBy(job, owner) {
			continue
		}
		n := Job{Name: job.Name, RunID: id}
		for _, c := range job.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				n.Finished, n.Sent = true, true
			case batchv1.JobFailed:
				n.Finished = true
			}
		}
		out[id] = n
	}
	return out
}

// Resolve is the state a Pending notification moves to once its Job is
// seen finished; ok is false while it is not.
func Resolve(j Job, seen bool) (v1alpha1.NotificationState, bool) {
	switch {
	case !seen || !j.Finished:
		return v1alpha1.NotificationPending, false
	case j.Sent:
		return v1alpha1.NotificationSent, true
	}
	return v1alpha1.NotificationFailed, true
}
