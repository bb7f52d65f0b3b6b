package waitline

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/admission"
	"github.com/taskops/task-operator/internal/testutil"
)

var t0 = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)

// waiting is a Task of queue q waiting for one attempt per run id, each
// since t0 plus its index in seconds.
func waiting(name, q string, prio int32, runIDs ...string) *v1alpha1.Task {
	t := &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	t.Spec.QueueName, t.Spec.Priority = q, prio
	for i, id := range runIDs {
		t.Status.Queued = append(t.Status.Queued, v1alpha1.QueuedAttempt{RunID: id, JobName: name + "-" + id, Since: metav1.NewMicroTime(t0.Add(time.Duration(i) * time.Second))})
	}
	return t
}

func inOrder(l admission.Line) []string {
	var out []string
	if l.InOrder != nil {
		for w := range l.InOrder {
			out = append(out, w.JobName)
		}
	}
	return out
}

// A queue's line is its Tasks' waiting attempts in admission order,
// higher priority first; Put replaces what a Task waited for, in whatever
// queue; Remove forgets it.
func TestTheLineIsInAdmissionOrderAndFollowsEachTask(t *testing.T) {
	l := New()
	l.Put(waiting("a", "q", 0, "0"))
	l.Put(waiting("b", "q", 5, "0"))
	l.Put(waiting("c", "q", 0, "s1", "s2"))
	l.Put(waiting("x", "other", 9, "0"))
	l.Put(&v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "idle"}})
	line := l.Line("ns", "q", []string{"a-0", "x-0", "nope"})
	if got, want := inOrder(line), []string{"b-0", "a-0", "c-s1", "c-s2"}; !slices.Equal(got, want) {
		t.Fatalf("line %v, want %v", got, want)
	}
	if line.Len != 4 || !line.Has("a-0") || line.Has("x-0") || line.Has("nope") {
		t.Fatalf("len %d, has a-0 %v x-0 %v nope %v", line.Len, line.Has("a-0"), line.Has("x-0"), line.Has("nope"))
	}

	// b moves to the other queue; c's first attempt was admitted and
	// started; a is deleted.
	l.Put(waiting("b", "other", 5, "0"))
	l.Put(waiting("c", "q", 0, "s2"))
	l.Remove("ns", "a")
	if got := inOrder(l.Line("ns", "q", nil)); !slices.Equal(got, []string{"c-s2"}) {
		t.Fatalf("after the moves, q's line %v, want [c-s2]", got)
	}
	if got := inOrder(l.Line("ns", "other", nil)); !slices.Equal(got, []string{"x-0", "b-0"}) {
		t.Fatalf("other's line %v, want [x-0 b-0]", got)
	}
	// A priority change reorders.
	l.Put(waiting("c", "other", 10, "s2"))
	if got := inOrder(l.Line("ns", "other", nil)); !slices.Equal(got, []string{"c-s2", "x-0", "b-0"}) {
		t.Fatalf("other's line %v, want c first", got)
	}
	if line := l.Line("ns", "q", nil); line.Len != 0 || inOrder(line) != nil {
		t.Fatalf("q is empty, yet %d waiting", line.Len)
	}
}

// A Task being deleted waits for nothing; a suspended Task waits only
// for its run-now runs (it keeps its place in line for them).
func TestADeletedTaskWaitsForNothingAndASuspendedOneOnlyForItsRunNowRuns(t *testing.T) {
	l := New()
	suspended := waiting("s", "q", 0, "s100", "m1a2b")
	suspended.Spec.Suspend = ptr.To(true)
	deleting := waiting("d", "q", 0, "0")
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	l.Put(suspended)
	l.Put(deleting)
	if got := inOrder(l.Line("ns", "q", nil)); !slices.Equal(got, []string{"s-m1a2b"}) {
		t.Fatalf("line %v, want the suspended Task's run-now run only", got)
	}
}

// A pass decides from the line as it was when it took it: changes made
// meanwhile show in the next pass only.
func TestALineTakenIsNotChangedByLaterEvents(t *testing.T) {
	l := New()
	for i := range 200 {
		l.Put(waiting(fmt.Sprintf("t%03d", i), "q", 0, "0"))
	}
	taken := l.Line("ns", "q", nil)
	for i := range 100 {
		l.Remove("ns", fmt.Sprintf("t%03d", i))
	}
	l.Put(waiting("first", "q", 100, "0"))
	got := inOrder(taken)
	if taken.Len != 200 || len(got) != 200 || got[0] != "t000-0" {
		t.Fatalf("the line taken: len %d, %d in order, first %s; want the 200 it had", taken.Len, len(got), got[0])
	}
	if now := l.Line("ns", "q", nil); now.Len != 101 || inOrder(now)[0] != "first-0" {
		t.Fatalf("the line now: len %d, first %s", now.Len, inOrder(now)[0])
	}
}

// The informer handler puts and removes Tasks, tombstones included; a nil
// Lines ignores everything.
func TestTheHandlerFollowsAnInformer(t *testing.T) {
	l := New()
	h := l.Handler()
	a := waiting("a", "q", 0, "0")
	h.OnAdd(a, true)
	b := waiting("b", "q", 0, "0")
	h.OnAdd(b, false)
	h.OnUpdate(a, waiting("a", "q", 0))
	h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "ns/b", Obj: b})
	if line := l.Line("ns", "q", nil); line.Len != 0 {
		t.Fatalf("line %v, want empty", inOrder(line))
	}
	var none *Lines
	none.Put(a)
	none.Remove("ns", "a")
	if line := none.Line("ns", "q", []string{"a-0"}); line.Len != 0 || line.Has("a-0") {
		t.Fatal("a nil Lines holds something")
	}
}

// BenchmarkLine measures taking a queue's line and reading the head a pass
// of maxRunning 100 reads, with 100 and 10,000 attempts waiting, and
// reports the second as a multiple of the first.
func BenchmarkLine(b *testing.B) {
	lines := func(n int) *Lines {
		l := New()
		for i := range n {
			l.Put(waiting(fmt.Sprintf("t%05d", i), "q", int32(i%3), "0"))
		}
		return l
	}
	small, large := lines(100), lines(10000)
	head := func(l *Lines) {
		line := l.Line("ns", "q", nil)
		n := 0
		for range line.InOrder {
			if n++; n == 100 {
				break
			}
		}
	}
	testutil.BenchmarkRatio(b, "ns/line-100", func() { head(small) }, "ns/line-10k", func() { head(large) })
}
