package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/fastpath"
	"github.com/taskops/task-operator/internal/guards"
	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/notify"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/waitline"
)

// TaskReconciler reconciles Tasks.
type TaskReconciler struct {
	// Client reads from the cache and writes to the API server.
	Client ctrl.Client
	// APIReader reads from the API server directly: pods (never cached, so
	// the operator does not hold every pod of the cluster in memory), and
	// Jobs right after an AlreadyExists.
	APIReader ctrl.Reader
	Recorder  events.EventRecorder
	// Clock is read once per pass; tests inject a fake one.
	Clock clock.PassiveClock
	// Jobs holds the images the Jobs run.
	Jobs jobs.Options
	// Owners reads the Jobs a Task controls from the cache
	// (index.AddOwners). nil: listed through Client by the field index
	// index.OwnedJobs, which the Client's cache must have (the unit
	// tests' fake clients).
	Owners index.JobOwners
	// Lease, when set, tells whether this replica still holds its leader
	// lease. A replica that was paused (or cut off) past its lease acts on
	// a stale cache until client-go notices and the process exits; without
	// the lease it must not start anything: a pass does nothing and looks
	// again later. nil: no leader election.
	Lease LeaseHolder
	// Logs, when set, reads the log tail of an attempt the Job controller
	// is failing for its deadline (deadlineOutput in pods.go). nil: such an
	// attempt keeps only the Job's message.
	Logs PodLogs
	// Workers, when set, reads the ended pods of attempts that ran on
	// MultiKueue worker clusters the operator has a kubeconfig for
	// (internal/workers; multikueue.go). nil: a remote attempt's record
	// says where its output is.
	Workers WorkerPods
	// NotificationDeadline is how long after a run's end its notification
	// Job may be refused by the API server for reasons that may pass
	// before the notification is Failed (--notification-deadline; zero:
	// notify.DefaultDeadline).
	NotificationDeadline time.Duration
	// ServiceAccountOptIn refuses (InvalidSpec) Tasks that name a
	// ServiceAccount unless their namespace opted in (policy.go).
	ServiceAccountOptIn bool
	// Shortcuts are the speed shortcuts this controller shares with the
	// queue controller (internal/fastpath); nil turns them all off (the
	// manager's --fast-path=false): what is left is the operator whose
	// correctness the shortcuts must not change, only slower under load.
	Shortcuts *fastpath.Shortcuts
	// Lines are the queues' lines of waiting attempts (internal/waitline),
	// shared with the queue controller: with the shortcuts on, a status
	// write puts the Task in its line at once. nil: none kept here.
	Lines *waitline.Lines

	// newTasks holds the new Tasks queued for their first pass, per
	// namespace, for fairness between namespaces (fairness.go).
	newTasks newTasksWaiting
	// deleted are the Task Jobs this process saw deleted lately
	// (deletedjobs.go): a pass never creates one of them again.
	deleted deletedJobs
}

// LeaseHolder reports whether this replica may act as the leader right
// now (guards.Lease).
type LeaseHolder = guards.Lease

// errNamespaceTerminating stops a pass whose Job the API server refused
// because the namespace is being deleted.
var errNamespaceTerminating = errors.New("the namespace is being deleted; starting nothing")

// leaseHeld reports whether this replica may write as the leader.
func (r *TaskReconciler) leaseHeld() bool { return guards.Held(r.Lease) }

// +kubebuilder:rbac:groups=batch.taskops.io,resources=tasks,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups=batch.taskops.io,resources=tasks/status,verbs=get;patch
// +kubebuilder:rbac:groups=batch.taskops.io,resources=tasks/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one Task one step closer to what its spec asks. A
// lapsed lease or an optimistic-lock conflict, wherever in the pass, ends
// it here (guards.Settle): the stages just return their errors.
func (r *TaskReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := r.reconcile(ctx, req)
	return guards.Settle(ctx, res, err)
}

func (r *TaskReconciler) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	r.newTasks.taken(req.NamespacedName)
	defer r.Shortcuts.LinePassEnded(req.NamespacedName)
	if !r.leaseHeld() {
		return reconcile.Result{}, guards.ErrLeaseLapsed
	}
	task := &v1alpha1.Task{}
	if err := r.Client.Get(ctx, req.NamespacedName, task); err != nil {
		return reconcile.Result{}, ctrl.IgnoreNotFound(err)
	}
	task = r.Shortcuts.Latest(task)
	if !task.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, task)
	}
	return r.reconcileNormal(ctx, task)
}

// addFinalizer adds the cleanup finalizer, right before a Task's first
// status write. Not earlier: a new Task's first Job is created first, so
// in a burst the Jobs do not wait behind a finalizer patch each. Until
// then a deleted Task needs no cleanup of its own: its Jobs carry its
// controller reference, so the garbage collector deletes them and their
// pods (in the background), which is what the finalizer does too.
func (r *TaskReconciler) addFinalizer(ctx context.Context, task *v1alpha1.Task) error {
	if controllerutil.ContainsFinalizer(task, v1alpha1.Finalizer) {
		return nil
	}
	computed := task.Status // the patch response overwrites it
	controllerutil.AddFinalizer(task, v1alpha1.Finalizer)
	patch, err := finalizersPatch(task)
	if err != nil {
		return err
	}
	err = r.Client.Patch(ctx, task, patch)
	task.Status = computed
	return err
}

// reconcileNormal runs one pass for a Task that is not being deleted, in
// stages: each reads only what the stages before it left.
func (r *TaskReconciler) reconcileNormal(ctx context.Context, task *v1alpha1.Task) (reconcile.Result, error) {
	p := &pass{r: r, task: task, old: task.Status.DeepCopy(), now: r.Clock.Now()}

	// 1. Observe: the Jobs, the attempts whose Job is missing, the pods the
	// decision needs (observe.go). Nothing to record without them.
	in, err := p.observe(ctx)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("observe: %w", err)
	}
	// 2. Decide, once, into one plan (internal/plan, pure).
	p.plan = plan.Decide(in)
	// 3. Act on the plan (act.go).
	actErr := p.act(ctx)
	switch {
	case errors.Is(actErr, guards.ErrLeaseLapsed):
		return reconcile.Result{}, actErr // a pass that must stand down writes nothing
	case errors.Is(actErr, errNamespaceTerminating):
		// No requeue: the namespace controller deletes the Task, and that
		// brings the next pass.
		log.FromContext(ctx).V(1).Info(actErr.Error())
		return reconcile.Result{}, nil
	case actErr == nil && r.Shortcuts.RecordLater(p.plan.RecordLater(p.created)):
		// The create events of the Jobs bring the pass that records them.
		return p.requeueToRecord(p.plan.Wake), nil
	}
	// 4. Read what the pods of newly finished attempts said (outputs.go).
	// This comes back to the API server after acting: which attempts the
	// status lacks the output of is known only from the runs as the pass
	// left them, and each is read once, only when the status is written.
	if actErr == nil {
		actErr = p.readOutputs(ctx)
	}
	// 5. Decide the status and the notifications it makes due, and record
	// them (record).
	return p.record(ctx, actErr)
}

// requeueToRecord is the result of a pass that leaves its status write to
// a later one, at wake. The queue merges a requeue with an item already
// waiting for the same Task, keeping the higher priority: the new Job's
// create event, queued to record it behind work to start, must not be
// raised to start priority by this requeue.
func (p *pass) requeueToRecord(wake time.Time) reconcile.Result {
	res := requeueAt(wake, p.now)
	if res.RequeueAfter > 0 {
		res.Priority = ptr.To(fastpath.RecordPriority)
	}
	return res
}

// record is the write side of a pass: the status and the notifications it
// makes due are decided (internal/status, internal/notify; pure), the
// notifications created, and the status written once; then what changed
// is reported, and the Task expired or looked at again when the plan says.
func (p *pass) record(ctx context.Context, actErr error) (reconcile.Result, error) {
	r, task := p.r, p.task
	rec := p.recording(actErr == nil)
	task.Status = rec.Status
	// (fast path) A write that would only record attempts that just
	// started waits for their end or for RecordStartDelay: a short run then
	// costs one status write, not two (plan/recording.go).
	if !rec.WriteAt.IsZero() {
		return p.requeueToRecord(earliest(rec.WriteAt, p.plan.Wake)), nil
	}
	// (fast path) A write that puts the Task in its queue's line, from a
	// pass that started nothing, takes one of a few places, or leaves the
	// Task to be woken when one frees (fastpath.LineWrites says why).
	if p.created == 0 && fastpath.JoinsLine(p.old, &task.Status) {
		release, ok := r.Shortcuts.TakeLineWrite(ctrl.ObjectKeyFromObject(task), task.Spec.QueueName)
		if !ok {
			return requeueAt(p.plan.Wake, p.now), nil
		}
		defer release()
	}
	// Paused past the lease during this pass: the status patch would be
	// refused anyway if stale (optimistic locking); do not send it.
	if !r.leaseHeld() {
		return reconcile.Result{}, guards.ErrLeaseLapsed
	}
	// The finalizer, with the first write (addFinalizer says why then).
	if err := r.addFinalizer(ctx, task); err != nil {
		r.Shortcuts.ForgetWrite(task.UID)
		return reconcile.Result{}, fmt.Errorf("adding the finalizer: %w", err)
	}
	if err := p.notify(ctx, rec.Due); err != nil {
		return reconcile.Result{}, err
	}
	// One status write, only when it changed.
	if err := r.writeStatus(ctx, task, p.old); err != nil {
		r.Shortcuts.ForgetWrite(task.UID)
		return reconcile.Result{}, fmt.Errorf("writing the status: %w", err)
	}
	// Report what changed between the old and the written status
	// (report.go), then expire the Task or look again when the plan says.
	p.reportTransitions()
	if actErr != nil {
		return reconcile.Result{}, fmt.Errorf("act: %w", actErr)
	}
	if p.plan.Expire {
		return r.expire(ctx, task)
	}
	return requeueAt(earliest(p.plan.Wake, p.notifyAgainAt), p.now), nil
}

// notify creates the notification Jobs of the orders (notify.go) before
// the status that records them, so a crash in between leaves the Job,
// which the next pass finds by its name. One refused for a reason that may
// pass stays due, and the pass comes back for it (notifyAgainAt). What the
// creates came to is fed back to the pure stage: the status is computed
// again with it (from the stored status, as the first time), never
// edited.
func (p *pass) notify(ctx context.Context, due []notify.Order) error {
	if err := p.sendNotifications(ctx, due); err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	if len(p.notificationTries) > 0 {
		p.task.Status = *p.old.DeepCopy()
		p.task.Status = p.recording(true).Status
	}
	return nil
}

// earliest is the earlier of two wake-up times, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// writeStatus patches the status when it changed, with optimistic locking:
// a pass that read an outdated Task fails with a conflict and runs again,
// so attempts and history never move backwards.
func (r *TaskReconciler) writeStatus(ctx context.Context, task *v1alpha1.Task, old *v1alpha1.TaskStatus) error {
	if equality.Semantic.DeepEqual(*old, task.Status) {
		return nil
	}
	patch, err := StatusPatch(task, old)
	if err != nil {
		return err
	}
	written := WrittenTask(task)
	if err := r.Client.Status().Patch(ctx, written, patch); err != nil {
		return err
	}
	task.ResourceVersion = written.ResourceVersion
	r.Shortcuts.RememberWrite(task, r.Clock.Now())
	r.wakeQueue(task, old)
	return nil
}

// expire deletes a finished one-shot Task whose ttlSecondsAfterFinished
// passed; the finalizer then cleans up its Jobs.
func (r *TaskReconciler) expire(ctx context.Context, task *v1alpha1.Task) (reconcile.Result, error) {
	log.FromContext(ctx).Info("deleting finished Task: ttlSecondsAfterFinished passed")
	r.event(task, nil, eventNormal, v1alpha1.EventTaskExpired, "Delete", "ttlSecondsAfterFinished passed; deleting the Task")
	err := r.Client.Delete(ctx, task, ctrl.Preconditions{UID: &task.UID})
	return reconcile.Result{}, ctrl.IgnoreNotFound(err)
}

// requeueAt turns the earliest wake-up time into an exact RequeueAfter.
func requeueAt(wake, now time.Time) reconcile.Result {
	if wake.IsZero() {
		return reconcile.Result{}
	}
	d := wake.Sub(now)
	if d <= 0 {
		// The planners act on "now >= at", so a wake-up in the past would
		// already have been acted on; a floor keeps a clock oddity from
		// ever becoming a hot loop.
		d = time.Second
	}
	// A wake-up starts work (a slot, a retry): the default priority, not
	// the one of the Job event that may have brought this pass.
	return reconcile.Result{RequeueAfter: d, Priority: ptr.To(fastpath.StartPriority)}
}
