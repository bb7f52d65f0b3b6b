package fastpath

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestCreatedJobs(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	job := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-1"}}
	key := types.NamespacedName{Namespace: "ns", Name: "a-1"}
	cases := []struct {
		name string
		do   func(r *createdJobs)
		at   time.Time
		want bool
	}{
		{"a Job never created is not remembered", func(*createdJobs) {}, t0, false},
		{"a created Job is remembered", func(r *createdJobs) { r.add(&job, t0) }, t0.Add(time.Second), true},
		{"a created Job is forgotten once the cache shows it", func(r *createdJobs) { r.add(&job, t0); r.seen([]batchv1.Job{job}) }, t0, false},
		{"a created Job is forgotten after the TTL", func(r *createdJobs) { r.add(&job, t0) }, t0.Add(createdTTL + time.Second), false},
		{"a clock that went backwards forgets it", func(r *createdJobs) { r.add(&job, t0) }, t0.Add(-time.Second), false},
		{"another Job in the cache does not make it forgotten", func(r *createdJobs) {
			r.add(&job, t0)
			r.seen([]batchv1.Job{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b-1"}}})
		}, t0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var r createdJobs
			c.do(&r)
			if got := r.get(key, c.at) != nil; got != c.want {
				t.Fatalf("remembered = %v, want %v", got, c.want)
			}
		})
	}
}
