package jobs

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/randfill"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// Every field of the Task's bounded copies reaches the pod: a random value
// of each, converted, marshals to the same JSON as before, so a field that
// core/v1 spells differently (or lacks) fails here.
func TestPodFieldsConvertFieldForField(t *testing.T) {
	fill := randfill.New().NilChance(0).NumElements(1, 3).Funcs(
		// A Quantity's random fill is not a canonical quantity.
		func(q *v1alpha1.EmptyDirVolumeSource, c randfill.Continue) {
			c.Fill(&q.Medium)
		},
		// Admission refuses empty required strings, which core/v1 omits.
		func(s *string, c randfill.Continue) { *s = "v" + c.String(8) },
	)
	same := func(what string, ours, core any) {
		t.Helper()
		a, _ := json.Marshal(ours)
		b, _ := json.Marshal(core)
		var x, y any
		_ = json.Unmarshal(a, &x)
		_ = json.Unmarshal(b, &y)
		if d := cmp.Diff(x, y); d != "" {
			t.Errorf("%s changed on its way to the pod (-ours +core/v1):\n%s", what, d)
		}
	}
	for range 20 {
		var a v1alpha1.Affinity
		fill.Fill(&a)
		same("affinity", a, affinity(&a))

		var ts []v1alpha1.Toleration
		fill.Fill(&ts)
		same("tolerations", ts, tolerations(ts))

		var v v1alpha1.Volume
		fill.Fill(&v)
		got := volumes([]v1alpha1.Volume{v})[0]
		same("configMap", v.ConfigMap, got.ConfigMap)
		same("secret", v.Secret, got.Secret)
		same("emptyDir", v.EmptyDir, got.EmptyDir)
		same("persistentVolumeClaim", v.PersistentVolumeClaim, got.PersistentVolumeClaim)
	}
	if affinity(nil) != nil || tolerations(nil) != nil {
		t.Error("an unset field must stay unset")
	}
}
