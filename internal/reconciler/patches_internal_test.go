package reconciler

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// The patches built from what changes say exactly what
// MergeFromWithOptimisticLock says after diffing two whole Tasks.
func TestTheTaskPatchesEqualTheWholeObjectDiffs(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	later := metav1.NewTime(at.Add(time.Minute))
	task := &v1alpha1.Task{
		ObjectMeta: metav1.ObjectMeta{
			Name: "build", Namespace: "ci", ResourceVersion: "4711", Generation: 2,
			Annotations:   map[string]string{"example.com/owner": "team-a"},
			Finalizers:    []string{"example.com/other"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: v1alpha1.TaskSpec{Type: v1alpha1.TaskTypeShell, Shell: "make test"},
	}
	running := v1alpha1.TaskStatus{
		Phase: v1alpha1.TaskPhase("Running"), Attempts: 1, CurrentRun: "0", LastJobName: "build-1", StartTime: &at,
		Active:     []corev1.ObjectReference{{Kind: "Job", Name: "build-1"}},
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Running", LastTransitionTime: at}},
	}
	succeeded := running
	succeeded.Phase, succeeded.Active, succeeded.CompletionTime = v1alpha1.TaskPhase("Succeeded"), nil, &later
	succeeded.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Succeeded", LastTransitionTime: later}}

	wholeDiff := func(base, changed *v1alpha1.Task) []byte {
		t.Helper()
		b, err := ctrl.MergeFromWithOptions(base, ctrl.MergeFromWithOptimisticLock{}).Data(changed)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	same := func(name string, got ctrl.Patch, err error, want []byte, changed *v1alpha1.Task) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := got.Data(changed)
		if err != nil {
			t.Fatal(err)
		}
		var g, w any
		if err := json.Unmarshal(b, &g); err != nil {
			t.Fatalf("%s: %s: %v", name, b, err)
		}
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(w, g); d != "" {
			t.Errorf("%s: the patch differs from the whole-object diff (-want +got):\n%s", name, d)
		}
	}

	for name, c := range map[string]struct{ from, to v1alpha1.TaskStatus }{
		"the first record":                               {v1alpha1.TaskStatus{}, running},
		"a finish (a list emptied, fields set)":          {running, succeeded},
		"a re-run (fields removed, a list filled again)": {succeeded, running},
	} {
		base := task.DeepCopy()
		base.Status = c.from
		changed := task.DeepCopy()
		changed.Status = c.to
		p, err := StatusPatch(changed, &c.from)
		same("status, "+name, p, err, wholeDiff(base, changed), changed)
	}

	for name, fins := range map[string][]string{
		"ours added":           {"example.com/other", v1alpha1.Finalizer},
		"the last one removed": nil,
	} {
		base := task.DeepCopy()
		changed := task.DeepCopy()
		changed.Finalizers = fins
		p, err := finalizersPatch(changed)
		same("finalizers, "+name, p, err, wholeDiff(base, changed), changed)
	}
}
