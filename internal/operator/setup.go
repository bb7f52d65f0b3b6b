// Package operator wires the two controllers into a manager: the Task
// controller (internal/reconciler) and the TaskQueue controller
// (internal/taskqueue), over the indexes both read by (internal/index),
// the queues' lines both keep (internal/waitline) and the speed shortcuts
// both share (internal/fastpath). cmd/manager and
// the envtest suites set the operator up through Setup alone, so they run
// the same wiring.
package operator

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/reconciler"
	"github.com/taskops/task-operator/internal/taskqueue"
	"github.com/taskops/task-operator/internal/waitline"
)

// Setup registers the indexes and both controllers with mgr. The queue
// controller shares the Task controller's client, readers, recorder,
// clock, lease and shortcuts: one process, one view.
func Setup(ctx context.Context, mgr ctrl.Manager, opts controller.Options, tasks *reconciler.TaskReconciler) error {
	if err := index.Add(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("adding the cache's indexes: %w", err)
	}
	opts = tasks.Shortcuts.ControllerOptions(opts)
	tasks.Lines = waitline.New()
	queues := &taskqueue.Reconciler{Client: tasks.Client, APIReader: tasks.APIReader, Recorder: tasks.Recorder,
		Clock: tasks.Clock, Lease: tasks.Lease, Shortcuts: tasks.Shortcuts, Lines: tasks.Lines}
	if err := queues.SetupWithManager(mgr, opts); err != nil {
		return fmt.Errorf("setting up the TaskQueue controller: %w", err)
	}
	if err := tasks.SetupWithManager(mgr, opts); err != nil {
		return fmt.Errorf("setting up the Task controller: %w", err)
	}
	return nil
}
