package reconciler

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/notify"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/status"
)

// pass is one reconcile of one Task, through its stages (reconcileNormal):
// what was observed, the plan decided from it, and what acting on the plan
// did.
type pass struct {
	r    *TaskReconciler
	task *v1alpha1.Task
	// old is the status as stored when the pass began.
	old *v1alpha1.TaskStatus
	// now is the pass's time, read once.
	now time.Time

	// jobs are the Task's Jobs as the cache listed them.
	jobs []batchv1.Job
	// runs are the Task's runs: as observed, then as acting left them
	// (attempts started and stopped, runs pruned).
	runs []runs.Run
	plan plan.Plan
	// refused is set when the API server refused a Job as invalid: the
	// spec is then InvalidSpec until it changes.
	refused *status.Problem
	// jobRefused is set when the API server refused a Job for a reason
	// that may clear without a spec change (JobRefused, or a quota:
	// WaitingForCapacity): the Task waits and tries again (refusalRecheck).
	jobRefused *status.Problem
	// created counts the Jobs this pass created (not found existing).
	created int
	// missedReported: the MissedSchedules event of the due slot is sent.
	missedReported bool
	// outputs holds what the pods of finished attempts said, by Job name.
	outputs map[string]status.Output
	// pods holds the pods this pass read, by Job name (attemptPods).
	pods map[string][]corev1.Pod
	// workloads holds the Kueue Workloads this pass read, by Job name
	// (workloadOf; nil: none).
	workloads map[string]*unstructured.Unstructured
	// notifications are the Task's notification Jobs, by run id.
	notifications map[string]notify.Job
	// notificationNotes says, by run id, why a notification failed that
	// its Job cannot tell: the API server refused the Job, or it was
	// deleted before it finished.
	notificationNotes map[string]string
	// notificationTries are what this pass's notification Job creates came
	// to, by run id: the status is computed again with them (a Job
	// recorded, a notification Failed), never edited.
	notificationTries map[string]notify.Try
	// notifyAgainAt is when a create the API server refused for a reason
	// that may pass is tried again (zero: none was).
	notifyAgainAt time.Time
}

// problem is why the spec cannot be acted on, if it cannot.
func (p *pass) problem() *status.Problem {
	if p.plan.Problem != nil {
		return p.plan.Problem
	}
	return p.refused
}

// recording is stage 5's pure part (plan.Record): the status from what
// the pass saw and did, the notifications it makes due and when to write
// it; acted: acting ended without error.
func (p *pass) recording(acted bool) plan.Recording {
	in := status.Input{
		Task: p.task, Runs: p.runs, Outputs: p.outputs, Schedule: p.plan.Schedule, CancelToken: p.plan.CancelToken,
		Waiting: p.plan.Waiting, Problem: p.problem(), Refusal: p.jobRefused, Now: p.now,
		Queued: p.plan.Queued, QueueName: p.task.Spec.QueueName, CalendarProblem: p.plan.CalendarProblem, Backfill: p.plan.Backfill, Notifications: p.notifications,
		After: p.plan.After, UpstreamMissing: p.plan.UpstreamMissing,
		NotificationTries: p.notificationTries, NotificationDeadline: p.r.notificationDeadline(),
	}
	in.QueueReason, in.QueueMessage = p.plan.Queue.Problem()
	for _, d := range p.plan.Dropped {
		in.Dropped = append(in.Dropped, status.DroppedRecord(d.Queued, d.Result, d.Reason, d.Message, p.now))
	}
	return p.plan.Record(plan.RecordInput{Status: in, Old: *p.old, Acted: acted, RecordStartDelay: p.r.Shortcuts.RecordStartDelay()})
}
