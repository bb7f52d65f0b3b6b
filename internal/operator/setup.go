// Package operator builds the operator's shared parts once and wires the
// two controllers into a manager: the Task controller (internal/reconciler)
// and the TaskQueue controller (internal/taskqueue), over the indexes both
// read by (internal/index), the queues' lines both keep (internal/waitline)
// and the speed shortcuts both take (internal/fastpath). Each controller
// is built from the shared parts, never from the other's fields.
// cmd/manager and the envtest suites set the operator up through NewShared
// and Setup alone, so they run the same wiring.
package operator

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/taskops/task-operator/internal/fastpath"
	"github.com/taskops/task-operator/internal/guards"
	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/reconciler"
	"github.com/taskops/task-operator/internal/recorder"
	"github.com/taskops/task-operator/internal/taskqueue"
	"github.com/taskops/task-operator/internal/waitline"
)

// Shared are the parts both controllers use: one process, one view.
type Shared struct {
	// Client reads from the manager's cache and writes to the API server;
	// APIReader reads from the API server directly.
	Client    client.Client
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Clock is read once per pass; the envtest suites pass a fake one.
	Clock clock.PassiveClock
	// Lease says whether this replica holds the leader lease; nil: no
	// leader election.
	Lease guards.Lease
	// Shortcuts are the speed shortcuts; nil: off (--fast-path=false).
	Shortcuts *fastpath.Shortcuts
	// Lines are the queues' lines of waiting attempts, kept by both.
	Lines *waitline.Lines
}

// NewShared makes the shared parts over mgr: its client and API reader,
// an event recorder of bounded memory (internal/recorder; Setup starts
// it with mgr), the queues' lines, and clk, lease and shortcuts as given
// (nil clk: the real clock).
func NewShared(mgr ctrl.Manager, clk clock.PassiveClock, lease guards.Lease, shortcuts *fastpath.Shortcuts) Shared {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return Shared{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: recorder.New(mgr.GetClient(), mgr.GetScheme(), "task-operator", recorder.Options{}),
		Clock: clk, Lease: lease, Shortcuts: shortcuts, Lines: waitline.New(),
	}
}

// TaskSettings are the Task controller's own settings (reconciler's
// fields of the same names say what each does).
type TaskSettings struct {
	Jobs                 jobs.Options
	Logs                 reconciler.PodLogs
	Workers              reconciler.WorkerPods
	ServiceAccountOptIn  bool
	NotificationDeadline time.Duration
}

// Setup registers the indexes, the event recorder and both controllers with mgr, each built
// from shared, and returns the Task controller (the envtest suites drive
// it by hand too).
func Setup(ctx context.Context, mgr ctrl.Manager, opts controller.Options, shared Shared, settings TaskSettings) (*reconciler.TaskReconciler, error) {
	if err := index.Add(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("adding the cache's indexes: %w", err)
	}
	owners, err := index.AddOwners(ctx, mgr.GetCache())
	if err != nil {
		return nil, fmt.Errorf("adding the Jobs' owner index: %w", err)
	}
	if run, ok := shared.Recorder.(manager.Runnable); ok {
		if err := mgr.Add(run); err != nil {
			return nil, fmt.Errorf("adding the event recorder: %w", err)
		}
	}
	if run, ok := settings.Workers.(manager.Runnable); ok {
		if err := mgr.Add(run); err != nil {
			return nil, fmt.Errorf("adding the worker readers: %w", err)
		}
	}
	opts = shared.Shortcuts.ControllerOptions(opts)
	queues := &taskqueue.Reconciler{Client: shared.Client, APIReader: shared.APIReader, Recorder: shared.Recorder,
		Clock: shared.Clock, Lease: shared.Lease, Shortcuts: shared.Shortcuts, Lines: shared.Lines}
	if err := queues.SetupWithManager(mgr, opts); err != nil {
		return nil, fmt.Errorf("setting up the TaskQueue controller: %w", err)
	}
	tasks := &reconciler.TaskReconciler{Client: shared.Client, APIReader: shared.APIReader, Recorder: shared.Recorder,
		Clock: shared.Clock, Lease: shared.Lease, Shortcuts: shared.Shortcuts, Lines: shared.Lines,
		Jobs: settings.Jobs, Owners: owners, Logs: settings.Logs, Workers: settings.Workers, ServiceAccountOptIn: settings.ServiceAccountOptIn, NotificationDeadline: settings.NotificationDeadline}
	if err := tasks.SetupWithManager(mgr, opts); err != nil {
		return nil, fmt.Errorf("setting up the Task controller: %w", err)
	}
	return tasks, nil
}
