package reconciler

import (
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/metrics"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/scheduler"
	"github.com/taskops/task-operator/internal/status"
)

const (
	eventNormal  = corev1.EventTypeNormal
	eventWarning = corev1.EventTypeWarning
)

// event records an event on the Task; related is the Job it is about.
func (r *TaskReconciler) event(task *v1alpha1.Task, related runtime.Object, typ string, reason v1alpha1.Reason, action, note string) {
	if r.Recorder == nil {
		return
	}
	if related == nil {
		r.Recorder.Eventf(task, nil, typ, string(reason), action, "%s", status.Head(note, status.MaxMessage))
		return
	}
	r.Recorder.Eventf(task, related, typ, string(reason), action, "%s", status.Head(note, status.MaxMessage))
}

// reportTransitions tells, in events and metrics, what changed between the
// old and the new (written) status: a run finished, an attempt failed and a
// retry is scheduled, the spec became invalid. Comparing statuses, not
// passes, keeps a repeated pass from repeating its events and counts.
func (p *pass) reportTransitions() {
	p.runEvents()
	p.calendarEvents()
	p.attemptEvents()
	p.problemEvents()
	p.scheduleEvents()
	p.queueEvents()
	p.notificationEvents()
	p.chainEvents()
	r, task, old, st := p.r, p.task, p.old, &p.task.Status
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c != nil && c.Reason == string(v1alpha1.ReasonTooManyFailures) {
		if o := meta.FindStatusCondition(old.Conditions, v1alpha1.ConditionReady); o == nil || o.Reason != c.Reason {
			r.event(task, nil, eventWarning, v1alpha1.EventTooManyFailures, "Suspend", c.Message)
		}
	}
}

// runEvents reports the runs that finished in this pass, and counts them.
func (p *pass) runEvents() {
	r, task, old, st := p.r, p.task, p.old, &p.task.Status
	typ := task.Spec.Type
	for _, h := range st.History {
		if h.Result == v1alpha1.RunResultRunning || status.RunFinal(old.History, h.RunID) {
			continue
		}
		if h.StartTime != nil && h.CompletionTime != nil {
			metrics.RunFinished(typ, h.Result, h.CompletionTime.Sub(h.StartTime.Time))
		}
		switch h.Result {
		case v1alpha1.RunResultSucceeded:
			metrics.AttemptsTotal.WithLabelValues(string(typ), "succeeded").Inc()
			r.event(task, nil, eventNormal, v1alpha1.EventRunSucceeded, "FinishRun", fmt.Sprintf("run %s %s", h.RunID, h.Message))
		case v1alpha1.RunResultFailed:
			if h.Reason == v1alpha1.ReasonInvalidParams {
				// Failed before it had a Job: its values could not be used.
				r.event(task, nil, eventWarning, v1alpha1.ReasonInvalidParams, "StartRun", fmt.Sprintf("run %s failed without a Job: %s", h.RunID, h.Message))
				continue
			}
			r.event(task, nil, eventWarning, v1alpha1.EventRunFailed, "FinishRun", fmt.Sprintf("run %s failed for good: %s", h.RunID, h.Message))
		case v1alpha1.RunResultCancelled:
			r.event(task, nil, eventNormal, v1alpha1.EventRunCancelled, "CancelRun", fmt.Sprintf("run %s cancelled: %s", h.RunID, h.Message))
		}
	}
}

// attemptEvents reports an attempt's new failure and the retry scheduled
// after it.
func (p *pass) attemptEvents() {
	r, task, old, st := p.r, p.task, p.old, &p.task.Status
	typ := task.Spec.Type
	if st.LastError != "" && st.LastError != old.LastError {
		metrics.AttemptsTotal.WithLabelValues(string(typ), "failed").Inc()
		r.event(task, nil, eventWarning, v1alpha1.EventAttemptFailed, "ObserveJob", st.LastError)
	}
	if st.NextRetryTime != nil && (old.NextRetryTime == nil || !old.NextRetryTime.Equal(st.NextRetryTime)) {
		metrics.RetriesScheduled.WithLabelValues(string(typ)).Inc()
		r.event(task, nil, eventNormal, v1alpha1.EventRetryScheduled, "ScheduleRetry",
			fmt.Sprintf("run %s: attempt %d starts at %s (in %s)", st.CurrentRun, st.Attempts+1,
				st.NextRetryTime.UTC().Format(time.RFC3339), st.NextRetryTime.Sub(p.now).Round(time.Second)))
	}
}

// problemEvents reports a new problem with the spec, and a new refusal of
// a Job.
func (p *pass) problemEvents() {
	r, task, old := p.r, p.task, p.old
	if problem := p.problem(); problem != nil {
		oldC := meta.FindStatusCondition(old.Conditions, v1alpha1.ConditionStalled)
		if oldC == nil || oldC.Reason != string(problem.Reason) || oldC.Message != status.Head(problem.Message, status.MaxMessage) {
			reason := v1alpha1.EventInvalidSpec
			if problem.Reason == v1alpha1.ReasonInvalidSchedule {
				reason = v1alpha1.EventInvalidSchedule
			}
			r.event(task, nil, eventWarning, reason, "Validate", problem.Message)
		}
	}
	if refusal := p.jobRefused; refusal != nil {
		oldC := meta.FindStatusCondition(old.Conditions, v1alpha1.ConditionReady)
		if oldC == nil || oldC.Reason != string(refusal.Reason) || oldC.Message != refusal.Message {
			reason := v1alpha1.EventJobRefused
			if refusal.Reason == v1alpha1.ReasonWaitingForAPI {
				reason = v1alpha1.EventWaitingForAPI
			}
			r.event(task, nil, eventWarning, reason, "CreateJob", refusal.Message)
		}
	}
}

// calendarEvents reports skip dates that cannot be read, and a backfill's
// progress.
func (p *pass) calendarEvents() {
	r, task, old, st := p.r, p.task, p.old, &p.task.Status
	if cp := p.plan.CalendarProblem; cp != "" && !strings.Contains(readyMessage(old), cp) {
		r.event(task, nil, eventWarning, v1alpha1.EventSkipDatesUnreadable, "Schedule", "the schedule runs without some skip dates: "+cp)
	}
	if bf := st.Backfill; bf != nil && (old.Backfill == nil || old.Backfill.Token != bf.Token || old.Backfill.State != bf.State) {
		typ := eventNormal
		if bf.State == v1alpha1.BackfillRefused {
			typ = eventWarning
		}
		r.event(task, nil, typ, v1alpha1.EventBackfill, "Backfill", fmt.Sprintf("backfill %q %s: %d slot(s) in %s/%s; %s",
			bf.Token, bf.State, bf.Total, stamp(bf.From), stamp(bf.To), bf.Message))
	}
}

// scheduleEvents reports a run-now token taken and the slots that came
// due.
func (p *pass) scheduleEvents() {
	r, task, old := p.r, p.task, p.old
	sp := &p.plan.Schedule
	if sp.RunNowToken != "" && sp.RunNowToken != old.LastRunNowToken && old.ObservedGeneration != 0 {
		r.event(task, nil, eventNormal, v1alpha1.EventRunNowAccepted, "RunNow", "a new run-now token started a run")
	}
	if s := sp.Slots; s != nil && !s.Due.IsZero() && (old.LastScheduleTime == nil || s.Due.After(old.LastScheduleTime.Time)) {
		p.slotEvents(s)
	}
}

// queueEvents reports queued cron slots skipped past their starting
// deadline. An attempt joining the line gets no event: the status says it
// (phase Queued, status.queued, the Ready condition's message), and an
// event would cost every queued attempt one more request while the line
// fills, on the API server the running attempts wait for
// (docs/performance-history.md, "Queue records and events"); its turn gets one, the
// queue's Admitted.
func (p *pass) queueEvents() {
	r, task := p.r, p.task
	for _, q := range p.plan.QueuedMissed {
		metrics.QueuedSlotsMissed.Inc()
		r.event(task, nil, eventWarning, v1alpha1.EventQueuedSlotMissed, "Schedule",
			fmt.Sprintf("slot %s skipped: its run was still queued startingDeadlineSeconds after it (or the Task already holds %d places in line)",
				q.ScheduledTime.UTC().Format(time.RFC3339), plan.MaxQueued))
	}
}

// slotEvents reports a newly due slot that did not start, and slots that
// were missed (the operator was down, or runs were too late).
func (p *pass) slotEvents(s *scheduler.Slots) {
	r, task := p.r, p.task
	slot := s.Due.UTC().Format(time.RFC3339)
	switch p.plan.Schedule.SkippedSlot {
	case scheduler.SkipTooLate:
		r.event(task, nil, eventWarning, v1alpha1.EventSlotSkipped, "Schedule",
			fmt.Sprintf("slot %s skipped: it could not start within startingDeadlineSeconds", slot))
	case scheduler.SkipSuspended:
		r.event(task, nil, eventNormal, v1alpha1.EventSlotSkipped, "Schedule", fmt.Sprintf("slot %s skipped: the Task is suspended", slot))
	case scheduler.SkipEdited:
		r.event(task, nil, eventNormal, v1alpha1.EventSlotSkipped, "Schedule",
			fmt.Sprintf("slot %s skipped: it fell due before the spec edit was seen, and an edit never starts a run", slot))
	case scheduler.SkipTooManyFailures:
		r.event(task, nil, eventNormal, v1alpha1.EventSlotSkipped, "Schedule",
			fmt.Sprintf("slot %s skipped: %d consecutive runs failed (suspendAfterFailures)", slot, task.Status.ConsecutiveFailures))
	case scheduler.SkipDate:
		r.event(task, nil, eventNormal, v1alpha1.EventSlotSkipped, "Schedule",
			fmt.Sprintf("slot %s skipped (%s): its date is a skip date (spec.skipDates, spec.skipDatesFrom, spec.skipCalendars)", slot, scheduler.SkipDate))
	case scheduler.SkipForbidden:
		r.event(task, nil, eventWarning, v1alpha1.EventSlotSkipped, "Schedule",
			fmt.Sprintf("slot %s skipped: a run is still active (concurrencyPolicy: Forbid)", slot))
	case scheduler.SkipTooManyActive:
		r.event(task, nil, eventWarning, v1alpha1.EventSlotSkipped, "Schedule",
			fmt.Sprintf("slot %s skipped: %d runs are active, the most a Task may have (concurrencyPolicy: Allow)", slot, scheduler.MaxActiveRuns))
	}
	if s.Missed > 0 && !p.missedReported {
		p.missedEvent(s)
	}
}

// missedEvent reports the slots missed before the due one, once a pass.
// The pass that creates the due slot's Job reports them when it does
// (startAttempt); any other pass after its status write.
func (p *pass) missedEvent(s *scheduler.Slots) {
	p.missedReported = true
	p.r.event(p.task, nil, eventWarning, v1alpha1.EventMissedSchedules, "Schedule",
		fmt.Sprintf("%d earlier slot(s) were missed; only the newest slot, %s, was considered", s.Missed, s.Due.UTC().Format(time.RFC3339)))
}

// readyMessage is the message of a status's Ready condition.
func readyMessage(st *v1alpha1.TaskStatus) string {
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

func stamp(t *metav1.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
