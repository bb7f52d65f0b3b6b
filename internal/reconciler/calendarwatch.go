package reconciler

import (
	"context"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/index"
)

// calendarToTasks wakes the Tasks whose spec.skipCalendars names a
// TaskCalendar that was created, whose dates changed, or that went, in
// every namespace (a calendar is cluster-scoped), so their
// status.nextScheduleTime and Ready message follow it at once.
type calendarToTasks struct{ c client.Reader }

func (h calendarToTasks) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.wake(ctx, e.Object, q)
}

func (h calendarToTasks) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	o, n := e.ObjectOld.(*v1alpha1.TaskCalendar), e.ObjectNew.(*v1alpha1.TaskCalendar)
	if !equality.Semantic.DeepEqual(o.Spec.Dates, n.Spec.Dates) {
		h.wake(ctx, n, q)
	}
}

func (h calendarToTasks) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.wake(ctx, e.Object, q)
}

func (calendarToTasks) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (h calendarToTasks) wake(ctx context.Context, cal client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueueTasksBy(ctx, h.c, q, "", index.SkipCalendars, cal.GetName()) // "": every namespace
}
