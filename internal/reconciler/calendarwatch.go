package reconciler

import (
	"context"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/internal/index"
)

// configMapToTasks wakes the Tasks whose spec.skipDatesFrom names a
// ConfigMap that was created, changed or deleted, so their
// status.nextScheduleTime and Ready message follow the holiday list at
// once. It watches metadata only: the data is read by the pass that needs
// it (calendar.go).
type configMapToTasks struct{ c client.Reader }

func (h configMapToTasks) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.wake(ctx, e.Object, q)
}

func (h configMapToTasks) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion() {
		h.wake(ctx, e.ObjectNew, q)
	}
}

func (h configMapToTasks) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.wake(ctx, e.Object, q)
}

func (configMapToTasks) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (h configMapToTasks) wake(ctx context.Context, cm client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueueTasksBy(ctx, h.c, q, cm.GetNamespace(), index.SkipDatesFrom, cm.GetName())
}
