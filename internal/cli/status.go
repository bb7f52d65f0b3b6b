package cli

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

// How a Task's status is read. Nothing here trusts a status the operator
// computed from an older spec: callers check observed() first where the
// conditions matter.

// observed reports whether the status was computed from the current spec.
func observed(t *v1alpha1.Task) bool {
	return t.Status.ObservedGeneration != 0 && t.Status.ObservedGeneration == t.Generation
}

// condition returns the condition of type typ when it is current (its
// observedGeneration is the Task's generation), else nil.
func condition(t *v1alpha1.Task, typ string) *metav1.Condition {
	c := meta.FindStatusCondition(t.Status.Conditions, typ)
	if c == nil || c.ObservedGeneration != t.Generation {
		return nil
	}
	return c
}

// conditionTrue reports whether the current condition typ is True.
func conditionTrue(t *v1alpha1.Task, typ string) bool {
	c := condition(t, typ)
	return c != nil && c.Status == metav1.ConditionTrue
}

// isCron reports whether the Task has a schedule.
func isCron(t *v1alpha1.Task) bool { return t.Spec.Schedule != nil }

// maxAttempts is how many attempts a run may have.
func maxAttempts(t *v1alpha1.Task) int32 { return t.Spec.MaxRetry + 1 }

// pendingRunNowToken returns the run-now token the operator has not
// consumed yet, if any. A token present before the operator first wrote the
// status is taken as part of the Task's creation and starts no run, so it is
// not pending.
func pendingRunNowToken(t *v1alpha1.Task) (string, bool) {
	token := t.Annotations[v1alpha1.AnnotationRunNow]
	if token == "" || t.Status.ObservedGeneration == 0 {
		return "", false
	}
	if runs.TokenHash(token) == t.Status.LastRunNowToken {
		return "", false
	}
	return token, true
}

// findRun returns the history entry of run id, or nil.
func findRun(t *v1alpha1.Task, id string) *v1alpha1.RunRecord {
	for i := range t.Status.History {
		if t.Status.History[i].RunID == id {
			return &t.Status.History[i]
		}
	}
	return nil
}

// phaseLine describes where the Task's newest run stands, for progress
// lines: "Running (attempt 1/3)", "Retrying after attempt 1/3 failed, next
// attempt at ...".
func phaseLine(t *v1alpha1.Task) string {
	st := &t.Status
	phase := string(st.Phase)
	if phase == "" {
		phase = string(v1alpha1.PhasePending)
	}
	var run string
	if st.CurrentRun != "" && st.CurrentRun != runs.OneShot {
		run = "run " + st.CurrentRun + ", "
	}
	attempt := fmt.Sprintf("attempt %d/%d", st.Attempts, maxAttempts(t))
	switch st.Phase {
	case v1alpha1.PhaseRunning:
		return fmt.Sprintf("%s (%s%s)", phase, run, attempt)
	case v1alpha1.PhaseRetrying:
		line := fmt.Sprintf("Retrying (%s%s failed)", run, attempt)
		if st.NextRetryTime != nil {
			line += ", next attempt at " + formatTime(st.NextRetryTime)
		}
		if st.LastError != "" {
			line += ": " + oneLine(st.LastError, 120)
		}
		return line
	case v1alpha1.PhaseScheduled:
		if st.NextScheduleTime != nil {
			return "Scheduled (next run at " + formatTime(st.NextScheduleTime) + ")"
		}
		return phase
	case v1alpha1.PhasePending, "":
		if run != "" {
			return fmt.Sprintf("%s (%s)", phase, strings.TrimSuffix(run, ", "))
		}
		return phase
	default:
		return phase
	}
}

// failureLines explain why a Task failed: the Failed condition's reason and
// message, and status.lastError.
func failureLines(t *v1alpha1.Task) []string {
	lines := []string{fmt.Sprintf("task/%s failed", t.Name)}
	if c := meta.FindStatusCondition(t.Status.Conditions, v1alpha1.ConditionFailed); c != nil {
		lines[0] += ": " + withReason(c.Reason, c.Message)
	}
	lines = append(lines, lastErrorLines(t)...)
	return append(lines, whereToLook(t)...)
}

// withReason is "reason: message", the reason once: a run's message already
// starts with its reason ("RetriesExhausted: all 3 attempts failed; ...").
func withReason(reason, message string) string {
	switch {
	case message == "":
		return reason
	case message == reason || strings.HasPrefix(message, reason+": "):
		return message
	}
	return reason + ": " + message
}

// whereToLook lists the newest run's attempts (status.attemptRecords) and
// the commands that show more, for a failed Task.
func whereToLook(t *v1alpha1.Task) []string {
	var lines []string
	for _, r := range t.Status.AttemptRecords {
		line := fmt.Sprintf("  attempt %d (Job %s): %s", r.Attempt, r.JobName, attemptResult(&r))
		if r.Message != "" {
			line += ": " + oneLine(r.Message, 100)
		}
		lines = append(lines, line)
	}
	if len(lines) > 0 {
		lines = append([]string{"attempts of run " + t.Status.CurrentRun + ":"}, lines...)
	}
	ns := t.Namespace
	return append(lines, fmt.Sprintf("more: kubectl task history %s -n %s --attempts; kubectl task logs %s -n %s (while its Job exists)", t.Name, ns, t.Name, ns))
}

// attemptResult is "Failed PodFailed, exit code 3", "Running", ...
func attemptResult(r *v1alpha1.AttemptRecord) string {
	if r.Result == "" {
		return "Running"
	}
	out := string(r.Result)
	if r.Reason != "" {
		out += " " + string(r.Reason)
	}
	if r.ExitCode != nil {
		out += fmt.Sprintf(", exit code %d", *r.ExitCode)
	}
	return out
}

// lastErrorLines prints status.lastError, indented, when set.
func lastErrorLines(t *v1alpha1.Task) []string {
	if t.Status.LastError == "" {
		return nil
	}
	return []string{"last error: " + indent(t.Status.LastError)}
}

// indent puts continuation lines of a multi-line text under its first.
func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	return strings.ReplaceAll(s, "\n", "\n  ")
}

// oneLine folds s onto one line of at most n characters.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	return truncate(s, n)
}

// truncate cuts s to n runes, marking the cut.
func truncate(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 3 {
		return string([]rune(s)[:n])
	}
	return string([]rune(s)[:n-3]) + "..."
}

// formatTime prints a time in UTC, RFC 3339, or "-".
func formatTime(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// formatDuration prints d rounded for humans: 850ms, 12s, 3m4s, 2h5m.
func formatDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	default:
		return d.Round(time.Minute).String()
	}
}

// runDuration is how long a run took (or has taken so far).
func runDuration(r *v1alpha1.RunRecord, now time.Time) (time.Duration, bool) {
	if r.StartTime == nil {
		return 0, false
	}
	end := now
	if r.CompletionTime != nil {
		end = r.CompletionTime.Time
	}
	return end.Sub(r.StartTime.Time), true
}

// plural prints "1 attempt" / "2 attempts".
func plural(n int32, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
