package reconciler

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// A Job update brings a Task pass only when it changes what the pass
// reads of the Job; the Job controller's bookkeeping writes do not.
func TestOnlyJobUpdatesThatChangeWhatAPassReadsBringOne(t *testing.T) {
	old := &batchv1.Job{}
	old.Name, old.ResourceVersion = "build-1", "10"
	old.Spec.Completions = ptr.To[int32](1)
	old.Status.Active, old.Status.Ready = 1, ptr.To[int32](1)
	cases := map[string]struct {
		change func(*batchv1.Job)
		want   bool
	}{
		"a pod's end counted as uncounted first (Job controller bookkeeping)": {func(j *batchv1.Job) {
			j.Status.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{Succeeded: []types.UID{"p1"}}
		}, false},
		"a condition no pass reads": {func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue}}
		}, false},
		"a foreign annotation":         {func(j *batchv1.Job) { j.Annotations = map[string]string{"example.com/x": "y"} }, false},
		"the pod counted as succeeded": {func(j *batchv1.Job) { j.Status.Active, j.Status.Succeeded = 0, 1 }, true},
		"the Job completes": {func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		}, true},
		"suspended": {func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }, true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			n := old.DeepCopy()
			n.ResourceVersion = "11"
			c.change(n)
			if got := jobChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: n}); got != c.want {
				t.Errorf("a pass: %v, want %v", got, c.want)
			}
		})
	}
}
