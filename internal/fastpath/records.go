package fastpath

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// queueRecords is each TaskQueue's admission record as this process last
// wrote it, for both controllers:
//
//   - A Task pass the queue controller wakes right after admitting its
//     attempt must see the admission although the cache may not show the
//     write yet (admitted). It only adds what was really admitted (the
//     write succeeded), so it can never start an attempt the queue did not
//     admit.
//   - The queue's next pass starts from the queue as that write left it
//     while the cache is only behind it (latest). Otherwise a place that
//     frees right after an admission is decided on the cached record, and
//     its write, locked on a version already replaced, is refused (409, or
//     422 for a patch applied to the newer list), read again and retried
//     once the cache catches up, delaying the admissions it carried
//     (how often: docs/performance-history.md, "Queue records and events").
type queueRecords struct {
	mu sync.Mutex
	m  map[types.NamespacedName]queueRecord
}

// queueRecord is one write: the queue's UID (a queue deleted and created
// again starts a record of its own), the Job names it listed, and the
// queue as the write returned it (nil once a write was refused: the cache
// is then the better start).
type queueRecord struct {
	uid      types.UID
	admitted []string
	written  *v1alpha1.TaskQueue
}

func (q *queueRecords) store(tq *v1alpha1.TaskQueue) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.m == nil {
		q.m = map[types.NamespacedName]queueRecord{}
	}
	written := tq.DeepCopy()
	q.m[client.ObjectKeyFromObject(tq)] = queueRecord{uid: tq.UID, admitted: written.Status.Admitted, written: written}
}

// latest is the queue a pass starts from: the cached one, or a copy of the
// one this process's last write returned while the cache is only behind
// it. The cache counts as behind when the spec (generation) and deletion
// are the same in both and the versions differ; then the only difference
// can be the record this process wrote. Should the cache in fact be ahead
// (another replica wrote since), the pass's write, locked on the older
// version, is refused and forget makes the next pass use the cache.
func (q *queueRecords) latest(cached *v1alpha1.TaskQueue) *v1alpha1.TaskQueue {
	q.mu.Lock()
	defer q.mu.Unlock()
	mine := q.m[client.ObjectKeyFromObject(cached)].written
	switch {
	case mine == nil || mine.UID != cached.UID:
		return cached
	case mine.ResourceVersion == cached.ResourceVersion:
		// The cache caught up: from now on it is never behind this write
		// (kept, a later version by another writer would look older).
		q.dropWritten(cached)
		return cached
	case mine.Generation != cached.Generation || !mine.DeletionTimestamp.Equal(cached.DeletionTimestamp):
		return cached // changed since: the cache is newer
	}
	return mine.DeepCopy()
}

// forget makes the next pass of tq's queue start from the cache (its last
// write was refused); the admitted names stay, as they were written.
func (q *queueRecords) forget(tq *v1alpha1.TaskQueue) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dropWritten(tq)
}

// dropWritten forgets the written copy of tq's queue (not the admitted
// names); q.mu is held.
func (q *queueRecords) dropWritten(tq *v1alpha1.TaskQueue) {
	key := client.ObjectKeyFromObject(tq)
	if rec, ok := q.m[key]; ok && rec.uid == tq.UID {
		rec.written = nil
		q.m[key] = rec
	}
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
