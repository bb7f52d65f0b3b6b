// Package status computes a Task's status from what one pass saw and did:
// a pure function of the stored status, the runs (as the pass left them),
// what their pods said, the scheduler's plan and the time. No I/O, no clock.
//
//   - status.go: Compute, the fields of the newest run, lastError, and
//     which pod outputs the status still lacks (OutputsToRead);
//   - history.go: status.history, merged so it never moves backwards;
//   - outcomes.go: what a newly finished run changes beyond its record:
//     the failure streak and its notification;
//   - attempts.go: status.attemptRecords, the newest run's attempts;
//   - conditions.go: the contract's conditions table (phase, Ready, Failed,
//     Reconciling, Stalled);
//   - text.go: message bounds and status timestamps.
//
// Its tests are the rows of the conditions table of the API contract, run
// without an API server.
package status

import (
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/notify"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/scheduler"
)

// Output is what the pods of an attempt said: a summary (termination
// message, or which pod exited with which code) and the task container's
// exit code, when a pod terminated.
type Output struct {
	Text     string
	ExitCode *int32
	// Results are what the attempt handed back (spec.results), from the
	// block at the end of its termination message; TooLarge names those
	// left out for the limits.
	Results  map[string]string
	TooLarge []string
	// Cluster is the worker cluster whose pods ran the attempt (MultiKueue):
	// Text then says where their output is, since the manager has none.
	Cluster string
}

// Problem is a spec the operator cannot act on.
type Problem struct {
	Reason  v1alpha1.Reason // InvalidSpec or InvalidSchedule
	Message string
}

// Input is everything a status is computed from.
type Input struct {
	// Task is the Task as the pass read it: its spec, generation and stored
	// status.
	Task *v1alpha1.Task
	// Runs are the Task's runs as the pass left them: what the Jobs say,
	// plus the attempts it started and stopped, minus the runs it pruned.
	Runs []runs.Run
	// Outputs holds what the pods of finished attempts said, by Job name:
	// those OutputsToRead asked for.
	Outputs map[string]Output
	// Schedule is the scheduler's plan of the pass: the run-now token it
	// consumed and the cron slots.
	Schedule scheduler.Plan
	// CancelToken is the cancel token hash the pass consumed ("" if none).
	CancelToken string
	// Waiting holds, by Job name, what an attempt waits for when its pods
	// wait for capacity.
	Waiting map[string]string
	// Problem, when set, is why the spec cannot be acted on.
	Problem *Problem
	// Refusal, when set, is why the next attempt's Job could not be
	// created although the spec is fine (reason JobRefused, or
	// WaitingForCapacity for a quota on Jobs): the Task waits.
	Refusal *Problem
	// Queued are the attempts waiting for the queue's admission; Dropped
	// the queued new runs that ended before they had a Job (cancelled,
	// replaced), recorded as runs.
	Queued  []v1alpha1.QueuedAttempt
	Dropped []v1alpha1.RunRecord
	// QueueReason and QueueMessage say why the queue admits nothing now
	// (QueueNotFound, QueueSuspended); empty while it admits in turn.
	QueueReason  v1alpha1.Reason
	QueueMessage string
	// QueueName is spec.queueName as the pass saw it.
	QueueName string
	// CalendarProblem says which skip dates could not be used (Ready's
	// message tells it).
	CalendarProblem string
	// Backfill is the backfill request's new status (nil: unchanged).
	Backfill *v1alpha1.BackfillStatus
	// After is status.after as the pass left it (nil: unchanged);
	// UpstreamMissing the Tasks of spec.after that do not exist (Ready's
	// message tells them).
	After           []v1alpha1.AfterStatus
	UpstreamMissing []string
	// Notifications are the Task's notification Jobs, by run id.
	Notifications map[string]notify.Job
	// NotificationTries are what this pass's creates of notification Jobs
	// came to, by run id (the pass computes the status again with them): a
	// Job created is recorded; a refusal that will not pass, or any
	// refusal once NotificationDeadline has passed since the run ended,
	// fails the notification; any other leaves it Pending, to be tried
	// again.
	NotificationTries    map[string]notify.Try
	NotificationDeadline time.Duration
	Now                  time.Time
}

// Compute derives the new status. It is monotonic where the contract asks:
// a run's attempts never decrease and a finished run never turns back to
// running, even if the Job cache lags behind the stored status.
func Compute(in Input) v1alpha1.TaskStatus {
	task := in.Task
	rs := withOutputs(in.Runs, in.Outputs)
	steps := retry.Steps(task, rs, in.Now)

	st := *task.Status.DeepCopy()
	st.ObservedGeneration = task.Generation
	if in.Schedule.RunNowToken != "" {
		st.LastRunNowToken = in.Schedule.RunNowToken
	}
	if in.CancelToken != "" {
		st.LastCancelToken = in.CancelToken
	}
	st.Queued = in.Queued
	if in.Backfill != nil {
		st.Backfill = in.Backfill
	}
	if in.After != nil {
		st.After = in.After
	}
	st.History = mergeHistory(withDropped(st.History, in.Dropped), rs, steps, in.Outputs)
	st.Results = newestResults(st.History)
	ended := newlyFinished(&st, &task.Status)
	recordFinishedToken(task, &st, ended, rs)
	recordFinishedTrigger(&st, ended)
	countFailures(task, &st, ended)
	markNotifications(task, &st, ended, in)
	st.Active, st.ActiveOmitted = activeJobs(task.Namespace, rs)
	prevRun := st.CurrentRun
	setCurrentRun(&st, rs, steps)
	st.AttemptRecords = attemptRecords(&st, prevRun, rs, in.Outputs)
	// The stored lastError stays while it is about the same attempt: the
	// pods' output is read only once.
	if a := NewestFailure(rs); a != nil && a.JobName != st.LastErrorJobName {
		st.LastError, st.LastErrorJobName = lastErrorText(a), a.JobName
	}
	for _, h := range st.History {
		if h.Result == v1alpha1.RunResultSucceeded && h.CompletionTime != nil &&
			(st.LastSuccessfulTime == nil || h.CompletionTime.After(st.LastSuccessfulTime.Time)) {
			st.LastSuccessfulTime = h.CompletionTime.DeepCopy()
		}
	}
	if task.Spec.Schedule != nil {
		setCronTimes(&st, rs, in.Schedule.Slots, in.Refusal != nil)
	}
	waiting := map[string]string{}
	for i := range rs {
		if cause, ok := in.Waiting[rs[i].Latest().JobName]; ok {
			waiting[rs[i].ID] = cause
		}
	}
	setPhaseAndConditions(task, &st, judgement{steps: steps, waiting: waiting, problem: in.Problem, refusal: in.Refusal, now: in.Now,
		queue: queueJudgement{name: in.QueueName, reason: in.QueueReason, message: in.QueueMessage}, calendar: in.CalendarProblem,
		upstreamMissing: in.UpstreamMissing})
	return st
}

// OutputsToRead are the Jobs whose pods' output the status lacks: the
// newest failed attempt (for lastError) and the last attempt of each newly
// finished run (for its history message). Once written to the status they
// are never asked for again. Sorted, for a deterministic pass.
func OutputsToRead(task *v1alpha1.Task, rs []runs.Run, now time.Time) []string {
	old := &task.Status
	want := map[string]bool{}
	if a := NewestFailure(rs); a != nil && a.JobName != old.LastErrorJobName {
		want[a.JobName] = true
	}
	steps := retry.Steps(task, rs, now)
	for i := range rs {
		run := &rs[i]
		a := run.Latest()
		if !steps[run.ID].Finished() || a.Phase == runs.Stopped || RunFinal(old.History, run.ID) {
			continue
		}
		want[a.JobName] = true
	}
	out := make([]string, 0, len(want))
	for name := range want {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// withOutputs is rs with the pods' output as the message of each failed
// attempt it is about: it says more than the Job's own message ("Job has
// reached the specified backoff limit" says nothing the reason does not).
func withOutputs(rs []runs.Run, outputs map[string]Output) []runs.Run {
	if len(outputs) == 0 {
		return rs
	}
	rs = runs.Clone(rs)
	for i := range rs {
		for j := range rs[i].Attempts {
			a := &rs[i].Attempts[j]
			if out := outputs[a.JobName].Text; out != "" && (a.Phase == runs.Failed || a.Phase == runs.Stopped && a.Reason == v1alpha1.AttemptDeadlineExceeded) {
				a.Message = out
			}
		}
	}
	return rs
}

// withDropped adds the records of queued runs that ended before they had a
// Job; a run already recorded keeps its record.
func withDropped(h []v1alpha1.RunRecord, dropped []v1alpha1.RunRecord) []v1alpha1.RunRecord {
	for _, d := range dropped {
		if hasRecord(h, d.RunID) {
			continue
		}
		if d.StartTime != nil {
			// A run that failed at its start (InvalidParams) is the newest:
			// never older than a run the history has, whatever the skew
			// between this clock and the API server's creation times.
			for _, r := range h {
				if r.StartTime != nil && r.StartTime.After(d.StartTime.Time) {
					d.StartTime = r.StartTime.DeepCopy()
				}
			}
		}
		h = append(h, d)
	}
	return h
}

func hasRecord(h []v1alpha1.RunRecord, id string) bool {
	for _, r := range h {
		if r.RunID == id {
			return true
		}
	}
	return false
}

// setCurrentRun fills the single-valued fields from the newest run.
func setCurrentRun(st *v1alpha1.TaskStatus, rs []runs.Run, steps map[string]retry.Step) {
	if len(st.History) == 0 {
		return
	}
	cur := st.History[0]
	st.CurrentRun = cur.RunID
	st.Attempts = cur.Attempts
	st.RetryCount = max(cur.Attempts-1, 0)
	st.StartTime = cur.StartTime.DeepCopy()
	st.CompletionTime = cur.CompletionTime.DeepCopy()
	st.NextRetryTime = nil
	if run := runs.Find(rs, cur.RunID); run != nil {
		st.LastJobName = run.Latest().JobName
		if s := steps[cur.RunID]; s.Kind == retry.WaitForRetry || s.Kind == retry.Paused {
			st.NextRetryTime = Time(s.At)
		}
	}
}

// setCronTimes records the cron bookkeeping of a pass. refused: the API
// server refused the Job of a start this pass (Input.Refusal).
func setCronTimes(st *v1alpha1.TaskStatus, rs []runs.Run, slots *scheduler.Slots, refused bool) {
	for _, r := range rs {
		if r.Scheduled != nil && (st.LastScheduleTime == nil || r.Scheduled.After(st.LastScheduleTime.Time)) {
			st.LastScheduleTime = Time(*r.Scheduled)
		}
	}
	if slots != nil {
		// A slot that fell due counts as scheduled even when skipped, so it
		// is never considered again; but not while the API server refuses
		// its Job (a webhook restarting, a policy): the scheduler finds it
		// again, and it runs late or, past startingDeadlineSeconds, is
		// skipped with its event, never silently lost.
		waits := refused && runs.Find(rs, runs.ScheduledID(slots.Due)) == nil
		if !slots.Due.IsZero() && !waits && (st.LastScheduleTime == nil || slots.Due.After(st.LastScheduleTime.Time)) {
			st.LastScheduleTime = Time(slots.Due)
		}
		st.NextScheduleTime = Time(slots.Next)
	}
}

// NewestFailure is the attempt that failed last, over all runs; a stopped
// attempt counts, unless a newer run replaced it or a cancel stopped it
// (neither says anything about the work).
func NewestFailure(rs []runs.Run) *runs.Attempt {
	var newest *runs.Attempt
	for i := range rs {
		for j := range rs[i].Attempts {
			a := &rs[i].Attempts[j]
			if a.Phase != runs.Failed && !(a.Phase == runs.Stopped && a.Reason != v1alpha1.AttemptReplaced && a.Reason != v1alpha1.AttemptCancelled) {
				continue
			}
			// Runs come oldest first and attempts in order, so on a tie
			// (times have 1 s resolution) the later attempt wins.
			if newest == nil || !a.Finished.Before(newest.Finished) {
				newest = a
			}
		}
	}
	return newest
}

// lastErrorText is the status.lastError of a failed attempt: its reason,
// which attempt and Job, and the tail of what the pod said (or the Job's
// message when no pod said anything).
func lastErrorText(a *runs.Attempt) string {
	head := fmt.Sprintf("%s (attempt %d, job %s): ", a.Reason, a.Number, a.JobName)
	return head + Tail(a.Message, MaxMessage-len(head))
}

// activeJobs references the running Jobs, by name, at most
// v1alpha1.MaxActiveListed, and counts those left out.
func activeJobs(namespace string, rs []runs.Run) ([]corev1.ObjectReference, int32) {
	var refs []corev1.ObjectReference
	for _, r := range rs {
		for _, a := range r.Attempts {
			if a.Phase == runs.Active {
				refs = append(refs, corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: namespace, Name: a.JobName})
			}
		}
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].Name < refs[j].Name })
	if len(refs) > v1alpha1.MaxActiveListed {
		// Cut, or every status write would be refused by the schema.
		return refs[:v1alpha1.MaxActiveListed], int32(len(refs) - v1alpha1.MaxActiveListed)
	}
	return refs, 0
}
