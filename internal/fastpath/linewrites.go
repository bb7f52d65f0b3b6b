package fastpath

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// LineWrites is how many status writes that put a Task in one queue's
// line may be in flight at once.
//
// Why: when many Tasks join a line at once (a thousand created into one
// queue), each one's first pass writes its place in line, and every worker
// sends one. On an API server that is the machine's bottleneck each
// request's time grows with the requests in flight, so the queue's record
// write and the admitted Tasks' Job creates, which decide how soon a freed
// place is used, slow down with them. Those writes only make the line
// longer: a line that holds the next few hundred Tasks admits exactly as
// it would with the rest still on their way. A pass that finds every place
// taken does not wait for one (a waiting worker is one the Job creates
// lack): it ends without writing, its Task waits in the bound's own line,
// and the place's release wakes the Task at the head (LineWakes, at
// LineWakePriority: priority.go says why). A later write does not move
// a Task back in the queue's line: the place it records is the attempt's
// own (status.queued's since: when it became ready, for a new Task its
// creation), not the write's.
//
// The bound is per queue: a flood into one queue must not hold back the
// Tasks of another, whose line writes may be all that stands between them
// and free places (docs/performance-history.md, "One bound per queue").
const LineWrites = 4

// lineBound holds, per queue, the places of LineWrites and the Tasks
// waiting for one, in order. woken are the Tasks woken for a released
// place whose pass has not come yet, with their queue: a pass of one of
// them that writes no line write passes the wake-up on (LinePassEnded),
// so a Task that no longer waits (written by another pass, deleted) never
// strands the others.
type lineBound struct {
	mu     sync.Mutex
	queues map[types.NamespacedName]*queueLine
	woken  map[types.NamespacedName]types.NamespacedName
	wake   chan event.TypedGenericEvent[*v1alpha1.Task]
}

// queueLine is one queue's part of the bound. A queue with no write in
// flight and no Task waiting has none.
type queueLine struct {
	held int
	// waiting is the bound's line in order; inLine says who is in it (a
	// Task that got a place another way is taken out of inLine only, and
	// skipped when its turn comes).
	waiting []types.NamespacedName
	inLine  map[types.NamespacedName]bool
}

func newLineBound() lineBound {
	return lineBound{
		queues: map[types.NamespacedName]*queueLine{}, woken: map[types.NamespacedName]types.NamespacedName{},
		wake: make(chan event.TypedGenericEvent[*v1alpha1.Task], wakeBuffer),
	}
}

// JoinsLine reports whether a status write from old to next puts an
// attempt in its queue's line: one it lists as queued that old did not.
func JoinsLine(old, next *v1alpha1.TaskStatus) bool {
	for _, q := range next.Queued {
		if !slices.ContainsFunc(old.Queued, func(o v1alpha1.QueuedAttempt) bool { return o.JobName == q.JobName }) {
			return true
		}
	}
	return false
}

// TakeLineWrite takes one of the LineWrites places of the Task's queue
// (queue, in the Task's namespace) for its line write and returns its
// release, to be called once the write is answered; or, with every place
// taken, puts the Task in the bound's line of that queue and returns
// false: the pass ends without the write, and a place's release brings
// the Task's next pass. Without shortcuts every write goes.
func (s *Shortcuts) TakeLineWrite(key types.NamespacedName, queue string) (release func(), ok bool) {
	if s == nil {
		return func() {}, true
	}
	qk := types.NamespacedName{Namespace: key.Namespace, Name: queue}
	b := &s.lineBound
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.woken, key)
	ql := b.queues[qk]
	if ql == nil {
		ql = &queueLine{inLine: map[types.NamespacedName]bool{}}
		b.queues[qk] = ql
	}
	if ql.held < LineWrites {
		ql.held++
		delete(ql.inLine, key)
		return func() { s.releaseLineWrite(qk) }, true
	}
	if !ql.inLine[key] {
		ql.inLine[key] = true
		ql.waiting = append(ql.waiting, key)
	}
	return nil, false
}

// releaseLineWrite gives a place of queue qk back and wakes the Task at
// the head of its line.
func (s *Shortcuts) releaseLineWrite(qk types.NamespacedName) {
	b := &s.lineBound
	b.mu.Lock()
	b.queues[qk].held--
	b.mu.Unlock()
	s.wakeNextInLine(qk)
}

// LinePassEnded is called at the end of every pass of a Task: if the Task
// was woken for a free place and its pass took none (it no longer needed
// one), the next Task in its queue's line is woken instead.
func (s *Shortcuts) LinePassEnded(key types.NamespacedName) {
	if s == nil {
		return
	}
	b := &s.lineBound
	b.mu.Lock()
	qk, passOn := b.woken[key]
	delete(b.woken, key)
	b.mu.Unlock()
	if passOn {
		s.wakeNextInLine(qk)
	}
}

// wakeNextInLine wakes the Task at the head of queue qk's line while a
// place is free, and forgets a queue left with nothing in flight or
// waiting. The wake-up is never dropped: with the buffer full it is sent
// from a goroutine of its own.
func (s *Shortcuts) wakeNextInLine(qk types.NamespacedName) {
	b := &s.lineBound
	b.mu.Lock()
	ql := b.queues[qk]
	if ql == nil {
		b.mu.Unlock()
		return
	}
	var key types.NamespacedName
	found := false
	for ql.held < LineWrites && len(ql.waiting) > 0 && !found {
		key, ql.waiting = ql.waiting[0], ql.waiting[1:]
		found = ql.inLine[key]
	}
	if !found {
		// The loop stopped on a full bound or an empty line: with nothing
		// in flight the line is empty too, and the queue is forgotten.
		if ql.held == 0 {
			delete(b.queues, qk)
		}
		b.mu.Unlock()
		return
	}
	delete(ql.inLine, key)
	b.woken[key] = qk
	b.mu.Unlock()
	t := &v1alpha1.Task{}
	t.Namespace, t.Name = key.Namespace, key.Name
	ev := event.TypedGenericEvent[*v1alpha1.Task]{Object: t}
	select {
	case b.wake <- ev:
	default:
		go func() { b.wake <- ev }()
	}
}

// LineWakes is the source of the bound's wake-ups, at LineWakePriority,
// for the Task controller's builder.
func (s *Shortcuts) LineWakes() source.Source {
	return source.Channel(s.lineBound.wake, LineWakeHandler)
}
