package taskqueue

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// changed since, exactly as an optimistic-lock merge patch is refused (or
// as Invalid when an operation misses its position in the newer list
// first: lostRace tells that refusal from a wrong patch), and the
// positions in a patch that applies are always those of the stored list.
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

// lostRace reports whether err, the refusal of a record write built on
// base, is a lost optimistic-lock race. The API server applies a JSON
// patch before it checks the lock: on a base older than the stored queue
// an operation can miss its position (a removal past the end of a list
// that has since shrunk), and the answer is 422 Invalid, not 409 Conflict.
// The stored queue, read at the API server, tells the two apart: when its
// resourceVersion is no longer the base's, the pass lost a race and runs
// again from the winner's record like any other conflict; otherwise the
// refusal is what it says (the patch is wrong) and stays an error.
func (r *Reconciler) lostRace(ctx context.Context, base *v1alpha1.TaskQueue, err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	stored := &v1alpha1.TaskQueue{}
	if r.APIReader.Get(ctx, ctrl.ObjectKeyFromObject(base), stored) != nil {
		return false
	}
	return stored.ResourceVersion != base.ResourceVersion
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
