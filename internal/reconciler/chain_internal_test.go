package reconciler

import (
	"testing"

	"github.com/taskops/task-operator/api/v1alpha1"
)

func TestFinishedChangedWhenARunEndsNotWhenOneStartsOrRuns(t *testing.T) {
	run := func(id string, r v1alpha1.RunResult) v1alpha1.RunRecord {
		return v1alpha1.RunRecord{RunID: id, Result: r}
	}
	ok, running := v1alpha1.RunResultSucceeded, v1alpha1.RunResultRunning
	base := []v1alpha1.RunRecord{run("s2", running), run("s1", ok)}
	cases := []struct {
		name string
		cur  []v1alpha1.RunRecord
		want bool
	}{
		{"the same", []v1alpha1.RunRecord{run("s2", running), run("s1", ok)}, false},
		{"a run started", []v1alpha1.RunRecord{run("s3", running), run("s2", running), run("s1", ok)}, false},
		{"a run ended", []v1alpha1.RunRecord{run("s2", ok), run("s1", ok)}, true},
		{"a run ended failed", []v1alpha1.RunRecord{run("s2", v1alpha1.RunResultFailed), run("s1", ok)}, true},
		{"the oldest pruned", []v1alpha1.RunRecord{run("s2", running)}, true},
	}
	for _, c := range cases {
		if got := finishedChanged(base, c.cur); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
