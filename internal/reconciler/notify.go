package reconciler

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// stage gave (notify.Orders: the Pending runs without a Job): one Job per
// run outcome, named for the run, so a pass repeated after a lost status
// write, a restart or a new leader finds the Job (AlreadyExists) instead
// of sending twice. What each create came to is fed back to the pure
// stage (notificationTries): a Job to record; a refusal that will not
// pass, which fails the notification; or one that may pass (the API
// server or a webhook it calls restarting, throttling), which leaves it
// Pending and brings this Task back after notify.RetryAfter, until the
// notification deadline. The run's result is written in this pass
// whatever became of its notification.
func (p *pass) sendNotifications(ctx context.Context, due []notify.Order) error {
	if len(due) == 0 {
		return nil
	}
	stored, err := p.storedHistory(ctx)
	if err != nil {
		return err
	}
	for _, order := range due {
		if !p.r.leaseHeld() {
			return guards.ErrLeaseLapsed
		}
		if notificationDecided(stored, order.RunID) {
			// An earlier pass made this notification's Job and recorded it;
			// this pass started from an older cached Task. Its Job may be
			// gone since (deleted): never a second one. This pass's status
			// write loses to the newer status and runs again.
			continue
		}
		job := jobs.BuildNotification(p.task, order.Document, order.Targets, p.r.Jobs)
		try := p.r.createNotification(ctx, p.task, job, order.RunID)
		if p.notificationTries == nil {
			p.notificationTries = map[string]notify.Try{}
		}
		p.notificationTries[order.RunID] = try
		switch {
		case try.Final:
			p.noteNotification(order.RunID, fmt.Sprintf("run %s: notification not sent (the run's result stands): %s", order.RunID, try.Refusal))
		case try.Refusal != "":
			rec := recordOf(p.old.History, order.RunID)
			if notify.PastDeadline(rec, p.now, p.r.notificationDeadline()) {
				p.noteNotification(order.RunID, fmt.Sprintf("run %s: notification not sent (the run's result stands): the API server still refused its Job %s after the run ended: %s",
					order.RunID, p.r.notificationDeadline(), try.Refusal))
				continue
			}
			log.FromContext(ctx).Info("notification Job refused for now; trying again", "run", order.RunID, "job", job.Name, "reason", try.Refusal)
			p.notifyAgainAt = earliest(p.notifyAgainAt, p.now.Add(notify.RetryAfter(rec, p.now)))
		}
	}
	return nil
}

// recordOf is run id's record in history (the zero record if none: a run
// that ends in this pass, whose notification deadline has not begun).
func recordOf(history []v1alpha1.RunRecord, id string) v1alpha1.RunRecord {
	for _, h := range history {
		if h.RunID == id {
			return h
		}
	}
	return v1alpha1.RunRecord{}
}

// notificationDeadline is --notification-deadline, or its default.
func (r *TaskReconciler) notificationDeadline() time.Duration {
	if r.NotificationDeadline > 0 {
		return r.NotificationDeadline
	}
	return notify.DefaultDeadline
}

// createNotification creates a notification Job and says what came of
// it: the Job (created, or found under its name as this run's), or why
// the API server refused it and whether that will pass (guards.MayPass: a
// server error, including a webhook it could not call, throttling, a
// timeout, a lost connection); a policy's or a quota's refusal, an
// invalid Job and someone else's Job under the name will not.
func (r *TaskReconciler) createNotification(ctx context.Context, task *v1alpha1.Task, job *batchv1.Job, runID string) notify.Try {
	err := r.Client.Create(ctx, job)
	switch {
	case err == nil:
		log.FromContext(ctx).Info("created notification Job", "job", job.Name, "run", runID)
		return notify.Try{Job: job.Name}
	case apierrors.IsAlreadyExists(err):
		existing := &batchv1.Job{}
		if err := r.APIReader.Get(ctx, ctrl.ObjectKeyFromObject(job), existing); err != nil {
			// Most likely ours (the name is this run's): the next pass
			// finds it, or marks the notification Failed if it is not.
			log.FromContext(ctx).Info("could not read the existing notification Job; taking it as ours", "job", job.Name, "error", err.Error())
			return notify.Try{Job: job.Name}
		}
		if _, ours := notify.FromJobs(task.UID, []batchv1.Job{*existing})[runID]; !ours {
			return notify.Try{Refusal: fmt.Sprintf("Job %s exists and is not this Task's notification of run %s: delete that Job (kubectl delete job %s)", job.Name, runID, job.Name), Final: true}
		}
		return notify.Try{Job: job.Name}
	case guards.MayPass(err):
		return notify.Try{Refusal: fmt.Sprintf("the API server refused notification Job %s for now: %v", job.Name, err)}
	default:
		return notify.Try{Refusal: fmt.Sprintf("the API server refused notification Job %s: %v", job.Name, err), Final: true}
	}
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

// notificationDecided reports whether the history records the
// notification of run id as settled or its Job as created.
func notificationDecided(h []v1alpha1.RunRecord, id string) bool {
	for _, r := range h {
		if r.RunID == id {
			return r.NotificationJob != "" || (r.Notification != "" && r.Notification != v1alpha1.NotificationPending)
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
// read from the API server. A notification whose Job was recorded
// (NotificationJob) and is gone was deleted before it finished: the
// notification is Failed, the event says why, and it is not sent again,
// since whether the deleted Job had told some webhooks already is not
// known. Without this it would stay Pending for ever, and the run's Jobs
// would never be pruned. One with no Job recorded has none yet: the pure
// stage makes it due.
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
		if rec.NotificationJob == "" {
			continue
		}
		in.Notifications[rec.RunID] = notify.Job{Name: rec.NotificationJob, RunID: rec.RunID, Finished: true}
		p.noteNotification(rec.RunID, fmt.Sprintf(
			"run %s: notification Job %s was deleted before it finished; the notification is not sent again (the run's result stands)", rec.RunID, rec.NotificationJob))
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
