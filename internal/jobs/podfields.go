package jobs

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// The Task's bounded copies of pod fields (api/v1alpha1/podfields_types.go)
// have the JSON shape of their core/v1 namesakes, so they convert through
// JSON: a field added to one side and not the other fails
// TestPodFieldsConvertFieldForField, not a user's pod.

// asCore converts a bounded copy to its core/v1 namesake; nil stays nil.
func asCore[Core any, Ours any](in *Ours) *Core {
	if in == nil {
		return nil
	}
	raw, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("jobs: %T does not marshal: %v", in, err))
	}
	out := new(Core)
	if err := json.Unmarshal(raw, out); err != nil {
		panic(fmt.Sprintf("jobs: %T does not have the shape of %T: %v", in, out, err))
	}
	return out
}

func affinity(a *v1alpha1.Affinity) *corev1.Affinity {
	return asCore[corev1.Affinity](a)
}

func tolerations(ts []v1alpha1.Toleration) []corev1.Toleration {
	var out []corev1.Toleration
	for i := range ts {
		out = append(out, *asCore[corev1.Toleration](&ts[i]))
	}
	return out
}

// volumes converts spec.volumes (admission allows only sources the
// restricted Pod Security Standard admits).
func volumes(vs []v1alpha1.Volume) []corev1.Volume {
	var out []corev1.Volume
	for _, v := range vs {
		out = append(out, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
			ConfigMap:             asCore[corev1.ConfigMapVolumeSource](v.ConfigMap),
			Secret:                asCore[corev1.SecretVolumeSource](v.Secret),
			EmptyDir:              asCore[corev1.EmptyDirVolumeSource](v.EmptyDir),
			PersistentVolumeClaim: asCore[corev1.PersistentVolumeClaimVolumeSource](v.PersistentVolumeClaim),
		}})
	}
	return out
}
