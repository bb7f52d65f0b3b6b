package index

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// waitingLineIndex is the Task informer's own index behind WaitingLine:
// "namespace/queue" of each Task waiting in a queue (TaskWaitingIn).
const waitingLineIndex = "taskops.waitingLine"

// WaitingLine reads the Tasks waiting in a queue from the Task informer's
// index itself: the cached objects, not copies. A List through the cache
// (QueueWaiting) copies every waiting Task into a new slice on each queue
// pass, a cost proportional to the line (docs/performance.md, "Ten
// thousand Tasks"). The Tasks returned are the cache's: never change one.
type WaitingLine struct {
	indexer toolscache.Indexer
}

// NewWaitingLine adds the index to c's Task informer (before the cache
// starts). It returns nil when the informer is not a single shared index
// informer (a cache over several namespaces, --namespaces): the queue
// then lists through the cache's field index as before.
func NewWaitingLine(ctx context.Context, c cache.Cache) (*WaitingLine, error) {
	inf, err := c.GetInformer(ctx, &v1alpha1.Task{})
	if err != nil {
		return nil, err
	}
	sii, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return nil, nil
	}
	if err := inf.AddIndexers(toolscache.Indexers{waitingLineIndex: func(obj any) ([]string, error) {
		t, ok := obj.(*v1alpha1.Task)
		if !ok {
			return nil, nil
		}
		var keys []string
		for _, q := range TaskWaitingIn(t) {
			keys = append(keys, lineKey(t.Namespace, q))
		}
		return keys, nil
	}}); err != nil {
		return nil, fmt.Errorf("adding the waiting-line index: %w", err)
	}
	return &WaitingLine{indexer: sii.GetIndexer()}, nil
}

// In returns the Tasks waiting in queue of namespace, as the cache holds
// them.
func (w *WaitingLine) In(namespace, queue string) ([]*v1alpha1.Task, error) {
	objs, err := w.indexer.ByIndex(waitingLineIndex, lineKey(namespace, queue))
	if err != nil {
		return nil, err
	}
	out := make([]*v1alpha1.Task, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(*v1alpha1.Task); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// lineKey is a queue's key in the index.
func lineKey(namespace, queue string) string { return namespace + "/" + queue }
