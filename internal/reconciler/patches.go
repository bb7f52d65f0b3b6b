package reconciler

import (
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// The Task's two patches, built from what they change. Both are JSON merge
// patches (RFC 7386) locked to the resourceVersion read, exactly what
// controller-runtime's MergeFromWithOptimisticLock sends for the same
// change; it gets there by serializing two whole Tasks (managed fields,
// spec and annotations included) and diffing them, on every status write.
// patches_internal_test.go compares the two.

// lockedPatch is the body of both: metadata.resourceVersion, plus the
// finalizers or the status diff.
type lockedPatch struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
		// Finalizers, when set, replaces the whole list (a nil list is
		// null: none left).
		Finalizers *[]string `json:"finalizers,omitempty"`
	} `json:"metadata"`
	Status json.RawMessage `json:"status,omitempty"`
}

func (p *lockedPatch) patch() (ctrl.Patch, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	return ctrl.RawPatch(types.MergePatchType, body), nil
}

// StatusPatch turns status old into task.Status: a merge patch of the
// status alone, locked to task's resource version (the benchmark's floor
// sends it too).
func StatusPatch(task *v1alpha1.Task, old *v1alpha1.TaskStatus) (ctrl.Patch, error) {
	from, err := json.Marshal(old)
	if err != nil {
		return nil, err
	}
	to, err := json.Marshal(&task.Status)
	if err != nil {
		return nil, err
	}
	p := &lockedPatch{}
	if p.Status, err = jsonpatch.CreateMergePatch(from, to); err != nil {
		return nil, fmt.Errorf("diffing the status: %w", err)
	}
	p.Metadata.ResourceVersion = task.ResourceVersion
	return p.patch()
}

// finalizersPatch sets the Task's finalizers to the list it holds (a merge
// patch replaces a list whole: the lock keeps another controller's
// finalizer, added since the read, from being lost).
func finalizersPatch(task *v1alpha1.Task) (ctrl.Patch, error) {
	p := &lockedPatch{}
	p.Metadata.ResourceVersion, p.Metadata.Finalizers = task.ResourceVersion, &task.Finalizers
	return p.patch()
}

// WrittenTask is what a status write of task reads back: its metadata
// alone (the metadata client asks for a PartialObjectMetadata, in
// protobuf). Under the resource-version lock the stored Task is the one
// read with the status sent (no defaults in the status schema; timestamps
// in whole seconds, status.Time), so its new resource version is all that
// is news; decoding the whole Task back was a third of a write's CPU.
func WrittenTask(task *v1alpha1.Task) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Task"},
		ObjectMeta: metav1.ObjectMeta{Namespace: task.Namespace, Name: task.Name},
	}
}
