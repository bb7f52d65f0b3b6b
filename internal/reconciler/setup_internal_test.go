package reconciler

import (
	"context"
	"reflect"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
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
		"suspended":                     {func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }, true},
		"completions":                   {func(j *batchv1.Job) { j.Spec.Completions = ptr.To[int32](2) }, true},
		"managed by another controller": {func(j *batchv1.Job) { j.Spec.ManagedBy = ptr.To("kueue.x-k8s.io/multikueue") }, true},
		"a label":                       {func(j *batchv1.Job) { j.Labels = map[string]string{"batch.taskops.io/run": "r1"} }, true},
		"the pod template (the cache keeps none)": {func(j *batchv1.Job) { j.Spec.Template.Spec.NodeName = "n1" }, false},
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

// A Job event goes to the Task that controls the Job, in the Job's
// namespace, whatever version of the group its owner reference names;
// to nobody for a Job no Task controls.
func TestAJobEventGoesToTheTaskThatControlsIt(t *testing.T) {
	ref := func(apiVersion, kind string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "report", UID: "u1", Controller: ptr.To(controller)}
	}
	cases := map[string]struct {
		refs []metav1.OwnerReference
		want []reconcile.Request
	}{
		"its controlling Task":                       {[]metav1.OwnerReference{ref("batch.taskops.io/v1alpha1", "Task", true)}, []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "etl", Name: "report"}}}},
		"another version of the Task group":          {[]metav1.OwnerReference{ref("batch.taskops.io/v1", "Task", true)}, []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: "etl", Name: "report"}}}},
		"a Task that owns it without controlling it": {[]metav1.OwnerReference{ref("batch.taskops.io/v1alpha1", "Task", false)}, nil},
		"a controller of another group":              {[]metav1.OwnerReference{ref("batch/v1", "CronJob", true)}, nil},
		"a Task kind of another group":               {[]metav1.OwnerReference{ref("example.com/v1", "Task", true)}, nil},
		"no owner":                                   {nil, nil},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "etl", Name: "report-1", OwnerReferences: c.refs}}
			if got := controllingTask(context.Background(), job); !reflect.DeepEqual(got, c.want) {
				t.Errorf("controllingTask = %v, want %v", got, c.want)
			}
		})
	}
}
