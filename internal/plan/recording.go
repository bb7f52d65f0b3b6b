package plan

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/notify"
	"github.com/taskops/task-operator/internal/status"
)

// Recording is the write side of a pass, decided at once after it acted:
// the status to write, the notifications that status makes due (the one
// other thing a pass creates, decided here as the Jobs of attempts are in
// Decide), and when to write it. What the notification creates came to
// is fed back (RecordInput.Status.NotificationTries) and the whole is
// decided again, never edited.
type Recording struct {
	Status v1alpha1.TaskStatus
	Due    []notify.Order
	// WriteAt is when to write the status instead of now (zero: now).
	WriteAt time.Time
}

// RecordInput is what the pass saw and did, for Record.
type RecordInput struct {
	// Status is what the status is computed from; its Task carries the
	// stored status.
	Status status.Input
	// Old is the status as stored.
	Old v1alpha1.TaskStatus
	// Acted: acting, and reading the outputs after it, ended without error.
	Acted bool
	// RecordStartDelay is the fast path's wait for attempts that just
	// started (fastpath.RecordStartDelay); zero: the write is never put off.
	RecordStartDelay time.Duration
}

// Record decides what the pass records.
func (p *Plan) Record(in RecordInput) Recording {
	st := status.Compute(in.Status)
	due := notify.Orders(in.Status.Task, st.History, in.Status.Notifications)
	return Recording{Status: st, Due: due, WriteAt: p.writeAt(in, st, due)}
}

// writeAt is when the status write should be made instead of now (zero:
// now): with a RecordStartDelay, when the status changed only because
// attempts just started (RecordStartAt) and the pass has nothing else to
// say: no error, no notification, no problem with the spec or a Job,
// nothing only the status records. (A pass that created Jobs and could
// wait has already returned through RecordLater.) The status comparison
// is made only when an attempt did just start.
func (p *Plan) writeAt(in RecordInput, st v1alpha1.TaskStatus, due []notify.Order) time.Time {
	if in.RecordStartDelay == 0 || !in.Acted || len(due) > 0 || in.Status.Problem != nil || in.Status.Refusal != nil || !p.JobsSayItAll() {
		return time.Time{}
	}
	at := RecordStartAt(in.Status.Runs, in.Status.Now, in.RecordStartDelay)
	if at.IsZero() || equality.Semantic.DeepEqual(in.Old, st) {
		return time.Time{}
	}
	return at
}
