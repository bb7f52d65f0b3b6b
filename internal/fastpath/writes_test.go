package fastpath

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
)

func TestOwnWrites(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	task := func(rv string, gen int64, phase v1alpha1.TaskPhase) *v1alpha1.Task {
		return &v1alpha1.Task{
			ObjectMeta: metav1.ObjectMeta{UID: "u1", ResourceVersion: rv, Generation: gen, Annotations: map[string]string{"a": "1"}},
			Status:     v1alpha1.TaskStatus{Phase: phase},
		}
	}
	written := task("20", 1, v1alpha1.PhaseRunning)
	cases := []struct {
		name    string
		record  bool
		at      time.Time
		cached  *v1alpha1.Task
		wantRV  string
		changes func(*v1alpha1.Task)
	}{
		{name: "nothing written: the cached Task", cached: task("10", 1, v1alpha1.PhasePending), wantRV: "10"},
		{name: "a cache behind the write: the written Task", record: true, at: t0, cached: task("10", 1, v1alpha1.PhasePending), wantRV: "20"},
		{name: "a cache that caught up: the cached Task", record: true, at: t0, cached: task("20", 1, v1alpha1.PhaseRunning), wantRV: "20"},
		{name: "a spec edit since: the cached Task", record: true, at: t0, cached: task("30", 2, v1alpha1.PhaseRunning), wantRV: "30"},
		{name: "a new annotation since (run-now): the cached Task", record: true, at: t0, cached: task("30", 1, v1alpha1.PhaseRunning), wantRV: "30",
			changes: func(x *v1alpha1.Task) { x.Annotations["b"] = "2" }},
		{name: "a deletion since: the cached Task", record: true, at: t0, cached: task("30", 1, v1alpha1.PhaseRunning), wantRV: "30",
			changes: func(x *v1alpha1.Task) { x.DeletionTimestamp = &metav1.Time{Time: t0} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var w ownWrites
			if c.record {
				w.record(written, c.at)
			}
			if c.changes != nil {
				c.changes(c.cached)
			}
			if got := w.latest(c.cached); got.ResourceVersion != c.wantRV {
				t.Fatalf("resourceVersion %s, want %s", got.ResourceVersion, c.wantRV)
			}
		})
	}
}

func TestOwnWritesAreForgottenAfterTheTTLAndOnConflict(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	var w ownWrites
	a := &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{UID: "a", ResourceVersion: "2"}}
	b := &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{UID: "b", ResourceVersion: "2"}}
	w.record(a, t0)
	w.record(b, t0.Add(ownWritesTTL+time.Second)) // purges a
	if got := w.latest(&v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{UID: "a", ResourceVersion: "1"}}); got.ResourceVersion != "1" {
		t.Fatalf("a write older than the TTL was used")
	}
	w.forget("b")
	if got := w.latest(&v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{UID: "b", ResourceVersion: "1"}}); got.ResourceVersion != "1" {
		t.Fatalf("a forgotten write was used")
	}
}

func TestAWriteIsForgottenOnceTheCacheShowsIt(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	var w ownWrites
	mine := &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{UID: "a", ResourceVersion: "5"}}
	w.record(mine, t0)
	w.seen(&v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{UID: "a", ResourceVersion: "4"}}) // an older event
	if len(w.m) != 1 {
		t.Fatal("an event older than the write forgot it")
	}
	w.seen(&v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{UID: "a", ResourceVersion: "5"}})
	if len(w.m) != 0 {
		t.Fatal("the write is still remembered after the cache showed it")
	}
}

func TestAWriteTheCacheShowedBeforeItsAnswerIsNotRemembered(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	var w ownWrites
	w.seen(&v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{UID: "a", ResourceVersion: "5"}}) // the watch was first
	w.record(&v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{UID: "a", ResourceVersion: "5"}}, t0)
	if w.m != nil {
		t.Fatal("a write the cache already showed is remembered")
	}
	w.record(&v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{UID: "a", ResourceVersion: "6"}}, t0)
	if len(w.m) != 1 {
		t.Fatal("a later write of the same Task is not remembered")
	}
	for i := range shownVersions { // other Tasks' events push "a"/"5" out of the window
		w.seen(&v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{UID: "b", ResourceVersion: fmt.Sprint(i)}})
	}
	w.forget("a")
	w.record(&v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{UID: "a", ResourceVersion: "5"}}, t0)
	if len(w.m) != 1 {
		t.Fatal("a version shown long ago still keeps a write from being remembered")
	}
}
