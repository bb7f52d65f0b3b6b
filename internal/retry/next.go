package retry

import (
	"fmt"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

// Kind is the kind of step a run takes next.
type Kind string

const (
	// StartAttempt: create attempt Step.Attempt now.
	StartAttempt Kind = "StartAttempt"
	// Running: attempt Step.Attempt is active; nothing to do.
	Running Kind = "Running"
	// WaitForRetry: attempt Step.Attempt starts at Step.At (backoff).
	WaitForRetry Kind = "WaitForRetry"
	// Paused: attempt Step.Attempt would start at Step.At, but the Task is
	// suspended.
	Paused Kind = "Paused"
	// Succeeded: the run succeeded at Step.At.
	Succeeded Kind = "Succeeded"
	// Failed: the run failed for good at Step.At, for Step.Reason.
	Failed Kind = "Failed"
	// Stopped: the run was stopped (replaced by a newer run) at Step.At.
	Stopped Kind = "Stopped"
	// Cancelled: a cancel token stopped the run at Step.At; no retry.
	Cancelled Kind = "Cancelled"
)

// Step is the next step of one run.
type Step struct {
	Kind Kind
	// Attempt is the attempt the step is about: the one to start, the active
	// one, the one waited for, or the last one of a finished run.
	Attempt int32
	// At is when the next attempt may start (WaitForRetry, Paused) or when
	// the run finished (Succeeded, Failed, Stopped).
	At time.Time
	// Reason and Message explain a Failed run (RetriesExhausted,
	// NotRetryable) or the last failed attempt of a retrying run.
	Reason  v1alpha1.Reason
	Message string
}

// Finished reports whether the run is over.
func (s Step) Finished() bool {
	return s.Kind == Succeeded || s.Kind == Failed || s.Kind == Stopped || s.Kind == Cancelled
}

// Active reports whether the run counts as active for concurrency: running,
// or waiting out its backoff. A paused run does not count.
func (s Step) Active() bool {
	return s.Kind == Running || s.Kind == WaitForRetry || s.Kind == StartAttempt
}

// Next decides the next step of a run from its attempts. paused is true when
// the Task is suspended and the run is not exempt (runs started by run-now
// keep retrying while suspended): a paused run starts no new attempt.
func Next(run *runs.Run, p Policy, paused bool, now time.Time) Step {
	if len(run.Attempts) == 0 {
		return Step{Kind: StartAttempt, Attempt: 1}
	}
	last := run.Latest()
	switch last.Phase {
	case runs.Active:
		return Step{Kind: Running, Attempt: last.Number}
	case runs.Succeeded:
		return Step{Kind: Succeeded, Attempt: last.Number, At: last.Finished}
	case runs.Stopped:
		switch last.Reason {
		case v1alpha1.AttemptReplaced:
			return Step{Kind: Stopped, Attempt: last.Number, At: last.Finished,
				Reason: last.Reason, Message: "stopped: replaced by a newer run"}
		case v1alpha1.AttemptCancelled:
			return Step{Kind: Cancelled, Attempt: last.Number, At: last.Finished,
				Reason: v1alpha1.ReasonCancelled, Message: "cancelled: " + last.Message}
		}
	}

	// The latest attempt failed (or was stopped because it could not start,
	// which fails it just the same).
	why := FailureText(last)
	if last.Reason == v1alpha1.AttemptNotRetryable {
		return Step{Kind: Failed, Attempt: last.Number, At: last.Finished,
			Reason: v1alpha1.ReasonNotRetryable, Message: why}
	}
	if last.Number >= p.MaxAttempts() {
		return Step{Kind: Failed, Attempt: last.Number, At: last.Finished,
			Reason: v1alpha1.ReasonRetriesExhausted, Message: exhausted(last.Number, why)}
	}
	// A deleted Job gets no backoff: when it went is not recorded anywhere
	// (its stand-in fails "now" on every pass), and someone deleted it on
	// purpose, not because the work is flaky.
	delay := p.DelayOf(run.ID, last.Number)
	// A server that said when to come back (Retry-After on a 429 or 503)
	// is waited for, up to the backoff's cap.
	if ra := min(last.RetryAfter, time.Duration(p.MaxSeconds)*time.Second); ra > delay {
		delay = ra
	}
	if last.Reason == v1alpha1.AttemptJobDeleted {
		delay = 0
	}
	at := last.Finished.Add(delay)
	step := Step{Attempt: last.Number + 1, At: at, Reason: last.Reason, Message: why}
	switch {
	case paused:
		step.Kind = Paused
	case !now.Before(at):
		step.Kind = StartAttempt
	default:
		step.Kind = WaitForRetry
	}
	return step
}

// FailureText says why an attempt failed: its reason, then the detail.
func FailureText(a *runs.Attempt) string {
	if a.Message == "" {
		return string(a.Reason)
	}
	return string(a.Reason) + ": " + a.Message
}

// exhausted says that every attempt failed, naming the last one's reason.
func exhausted(attempts int32, why string) string {
	if attempts == 1 {
		return "the only attempt failed: " + why
	}
	return fmt.Sprintf("all %d attempts failed; attempt %d: %s", attempts, attempts, why)
}

// Steps is the next step of every run of a Task: Next under the Task's
// policy (its jitter seeded by the Task's UID), with suspend pausing every
// run but those a run-now token started. A run the stored history records
// as finished takes no further step, whatever the spec says now: raising
// maxRetry after a run failed must not reopen it (CI has acted on the
// failure); a re-run is a run-now.
func Steps(task *v1alpha1.Task, rs []runs.Run, now time.Time) map[string]Step {
	spec := &task.Spec
	policy := PolicyFor(spec)
	policy.Seed = string(task.UID)
	suspended := spec.Suspend != nil && *spec.Suspend
	steps := make(map[string]Step, len(rs))
	for i := range rs {
		paused := suspended && !runs.IsRunNow(rs[i].ID)
		step := Next(&rs[i], policy, paused, now)
		if rec := finalRecord(task.Status.History, rs[i].ID); rec != nil && reopens(step) {
			step = settled(rec, rs[i].Latest().Number, step)
		}
		steps[rs[i].ID] = step
	}
	return steps
}

// reopens reports a step that would start or wait for another attempt.
func reopens(s Step) bool {
	return s.Kind == StartAttempt || s.Kind == WaitForRetry || s.Kind == Paused
}

// finalRecord is the history's record of run id when it records the run
// as finished.
func finalRecord(h []v1alpha1.RunRecord, id string) *v1alpha1.RunRecord {
	for i := range h {
		if h[i].RunID == id && h[i].Result != v1alpha1.RunResultRunning {
			return &h[i]
		}
	}
	return nil
}

// settled is the step of a finished run as the history records it; would
// is the step the attempts alone gave.
func settled(rec *v1alpha1.RunRecord, last int32, would Step) Step {
	at := would.At
	if rec.CompletionTime != nil {
		at = rec.CompletionTime.Time
	}
	kind := Failed
	switch rec.Result {
	case v1alpha1.RunResultSucceeded:
		kind = Succeeded
	case v1alpha1.RunResultStopped:
		kind = Stopped
	case v1alpha1.RunResultCancelled:
		kind = Cancelled
	}
	reason := rec.Reason
	if kind == Failed && reason == "" {
		reason = v1alpha1.ReasonRetriesExhausted
	}
	return Step{Kind: kind, Attempt: last, At: at, Reason: reason, Message: rec.Message}
}
