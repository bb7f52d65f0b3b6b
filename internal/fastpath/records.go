package fastpath

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// queueRecords is each TaskQueue's admission record as this process last
// wrote it. A Task pass the queue controller wakes right after admitting
// its attempt must see the admission although the cache may not show the
// write yet. It only adds what was really admitted (the write succeeded),
// so it can never start an attempt the queue did not admit.
type queueRecords struct {
	mu sync.Mutex
	m  map[types.NamespacedName]queueRecord
}

// queueRecord is one write: the queue's UID (a queue deleted and created
// again starts a record of its own) and the Job names it listed.
type queueRecord struct {
	uid      types.UID
	admitted []string
}

func (q *queueRecords) store(tq *v1alpha1.TaskQueue) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.m == nil {
		q.m = map[types.NamespacedName]queueRecord{}
	}
	q.m[client.ObjectKeyFromObject(tq)] = queueRecord{uid: tq.UID, admitted: tq.Status.Admitted}
}

// admitted is the union of the cached record and the one this process last
// wrote, sorted. An entry only the older of the two still lists was
// released: its Job finished or no Task waits for it, so no pass asks to
// start it again.
func (q *queueRecords) admitted(tq *v1alpha1.TaskQueue) []string {
	cached := tq.Status.Admitted
	q.mu.Lock()
	mine := q.m[client.ObjectKeyFromObject(tq)]
	q.mu.Unlock()
	if mine.uid != tq.UID || len(mine.admitted) == 0 {
		return cached
	}
	out := append(slices.Clone(cached), mine.admitted...)
	slices.Sort(out)
	return slices.Compact(out)
}
