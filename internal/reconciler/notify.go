package reconciler

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/guards"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/metrics"
	"github.com/taskops/task-operator/internal/notify"
	"github.com/taskops/task-operator/internal/plan"
)

// sendNotifications creates the notification Job of each order the pure
// stage gave (notify.Orders: the runs the new status marks Pending): one
// Job per run outcome, named for the run, so a pass repeated after a lost
// status write, a restart or a new leader finds the Job (AlreadyExists)
// instead of sending twice. A Job the API server refuses marks the
// notification Failed, by feeding the refusal back to the pure stage.
func (p *pass) sendNotifications(ctx context.Context, due []notify.Order) error {
	if len(due) == 0 {
		return nil
	}
	stored, err := p.storedHistory(ctx)
	if err != nil {
		return err
	}
	for _, rec := range due {
		if !p.r.leaseHeld() {
			return guards.ErrLeaseLapsed
		}
		if notificationDecided(stored, rec.RunID) {
			// An earlier pass made this notification's Job and recorded it;
			// this pass started from an older cached Task. Its Job may be
			// gone since (deleted): never a second one. This pass's status
			// write loses to the newer status and runs again.
			continue
		}
		job := jobs.BuildNotification(p.task, rec.Document, rec.Targets, p.r.Jobs)
		if refusal := p.createNotification(ctx, job, rec.RunID); refusal != "" {
			// Never held back: the run's result is written in this pass
			// whatever became of its notification.
			if p.notificationsRefused == nil {
				p.notificationsRefused = map[string]bool{}
			}
			p.notificationsRefused[rec.RunID] = true
			p.noteNotification(rec.RunID, fmt.Sprintf("run %s: notification not sent (the run's result stands; it is not retried): %s", rec.RunID, refusal))
		}
	}
	return nil
}

// notificationCreateRetry retries a notification Job's create that failed
// for a moment (server timeout, 5xx, 429, lost connection) a few times
// within the pass, about 1.5 s in all, before the notification is given up.
var notificationCreateRetry = wait.Backoff{Steps: 4, Duration: 200 * time.Millisecond, Factor: 2}

// createNotification creates a notification Job and returns, when it could
// not, why, for the NotificationFailed event: any refusal (a quota of
// Jobs the run's own Jobs filled, an admission policy or webhook, someone
// else's Job under the name, an invalid Job) and an API server that keeps
// failing. A refusal is not retried in later passes: the status records
// the notification Failed in the same write as the run's result, so
// neither waits for the other.
func (p *pass) createNotification(ctx context.Context, job *batchv1.Job, runID string) string {
	err := retry.OnError(notificationCreateRetry, transient, func() error { return p.r.Client.Create(ctx, job) })
	switch {
	case err == nil:
		log.FromContext(ctx).Info("created notification Job", "job", job.Name, "run", runID)
		return ""
	case apierrors.IsAlreadyExists(err):
		existing := &batchv1.Job{}
		if err := p.r.APIReader.Get(ctx, ctrl.ObjectKeyFromObject(job), existing); err != nil {
			// Most likely ours (the name is this run's): the next pass
			// finds it, or marks the notification Failed if it is not.
			log.FromContext(ctx).Info("could not read the existing notification Job; taking it as ours", "job", job.Name, "error", err.Error())
			return ""
		}
		if _, ours := notify.FromJobs(p.task.UID, []batchv1.Job{*existing})[runID]; !ours {
			return fmt.Sprintf("Job %s exists and is not this Task's notification of run %s", job.Name, runID)
		}
		return ""
	default:
		return fmt.Sprintf("the API server refused notification Job %s: %v", job.Name, err)
	}
}

// transient reports an API error that may not repeat: a create retried
// after it can succeed.
func transient(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsUnexpectedServerError(err) ||
		utilnet.IsConnectionReset(err) || utilnet.IsConnectionRefused(err)
}

// storedHistory is the Task's history as the API server has it now: a
// notification Job is the one thing a pass creates that a deleted copy
// does not guard (its name is free again), so whether the notification was
// already decided is read from the source, not the cache. One read per pass
// that has a notification to send.
func (p *pass) storedHistory(ctx context.Context) ([]v1alpha1.RunRecord, error) {
	stored := &v1alpha1.Task{}
	if err := p.r.APIReader.Get(ctx, ctrl.ObjectKeyFromObject(p.task), stored); err != nil {
		return nil, fmt.Errorf("reading the stored Task before a notification: %w", err)
	}
	return stored.Status.History, nil
}

// notificationDecided reports whether the history records a notification
// state for run id.
func notificationDecided(h []v1alpha1.RunRecord, id string) bool {
	for _, r := range h {
		if r.RunID == id {
			return r.Notification != ""
		}
	}
	return false
}

// noteNotification keeps why the notification of run id failed, for its
// event.
func (p *pass) noteNotification(id, msg string) {
	if p.notificationNotes == nil {
		p.notificationNotes = map[string]string{}
	}
	p.notificationNotes[id] = msg
}

// findMissingNotifications (part of stage 1, observe) looks for the
// notification Job of every run the stored status marks Pending whose Job
// the cache does not show. Usually the cache is just behind, and the Job is
// read from the API server. A Job that is gone was deleted before it
// finished (the pass that marks a notification Pending creates its Job
// before that status write): the notification is Failed, the event says
// why, and it is not sent again, since whether the deleted Job had told
// some webhooks already is not known. Without this it would stay Pending
// for ever, and the run's Jobs would never be pruned.
func (p *pass) findMissingNotifications(ctx context.Context, in *plan.Input) error {
	for _, rec := range p.old.History {
		if rec.Notification != v1alpha1.NotificationPending {
			continue
		}
		if _, seen := in.Notifications[rec.RunID]; seen {
			continue
		}
		names := jobs.NotificationNames(p.task, rec.RunID)
		job, err := p.readOwnJob(ctx, names, func(j *batchv1.Job) bool {
			_, ours := notify.FromJobs(p.task.UID, []batchv1.Job{*j})[rec.RunID]
			return ours
		})
		if err != nil {
			return err
		}
		if job != nil {
			in.Notifications[rec.RunID] = notify.FromJobs(p.task.UID, []batchv1.Job{*job})[rec.RunID]
			continue
		}
		name := names[0]
		in.Notifications[rec.RunID] = notify.Job{Name: name, RunID: rec.RunID, Finished: true}
		p.noteNotification(rec.RunID, fmt.Sprintf(
			"run %s: notification Job %s was deleted before it finished; the notification is not sent again (the run's result stands)", rec.RunID, name))
	}
	return nil
}

// notificationEvents reports the notifications whose outcome the written
// status records for the first time.
func (p *pass) notificationEvents() {
	r, task := p.r, p.task
	was := map[string]v1alpha1.NotificationState{}
	for _, h := range p.old.History {
		was[h.RunID] = h.Notification
	}
	for _, h := range task.Status.History {
		if h.Notification == was[h.RunID] {
			continue
		}
		name := jobs.NotificationName(task, h.RunID)
		switch h.Notification {
		case v1alpha1.NotificationSent:
			metrics.NotificationsTotal.WithLabelValues("sent").Inc()
			r.event(task, nil, eventNormal, v1alpha1.EventNotificationSent, "Notify",
				fmt.Sprintf("run %s: notification sent by Job %s", h.RunID, name))
		case v1alpha1.NotificationFailed:
			metrics.NotificationsTotal.WithLabelValues("failed").Inc()
			msg, noted := p.notificationNotes[h.RunID]
			if !noted {
				msg = fmt.Sprintf("run %s: notification not sent (the run's result stands); see `kubectl logs job/%s -n %s`", h.RunID, name, task.Namespace)
			}
			r.event(task, nil, eventWarning, v1alpha1.EventNotificationFailed, "Notify", msg)
		}
	}
}
