package fastpath

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
)

func TestLatestRecord(t *testing.T) {
	queue := func(rv string, gen int64, admitted ...string) *v1alpha1.TaskQueue {
		return &v1alpha1.TaskQueue{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "team", UID: "q1", ResourceVersion: rv, Generation: gen},
			Status:     v1alpha1.TaskQueueStatus{Admitted: admitted},
		}
	}
	cases := []struct {
		name   string
		write  bool // this process wrote version 20, admitting a and b
		forget bool // ... and a later write was refused
		cached *v1alpha1.TaskQueue
		wantRV string
	}{
		{name: "nothing written: the cached queue", cached: queue("10", 1, "a"), wantRV: "10"},
		{name: "a cache behind the write: the written queue", write: true, cached: queue("10", 1, "a"), wantRV: "20"},
		{name: "a cache that caught up: the cached queue", write: true, cached: queue("20", 1, "a", "b"), wantRV: "20"},
		{name: "a spec edit since: the cached queue", write: true, cached: queue("30", 2, "a", "b"), wantRV: "30"},
		{name: "a refused write since: the cached queue", write: true, forget: true, cached: queue("10", 1, "a"), wantRV: "10"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(true)
			if c.write {
				s.RememberRecord(queue("20", 1, "a", "b"))
			}
			if c.forget {
				s.ForgetRecord(c.cached)
			}
			got := s.LatestRecord(c.cached)
			if got.ResourceVersion != c.wantRV {
				t.Fatalf("started from version %s, want %s", got.ResourceVersion, c.wantRV)
			}
		})
	}

	t.Run("a copy each time, which a pass may change", func(t *testing.T) {
		s := New(true)
		s.RememberRecord(queue("20", 1, "a", "b"))
		got := s.LatestRecord(queue("10", 1, "a"))
		got.Status.Admitted[0] = "changed"
		if again := s.LatestRecord(queue("10", 1, "a")); again.Status.Admitted[0] != "a" {
			t.Fatalf("the remembered record changed with a pass's copy: %v", again.Status.Admitted)
		}
	})
	t.Run("once the cache caught up, a later version is the cache's", func(t *testing.T) {
		s := New(true)
		s.RememberRecord(queue("20", 1, "a", "b"))
		s.LatestRecord(queue("20", 1, "a", "b"))
		// Another writer's version: newer than this process's write,
		// although nothing but the version tells.
		if got := s.LatestRecord(queue("30", 1, "c")); got.ResourceVersion != "30" {
			t.Fatalf("started from version %s after the cache caught up, want the cache's 30", got.ResourceVersion)
		}
	})
	t.Run("a deletion since: the cached queue", func(t *testing.T) {
		s := New(true)
		s.RememberRecord(queue("20", 1, "a", "b"))
		cached := queue("30", 1, "a", "b")
		cached.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		if got := s.LatestRecord(cached); got.ResourceVersion != "30" {
			t.Fatalf("started from version %s, want the deleted cache's 30", got.ResourceVersion)
		}
	})
	t.Run("the refused write's admissions still count for the Task passes", func(t *testing.T) {
		s := New(true)
		s.RememberRecord(queue("20", 1, "a", "b"))
		s.ForgetRecord(queue("20", 1))
		if got := s.Admitted(queue("10", 1, "a")); len(got) != 2 {
			t.Fatalf("admitted %v, want a and b", got)
		}
	})
	t.Run("off: the cached queue", func(t *testing.T) {
		var s *Shortcuts
		s.RememberRecord(queue("20", 1, "a", "b"))
		if got := s.LatestRecord(queue("10", 1, "a")); got.ResourceVersion != "10" {
			t.Fatalf("started from version %s with the shortcuts off", got.ResourceVersion)
		}
	})
}
