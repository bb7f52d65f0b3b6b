package reconciler

import (
	"encoding/json"
	"fmt"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// The Task's two patches, built from what they change. Both are JSON merge
// patches (RFC 7386) locked to the resourceVersion read, exactly what
// controller-runtime's MergeFromWithOptimisticLock sends for the same
// change; it gets there by serializing two whole Tasks (managed fields,
// spec and annotations included) and diffing them, which made up most of
// the CPU of a status-writing pass. patches_test.go compares the two.

// statusPatch turns status old into task.Status.
func statusPatch(task *v1alpha1.Task, old *v1alpha1.TaskStatus) (ctrl.Patch, error) {
	from, err := json.Marshal(old)
	if err != nil {
		return nil, err
	}
	to, err := json.Marshal(&task.Status)
	if err != nil {
		return nil, err
	}
	diff, err := jsonpatch.CreateMergePatch(from, to)
	if err != nil {
		return nil, fmt.Errorf("diffing the status: %w", err)
	}
	return lockedPatch(task.ResourceVersion, "status", diff)
}

// finalizersPatch sets the Task's finalizers to the list it holds (a merge
// patch replaces a list whole: the lock keeps another controller's
// finalizer, added since the read, from being lost).
func finalizersPatch(task *v1alpha1.Task) (ctrl.Patch, error) {
	list, err := json.Marshal(task.Finalizers)
	if err != nil {
		return nil, err
	}
	rv, err := json.Marshal(task.ResourceVersion)
	if err != nil {
		return nil, err
	}
	body := fmt.Appendf(nil, `{"metadata":{"finalizers":%s,"resourceVersion":%s}}`, list, rv)
	return ctrl.RawPatch(types.MergePatchType, body), nil
}

// lockedPatch is {"metadata":{"resourceVersion":rv},field:value}.
func lockedPatch(rv, field string, value []byte) (ctrl.Patch, error) {
	v, err := json.Marshal(rv)
	if err != nil {
		return nil, err
	}
	body := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%s},%q:%s}`, v, field, value)
	return ctrl.RawPatch(types.MergePatchType, body), nil
}
