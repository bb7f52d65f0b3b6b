package taskqueue

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// The record's patch, applied to the stored queue, gives exactly the new
// status, and locks on the resourceVersion the pass read.
func TestTheRecordPatchTurnsTheStoredStatusIntoTheNewOne(t *testing.T) {
	names := func(ns ...int) []string {
		var out []string
		for _, n := range ns {
			out = append(out, fmt.Sprintf("job-%03d", n))
		}
		return out
	}
	ready := []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Admitting"}}
	cases := map[string]struct{ from, to []string }{
		"one released, one admitted":           {names(1, 2, 3), names(1, 3, 4)},
		"several released and admitted around": {names(2, 4, 6, 8), names(1, 3, 4, 5, 9)},
		"the first names":                      {nil, names(1, 2)},
		"the last released":                    {names(1), nil},
		"no change":                            {names(1, 2), names(1, 2)},
		"a stored list out of order":           {[]string{"job-2", "job-1"}, names(1, 3)},
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 50 {
		var from, to []string
		for n := range 40 {
			if rng.IntN(2) == 0 {
				from = append(from, fmt.Sprintf("job-%03d", n))
			}
			if rng.IntN(2) == 0 {
				to = append(to, fmt.Sprintf("job-%03d", n))
			}
		}
		cases[fmt.Sprintf("random %d", i)] = struct{ from, to []string }{from, to}
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			stored := &v1alpha1.TaskQueue{ObjectMeta: metav1.ObjectMeta{Name: "q", ResourceVersion: "41"},
				Status: v1alpha1.TaskQueueStatus{Admitted: c.from, Running: int32(len(c.from)), ObservedGeneration: 1, Conditions: ready}}
			want := stored.Status
			want.Admitted, want.Running, want.Queued, want.AdmittedTotal = c.to, int32(len(c.to)), 7, 12
			want.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Suspended"}}

			p := recordPatch(stored, &want)
			if p.Type() != types.JSONPatchType {
				t.Fatalf("patch type %s", p.Type())
			}
			data, err := p.Data(nil)
			if err != nil {
				t.Fatal(err)
			}
			storedJSON, _ := json.Marshal(stored)
			patch, err := jsonpatch.DecodePatch(data)
			if err != nil {
				t.Fatalf("%s: %v", data, err)
			}
			out, err := patch.Apply(storedJSON)
			if err != nil {
				t.Fatalf("applying %s: %v", data, err)
			}
			var got v1alpha1.TaskQueue
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got.Status); diff != "" {
				t.Errorf("status after the patch (-want +got):\n%s\npatch: %s", diff, data)
			}
			var ops []jsonOp
			_ = json.Unmarshal(data, &ops)
			if len(ops) == 0 || ops[0] != (jsonOp{Op: "replace", Path: "/metadata/resourceVersion", Value: "41"}) {
				t.Errorf("the patch does not lock on the resourceVersion read first: %s", data)
			}
		})
	}
}

// At maxRunning 5000, an admission that frees one place and fills it
// sends a few hundred bytes, not the 5000 names.
func TestTheRecordPatchOfOneAdmissionIsSmallAtMaxRunning5000(t *testing.T) {
	var from []string
	for n := range 5000 {
		from = append(from, fmt.Sprintf("nightly-report-%05d-7f9c2b1d4e-1", n))
	}
	to := slices.Concat(from[1:], []string{"nightly-report-99999-7f9c2b1d4e-1"})
	stored := &v1alpha1.TaskQueue{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "9"},
		Status: v1alpha1.TaskQueueStatus{Admitted: from, Running: 5000, Queued: 10, ObservedGeneration: 1}}
	st := stored.Status
	st.Admitted, st.Queued, st.AdmittedTotal = to, 9, 1
	data, _ := recordPatch(stored, &st).Data(nil)
	full, _ := json.Marshal(from)
	t.Logf("one admission at maxRunning 5000: %d bytes (the record itself: %d bytes)", len(data), len(full))
	if len(data) > 10*1024 {
		t.Fatalf("the write is %d bytes", len(data))
	}
}
