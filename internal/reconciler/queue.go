package reconciler

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/plan"
)

// +kubebuilder:rbac:groups=batch.taskops.io,resources=taskqueues,verbs=get;list;watch

// observeQueue reads, from the cache, the TaskQueue a Task names: whether
// it exists, is suspended, and which attempts its admission record lists.
// An attempt of a queued Task is started only when the record lists its
// Job (internal/queue decides the record); nil for a Task naming none.
func (p *pass) observeQueue(ctx context.Context) (*plan.Queue, error) {
	name := p.task.Spec.QueueName
	if name == "" {
		return nil, nil
	}
	q := &plan.Queue{Name: name}
	tq := &v1alpha1.TaskQueue{}
	err := p.r.Client.Get(ctx, ctrl.ObjectKey{Namespace: p.task.Namespace, Name: name}, tq)
	switch {
	case apierrors.IsNotFound(err):
		return q, nil
	case err != nil:
		return nil, err
	}
	q.Found = true
	q.Suspended = ptr.Deref(tq.Spec.Suspend, false)
	q.Admitted = p.r.Shortcuts.Admitted(tq)
	return q, nil
}
