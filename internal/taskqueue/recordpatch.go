package taskqueue

import (
	"encoding/json"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// recordPatch is the status write of a queue pass as a JSON patch
// (RFC 6902) that carries only what changed: the record's names removed
// and added, by position, and the counts and conditions. A merge patch
// replaces a list whole, so at maxRunning 5000 every admission would send
// the 5000 names again; this sends the few that changed.
//
// The first operation sets metadata.resourceVersion to the one the pass
// read: the API server then refuses the write with a conflict if the queue
// changed since, exactly as an optimistic-lock merge patch is refused, and
// the positions in the patch are always those of the stored list.
//
// A status never written (a new queue) has no fields to patch into: that
// first write, and any write whose status object may be missing, is a
// merge patch with the same lock.
func recordPatch(base *v1alpha1.TaskQueue, st *v1alpha1.TaskQueueStatus) ctrl.Patch {
	old := &base.Status
	if old.ObservedGeneration == 0 {
		return ctrl.MergeFromWithOptions(base, ctrl.MergeFromWithOptimisticLock{})
	}
	ops := []jsonOp{{Op: "replace", Path: "/metadata/resourceVersion", Value: base.ResourceVersion}}
	ops = append(ops, listOps("/status/admitted", old.Admitted, st.Admitted)...)
	set := func(path string, changed bool, v any) {
		if changed {
			ops = append(ops, jsonOp{Op: "add", Path: path, Value: v}) // add replaces a member that exists
		}
	}
	set("/status/running", old.Running != st.Running, st.Running)
	set("/status/queued", old.Queued != st.Queued, st.Queued)
	set("/status/admittedTotal", old.AdmittedTotal != st.AdmittedTotal, st.AdmittedTotal)
	set("/status/observedGeneration", old.ObservedGeneration != st.ObservedGeneration, st.ObservedGeneration)
	set("/status/conditions", !equality.Semantic.DeepEqual(old.Conditions, st.Conditions), st.Conditions)
	data, _ := json.Marshal(ops) // strings, numbers and conditions: cannot fail
	return ctrl.RawPatch(types.JSONPatchType, data)
}

type jsonOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// listOps turns the sorted list from into the sorted list to: the removals
// from the end backwards (so each position is that of the list as the
// previous operation left it), then the additions at their final
// positions, in order. An empty list is absent from the stored object
// (omitempty): it is added or removed whole.
func listOps(path string, from, to []string) []jsonOp {
	switch {
	case slices.Equal(from, to):
		return nil
	case len(from) == 0:
		return []jsonOp{{Op: "add", Path: path, Value: to}}
	case len(to) == 0:
		return []jsonOp{{Op: "remove", Path: path}}
	case !slices.IsSorted(from):
		return []jsonOp{{Op: "add", Path: path, Value: to}} // not as written here: replaced whole
	}
	var ops []jsonOp
	for i := len(from) - 1; i >= 0; i-- {
		if _, found := slices.BinarySearch(to, from[i]); !found {
			ops = append(ops, jsonOp{Op: "remove", Path: path + "/" + strconv.Itoa(i)})
		}
	}
	for i, name := range to {
		if _, found := slices.BinarySearch(from, name); !found {
			ops = append(ops, jsonOp{Op: "add", Path: path + "/" + strconv.Itoa(i), Value: name})
		}
	}
	return ops
}
