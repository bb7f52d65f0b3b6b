package scheduler

import (
	"testing"

	"github.com/taskops/task-operator/api/v1alpha1"
)

func TestBesideActive(t *testing.T) {
	for _, c := range []struct {
		name   string
		policy v1alpha1.ConcurrencyPolicy
		active []string
		want   concurrency
	}{
		{"nothing active starts the run whatever the policy", v1alpha1.ForbidConcurrent, nil, startAlone},
		{"Forbid waits for the active run", v1alpha1.ForbidConcurrent, []string{"s1"}, waitForActive},
		{"no policy is Forbid", "", []string{"s1"}, waitForActive},
		{"Replace replaces the active runs", v1alpha1.ReplaceConcurrent, []string{"s1", "m2"}, replaceActive},
		{"Allow starts beside them", v1alpha1.AllowConcurrent, []string{"s1"}, startBeside},
	} {
		task := &v1alpha1.Task{Spec: v1alpha1.TaskSpec{ConcurrencyPolicy: c.policy}}
		if got := besideActive(task, c.active); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}
}
