package status

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/scheduler"
)

// The contract's conditions table: which row a Task is in decides its phase
// and its Ready, Failed, Reconciling and Stalled conditions.

// judgement is what the table is read with, beyond the new status.
type judgement struct {
	steps map[string]retry.Step
	// waiting holds, by run id, what a run's attempt waits for when its
	// pods wait for capacity.
	waiting map[string]string
	problem *Problem
	refusal *Problem
	queue   queueJudgement
	// calendar says which skip dates could not be used; it is added to
	// Ready's message (the schedule runs on the others).
	calendar string
	// upstreamMissing are the Tasks of spec.after that do not exist.
	upstreamMissing []string
	now             time.Time
}

// queueJudgement is what the table needs of a queued Task's queue.
type queueJudgement struct {
	name    string
	reason  v1alpha1.Reason // QueueNotFound, QueueSuspended; "" while it admits
	message string
}

// verdict is one row of the contract's conditions table.
type verdict struct {
	phase   v1alpha1.TaskPhase
	ready   metav1.ConditionStatus
	reason  v1alpha1.Reason
	message string
	failed  bool
	// stalled without failed: the Task needs someone (JobRefused) but
	// has not failed.
	stalled     bool
	reconciling bool
}

// setPhaseAndConditions applies the contract's conditions table.
func setPhaseAndConditions(task *v1alpha1.Task, st *v1alpha1.TaskStatus, j judgement) {
	gen, now := task.Generation, j.now
	suspended := task.Spec.Suspend != nil && *task.Spec.Suspend
	v := judge(task, st, j)
	if q, ok := judgeQueued(st, j); ok {
		v = q
	}
	if f, ok := judgeStreak(task, st, j); ok && !suspended {
		v = f
	}
	if r, ok := judgeRefusal(st, j); ok {
		v = r
	}

	if suspended && j.problem == nil {
		// Suspended: Ready, Failed and Stalled stay as they were; only
		// Reconciling says whether a one-shot run is unfinished.
		st.Phase = v1alpha1.PhaseSuspended
		if len(st.Active) > 0 {
			st.Phase = v1alpha1.PhaseRunning
		}
		ensureCondition(st, v1alpha1.ConditionReady, metav1.ConditionUnknown, v1alpha1.ReasonSuspended, "the Task is suspended", gen, now)
		ensureCondition(st, v1alpha1.ConditionFailed, metav1.ConditionFalse, v1alpha1.ReasonNotFailed, "", gen, now)
		ensureCondition(st, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonNotFailed, "", gen, now)
		for i := range st.Conditions {
			st.Conditions[i].ObservedGeneration = gen
		}
		setCondition(st, v1alpha1.ConditionReconciling, boolStatus(v.reconciling), reconcilingReason(v), v.message, gen, now)
		setFinished(st, j.problem, gen, now)
		return
	}

	st.Phase = v.phase
	if j.calendar != "" && j.problem == nil {
		v.message = strings.TrimPrefix(v.message+"; skip dates: "+j.calendar, "; ")
	}
	setCondition(st, v1alpha1.ConditionReady, v.ready, v.reason, v.message, gen, now)
	if v.failed {
		setCondition(st, v1alpha1.ConditionFailed, metav1.ConditionTrue, v.reason, v.message, gen, now)
		setCondition(st, v1alpha1.ConditionStalled, metav1.ConditionTrue, v.reason, v.message, gen, now)
	} else {
		setCondition(st, v1alpha1.ConditionFailed, metav1.ConditionFalse, v1alpha1.ReasonNotFailed, "", gen, now)
		if v.stalled {
			setCondition(st, v1alpha1.ConditionStalled, metav1.ConditionTrue, v.reason, v.message, gen, now)
		} else {
			setCondition(st, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonNotFailed, "", gen, now)
		}
	}
	setCondition(st, v1alpha1.ConditionReconciling, boolStatus(v.reconciling), reconcilingReason(v), v.message, gen, now)
	setFinished(st, j.problem, gen, now)
}

// setFinished sets the Finished condition: True once the newest run has
// ended, whichever way, with the reason it ended for (and for a spec that
// cannot be acted on, whose run will not start); False while it has not.
// Unlike Ready it does not wait for success, so `kubectl wait
// --for=condition=Finished` returns on either outcome, and suspend does not
// change it.
func setFinished(st *v1alpha1.TaskStatus, problem *Problem, gen int64, now time.Time) {
	status, reason, msg := metav1.ConditionFalse, v1alpha1.ReasonPending, "no run has started yet"
	switch {
	case problem != nil:
		status, reason, msg = metav1.ConditionTrue, problem.Reason, problem.Message
	case len(st.Queued) > 0 && len(st.Active) == 0:
		w := st.Queued[0]
		reason, msg = v1alpha1.ReasonQueued, fmt.Sprintf("run %s: attempt %d waits for admission", w.RunID, w.Attempt)
	case len(st.History) > 0 && st.History[0].Result == v1alpha1.RunResultRunning:
		cur := st.History[0]
		reason, msg = v1alpha1.ReasonRunning, fmt.Sprintf("run %s has not finished", cur.RunID)
	case len(st.History) > 0:
		cur := st.History[0]
		status, reason, msg = metav1.ConditionTrue, recordReason(cur), fmt.Sprintf("run %s: %s", cur.RunID, cur.Message)
	}
	setCondition(st, v1alpha1.ConditionFinished, status, reason, msg, gen, now)
}

// judge finds the row of the conditions table the Task is in.
func judge(task *v1alpha1.Task, st *v1alpha1.TaskStatus, j judgement) verdict {
	if j.problem != nil {
		return verdict{phase: v1alpha1.PhaseFailed, ready: metav1.ConditionFalse, reason: j.problem.Reason, message: j.problem.Message, failed: true}
	}
	if task.Spec.Schedule != nil || len(task.Spec.After) > 0 {
		// A Task that runs after others runs many times, as a cron Task.
		return judgeCron(task, st, j.upstreamMissing)
	}
	if len(st.History) == 0 {
		return verdict{phase: v1alpha1.PhasePending, ready: metav1.ConditionUnknown, reason: v1alpha1.ReasonPending,
			message: "the run has not started yet", reconciling: true}
	}
	cur := st.History[0]
	switch cur.Result {
	case v1alpha1.RunResultSucceeded:
		return verdict{phase: v1alpha1.PhaseSucceeded, ready: metav1.ConditionTrue, reason: v1alpha1.ReasonSucceeded, message: cur.Message}
	case v1alpha1.RunResultFailed:
		return verdict{phase: v1alpha1.PhaseFailed, ready: metav1.ConditionFalse, reason: recordReason(cur), message: cur.Message, failed: true}
	case v1alpha1.RunResultCancelled:
		return verdict{phase: v1alpha1.PhaseFailed, ready: metav1.ConditionFalse, reason: v1alpha1.ReasonCancelled, message: cur.Message, failed: true}
	}
	step := j.steps[cur.RunID]
	switch step.Kind {
	case retry.WaitForRetry, retry.Paused:
		return verdict{phase: v1alpha1.PhaseRetrying, ready: metav1.ConditionUnknown, reason: v1alpha1.ReasonRetrying,
			message: cur.Message, reconciling: true}
	case retry.Running:
		if cause, ok := j.waiting[cur.RunID]; ok {
			return verdict{phase: v1alpha1.PhasePending, ready: metav1.ConditionUnknown, reason: v1alpha1.ReasonWaitingForCapacity,
				message: fmt.Sprintf("run %s: attempt %d waits for capacity: %s", cur.RunID, step.Attempt, cause), reconciling: true}
		}
		return verdict{phase: v1alpha1.PhaseRunning, ready: metav1.ConditionUnknown, reason: v1alpha1.ReasonRunning,
			message: fmt.Sprintf("run %s: attempt %d of %d is running", cur.RunID, step.Attempt, retry.PolicyFor(&task.Spec).MaxAttempts()), reconciling: true}
	}
	return verdict{phase: v1alpha1.PhasePending, ready: metav1.ConditionUnknown, reason: v1alpha1.ReasonPending,
		message: fmt.Sprintf("run %s: the next attempt has no Job yet", cur.RunID), reconciling: true}
}

// judgeQueued is the Queued row: an attempt waits for admission and none of
// the Task's attempts runs. It goes before the cron and one-shot rows: a
// queued cron Task is InProgress until its run starts.
func judgeQueued(st *v1alpha1.TaskStatus, j judgement) (verdict, bool) {
	if j.problem != nil || len(st.Queued) == 0 || len(st.Active) > 0 {
		return verdict{}, false
	}
	w := st.Queued[0]
	v := verdict{phase: v1alpha1.PhaseQueued, ready: metav1.ConditionUnknown, reason: v1alpha1.ReasonQueued, reconciling: true,
		message: fmt.Sprintf("run %s: attempt %d waits for admission by TaskQueue %q", w.RunID, w.Attempt, j.queue.name)}
	if j.queue.reason != "" {
		v.reason, v.message = j.queue.reason, fmt.Sprintf("run %s: attempt %d waits: %s", w.RunID, w.Attempt, j.queue.message)
	}
	return v, true
}

// judgeRefusal is the row of a Task whose next attempt's Job the API
// server refused although the spec is fine: a quota on Jobs is waiting for
// capacity, and a refusal that may pass by itself (a webhook that could
// not be called, a 5xx, a 429) waiting for the API (both InProgress); a
// policy, a webhook's no or a foreign Job under the name is JobRefused,
// which needs someone (Stalled, not Failed: it starts once the refusal
// clears).
func judgeRefusal(st *v1alpha1.TaskStatus, j judgement) (verdict, bool) {
	if j.problem != nil || j.refusal == nil {
		return verdict{}, false
	}
	v := verdict{phase: v1alpha1.PhasePending, reason: j.refusal.Reason, message: j.refusal.Message}
	if len(st.Active) > 0 {
		v.phase = v1alpha1.PhaseRunning
	}
	if j.refusal.Reason == v1alpha1.ReasonWaitingForCapacity || j.refusal.Reason == v1alpha1.ReasonWaitingForAPI {
		v.ready, v.reconciling = metav1.ConditionUnknown, true
	} else {
		v.ready, v.stalled = metav1.ConditionFalse, true
	}
	return v, true
}

// judgeStreak is the TooManyFailures row: a cron Task whose failure streak
// reached spec.suspendAfterFailures starts no further slot, which needs a
// person (a successful run-now run or a spec change), so it is Stalled.
// A run still in progress (Allow) shows the phase Running.
func judgeStreak(task *v1alpha1.Task, st *v1alpha1.TaskStatus, j judgement) (verdict, bool) {
	if j.problem != nil || !scheduler.TooManyFailures(&task.Spec, st.ConsecutiveFailures) {
		return verdict{}, false
	}
	v := verdict{phase: v1alpha1.PhaseSuspended, ready: metav1.ConditionFalse, reason: v1alpha1.ReasonTooManyFailures, failed: true,
		message: fmt.Sprintf("%d consecutive runs failed (suspendAfterFailures: %d): no further slot starts until a run-now run succeeds or the spec changes",
			st.ConsecutiveFailures, *task.Spec.SuspendAfterFailures)}
	if len(st.Active) > 0 {
		v.phase = v1alpha1.PhaseRunning
	}
	return v, true
}

// judgeCron applies the cron rows: runs in progress do not make a cron
// Task InProgress; its readiness is that of its last run that succeeded or
// failed for good (a run replaced or cancelled says nothing of the work).
func judgeCron(task *v1alpha1.Task, st *v1alpha1.TaskStatus, upstreamMissing []string) verdict {
	v := verdict{phase: v1alpha1.PhaseScheduled, ready: metav1.ConditionTrue, reason: v1alpha1.ReasonScheduled,
		message: "no run has finished yet"}
	if len(st.Active) > 0 {
		v.phase = v1alpha1.PhaseRunning
	}
	for _, h := range st.History {
		if h.Result == v1alpha1.RunResultSucceeded {
			v.reason, v.message = v1alpha1.ReasonSucceeded, fmt.Sprintf("run %s %s", h.RunID, h.Message)
			break
		}
		if h.Result == v1alpha1.RunResultFailed {
			v.ready, v.reason, v.failed = metav1.ConditionFalse, v1alpha1.ReasonLastRunFailed, true
			v.message = fmt.Sprintf("run %s failed: %s", h.RunID, h.Message)
			break
		}
	}
	// Say what happens next, for `kubectl describe`.
	if st.NextScheduleTime != nil {
		v.message = Head(v.message, MaxMessage-40) + "; next run at " + st.NextScheduleTime.UTC().Format(time.RFC3339)
	}
	if len(task.Spec.After) > 0 {
		v.message = Head(v.message, MaxMessage-200) + "; " + afterText(task, upstreamMissing)
	}
	return v
}

// afterText says what spec.after waits for, and which of its Tasks do not
// exist (not a failure: the Task runs when they appear).
func afterText(task *v1alpha1.Task, missing []string) string {
	names := make([]string, 0, len(task.Spec.After))
	for _, a := range task.Spec.After {
		names = append(names, a.Task)
	}
	policy := "every one of"
	if task.Spec.AfterPolicy == v1alpha1.AfterAny {
		policy = "any of"
	}
	text := "runs after " + policy + " " + strings.Join(names, ", ")
	if len(missing) > 0 {
		text += " (missing: " + strings.Join(missing, ", ") + ")"
	}
	return Head(text, 190)
}

// recordReason is how a finished run ended: the reason its history entry
// records. A record written before entries had a reason gets the one its
// result implies (resultReasons); a failed one counts as RetriesExhausted,
// the reason of every failure but the http runner's bad request.
func recordReason(rec v1alpha1.RunRecord) v1alpha1.Reason {
	if rec.Reason != "" {
		return rec.Reason
	}
	if r, ok := resultReasons[rec.Result]; ok {
		return r
	}
	return v1alpha1.ReasonRetriesExhausted
}

// resultReasons are the reasons the results other than Failed imply.
var resultReasons = map[v1alpha1.RunResult]v1alpha1.Reason{
	v1alpha1.RunResultSucceeded: v1alpha1.ReasonSucceeded,
	v1alpha1.RunResultStopped:   v1alpha1.AttemptReplaced,
	v1alpha1.RunResultCancelled: v1alpha1.ReasonCancelled,
}

func reconcilingReason(v verdict) v1alpha1.Reason {
	if v.reconciling {
		return v.reason
	}
	return v1alpha1.ReasonIdle
}

// setCondition sets a condition; meta.SetStatusCondition moves
// lastTransitionTime only when the status changes.
func setCondition(st *v1alpha1.TaskStatus, typ string, status metav1.ConditionStatus, reason v1alpha1.Reason, msg string, gen int64, now time.Time) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: string(reason), Message: Head(msg, MaxMessage),
		ObservedGeneration: gen, LastTransitionTime: metav1.NewTime(now.UTC().Truncate(time.Second)),
	})
}

// ensureCondition sets a condition only when it is missing.
func ensureCondition(st *v1alpha1.TaskStatus, typ string, status metav1.ConditionStatus, reason v1alpha1.Reason, msg string, gen int64, now time.Time) {
	if meta.FindStatusCondition(st.Conditions, typ) == nil {
		setCondition(st, typ, status, reason, msg, gen, now)
	}
}

func boolStatus(b bool) metav1.ConditionStatus {
	if b {
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}
