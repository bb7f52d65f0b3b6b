package fastpath

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/taskops/task-operator/api/v1alpha1"
)

func TestJoinsLine(t *testing.T) {
	q := func(names ...string) v1alpha1.TaskStatus {
		var st v1alpha1.TaskStatus
		for _, n := range names {
			st.Queued = append(st.Queued, v1alpha1.QueuedAttempt{JobName: n})
		}
		return st
	}
	cases := []struct {
		name      string
		old, next v1alpha1.TaskStatus
		want      bool
	}{
		{"a first place in line joins it", q(), q("a"), true},
		{"another attempt put in line joins it", q("a"), q("a", "b"), true},
		{"the same places are no new place", q("a", "b"), q("b", "a"), false},
		{"leaving the line is no new place", q("a", "b"), q("a"), false},
		{"an admitted attempt replaced by the next one joins it", q("a"), q("b"), true},
		{"no line at all", q(), q(), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := JoinsLine(&c.old, &c.next); got != c.want {
				t.Errorf("JoinsLine = %v, want %v", got, c.want)
			}
		})
	}
}

func key(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }

// woken returns the Tasks woken so far, in order.
func woken(s *Shortcuts) []string {
	var out []string
	for {
		select {
		case ev := <-s.lineBound.wake:
			out = append(out, ev.Object.Name)
		default:
			return out
		}
	}
}

// takeEveryPlace takes the LineWrites places of queue for Tasks named
// from first on ('a', 'b', ...) and returns their releases.
func takeEveryPlace(t *testing.T, s *Shortcuts, queue string, first rune) []func() {
	t.Helper()
	var releases []func()
	for i := range LineWrites {
		release, ok := s.TakeLineWrite(key(string(first+rune(i))), queue)
		if !ok {
			t.Fatalf("place %d of %d of queue %s refused", i+1, LineWrites, queue)
		}
		releases = append(releases, release)
	}
	return releases
}

// At most LineWrites line writes are in flight; the Tasks refused a place
// wait in order, and each release wakes the next of them, never a Task
// that got its place another way.
func TestLineWritesAreBoundedAndWaitInOrder(t *testing.T) {
	s := New(true)
	releases := takeEveryPlace(t, s, "q", 'a')
	for _, name := range []string{"x", "y", "z", "x"} {
		if _, ok := s.TakeLineWrite(key(name), "q"); ok {
			t.Fatalf("%s got a place past the %d in flight", name, LineWrites)
		}
	}
	if got := woken(s); got != nil {
		t.Fatalf("woken with every place taken: %v", got)
	}

	releases[0]()
	if got := woken(s); len(got) != 1 || got[0] != "x" {
		t.Fatalf("a release woke %v, want [x] (the head of the line, once)", got)
	}
	// y gets a place on a pass of its own before its turn: when its turn
	// comes it is skipped, and z is woken.
	release, ok := s.TakeLineWrite(key("y"), "q")
	if !ok {
		t.Fatal("y refused with a place free")
	}
	releases[0] = release
	if _, ok := s.TakeLineWrite(key("x"), "q"); ok {
		t.Fatal("x got a place that y had taken")
	}
	releases[1]()
	if got := woken(s); len(got) != 1 || got[0] != "z" {
		t.Fatalf("a release woke %v, want [z] (y has its place, x is behind z now)", got)
	}
}

// A woken Task whose pass needs no place any more (written another way,
// deleted) passes its wake-up on, so the Tasks behind it are not
// stranded; a Task that was not woken passes nothing on.
func TestAWokenTaskThatTakesNoPlacePassesItsWakeUpOn(t *testing.T) {
	s := New(true)
	releases := takeEveryPlace(t, s, "q", 'a')
	s.TakeLineWrite(key("x"), "q")
	s.TakeLineWrite(key("y"), "q")
	releases[0]()
	if got := woken(s); len(got) != 1 || got[0] != "x" {
		t.Fatalf("woke %v, want [x]", got)
	}
	s.LinePassEnded(key("a")) // never woken: nothing to pass on
	if got := woken(s); got != nil {
		t.Fatalf("a pass of a Task that was not woken woke %v", got)
	}
	s.LinePassEnded(key("x")) // x's pass wrote nothing
	if got := woken(s); len(got) != 1 || got[0] != "y" {
		t.Fatalf("x's pass, ended without a place, woke %v, want [y]", got)
	}
}

// Each queue has its own places and its own line: a queue whose places
// are all taken holds back none of another queue's writes, and a release
// wakes a Task of its own queue only.
func TestEachQueueHasItsOwnLineWrites(t *testing.T) {
	s := New(true)
	flood := takeEveryPlace(t, s, "flood", 'a')
	if _, ok := s.TakeLineWrite(key("x"), "flood"); ok {
		t.Fatal("x got a place past the flood queue's")
	}
	other := takeEveryPlace(t, s, "other", 'k') // none refused behind the flood queue's
	if _, ok := s.TakeLineWrite(key("y"), "other"); ok {
		t.Fatal("y got a place past the other queue's")
	}
	other[0]()
	if got := woken(s); len(got) != 1 || got[0] != "y" {
		t.Fatalf("a release of the other queue woke %v, want [y] (its own line's head)", got)
	}
	flood[0]()
	if got := woken(s); len(got) != 1 || got[0] != "x" {
		t.Fatalf("a release of the flood queue woke %v, want [x]", got)
	}
	// Every place given back and no one waiting: nothing is kept.
	for _, release := range append(flood[1:], other[1:]...) {
		release()
	}
	s.LinePassEnded(key("x"))
	s.LinePassEnded(key("y"))
	for task, queue := range map[string]string{"x": "flood", "y": "other"} {
		if release, ok := s.TakeLineWrite(key(task), queue); ok {
			release()
		}
	}
	if n := len(s.lineBound.queues); n != 0 {
		t.Errorf("%d queues kept with nothing in flight or waiting", n)
	}
}

// Without shortcuts every write goes and nothing is woken.
func TestLineWritesOff(t *testing.T) {
	var s *Shortcuts
	for range 2 * LineWrites {
		if _, ok := s.TakeLineWrite(key("a"), "q"); !ok {
			t.Fatal("a write refused with the shortcuts off")
		}
	}
	s.LinePassEnded(key("a"))
}
