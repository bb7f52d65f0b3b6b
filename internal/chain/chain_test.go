package chain

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

var t0 = time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)

// at is t0 plus s seconds, as the status keeps it.
func at(s int) *metav1.Time { return &metav1.Time{Time: t0.Add(time.Duration(s) * time.Second)} }

func run(id string, result v1alpha1.RunResult, finished int, res map[string]string) v1alpha1.RunRecord {
	return v1alpha1.RunRecord{RunID: id, Result: result, CompletionTime: at(finished), Results: res}
}

func ref(task, id string, finished int) v1alpha1.TriggerRef {
	return v1alpha1.TriggerRef{Task: task, RunID: id, CompletionTime: at(finished)}
}

func report(policy v1alpha1.AfterPolicy, after ...v1alpha1.TaskAfter) *v1alpha1.Task {
	t := &v1alpha1.Task{}
	t.Name, t.Namespace = "report", "ns"
	t.Spec.After, t.Spec.AfterPolicy = after, policy
	today := "today"
	t.Spec.Params = []v1alpha1.ParamSpec{{Name: "rows"}, {Name: "day", Default: &today}}
	return t
}

func after(task string, on ...v1alpha1.AfterOn) v1alpha1.TaskAfter {
	return v1alpha1.TaskAfter{Task: task, On: on}
}

func withParams(a v1alpha1.TaskAfter, nameFrom ...string) v1alpha1.TaskAfter {
	for i := 0; i+1 < len(nameFrom); i += 2 {
		a.Params = append(a.Params, v1alpha1.AfterParam{Name: nameFrom[i], FromResult: nameFrom[i+1]})
	}
	return a
}

func TestPending(t *testing.T) {
	rowsFromETL := withParams(after("etl"), "rows", "rows")
	ok := v1alpha1.RunResultSucceeded
	failed := v1alpha1.RunResultFailed
	etl := Upstream{Name: "etl", History: []v1alpha1.RunRecord{
		run("s200", ok, 210, map[string]string{"rows": "42"}),
		run("s100", ok, 110, map[string]string{"rows": "7"}),
	}}
	load := Upstream{Name: "load", History: []v1alpha1.RunRecord{run("0", ok, 150, nil)}}
	cases := []struct {
		name     string
		task     *v1alpha1.Task
		ups      []Upstream
		consumed map[string]v1alpha1.AfterStatus
		known    map[string]bool
		want     [][]v1alpha1.TriggerRef
		params   []map[string]string
		err      string
	}{
		{
			name:   "all: once each upstream finished a run, the newest of each starts one run",
			task:   report(v1alpha1.AfterAll, rowsFromETL, after("load")),
			ups:    []Upstream{etl, load},
			want:   [][]v1alpha1.TriggerRef{{ref("etl", "s200", 210), ref("load", "0", 150)}},
			params: []map[string]string{{"rows": "42", "day": "today"}},
		},
		{
			name:     "all: an upstream with nothing newer than what was consumed holds the run",
			task:     report(v1alpha1.AfterAll, rowsFromETL, after("load")),
			ups:      []Upstream{etl, load},
			consumed: map[string]v1alpha1.AfterStatus{"load": {Task: "load", LastConsumedRunID: "0", LastConsumedTime: at(150)}},
		},
		{
			name: "all: a missing upstream holds the run",
			task: report(v1alpha1.AfterAll, rowsFromETL, after("load")),
			ups:  []Upstream{etl, {Name: "load", Missing: true}},
		},
		{
			name:   "any: each upstream run newer than the consumed one starts one run, oldest first",
			task:   report(v1alpha1.AfterAny, rowsFromETL, after("load")),
			ups:    []Upstream{etl, load},
			want:   [][]v1alpha1.TriggerRef{{ref("etl", "s100", 110)}, {ref("load", "0", 150)}, {ref("etl", "s200", 210)}},
			params: []map[string]string{{"rows": "7", "day": "today"}, nil, {"rows": "42", "day": "today"}},
			err:    "rows",
		},
		{
			name:     "any: a missing upstream is passed over, and consumed runs do not start again",
			task:     report(v1alpha1.AfterAny, rowsFromETL, after("load")),
			ups:      []Upstream{etl, {Name: "load", Missing: true}},
			consumed: map[string]v1alpha1.AfterStatus{"etl": {Task: "etl", LastConsumedRunID: "s100", LastConsumedTime: at(110)}},
			want:     [][]v1alpha1.TriggerRef{{ref("etl", "s200", 210)}},
			params:   []map[string]string{{"rows": "42", "day": "today"}},
		},
		{
			name: "a failed upstream run with on: [Succeeded] starts nothing",
			task: report(v1alpha1.AfterAll, after("etl")),
			ups:  []Upstream{{Name: "etl", History: []v1alpha1.RunRecord{run("0", failed, 10, nil)}}},
		},
		{
			name: "a failed upstream run counts when on names Failed; a running one never",
			task: report(v1alpha1.AfterAny, withParams(after("etl", v1alpha1.AfterOnFailed), "rows", "rows")),
			ups: []Upstream{{Name: "etl", History: []v1alpha1.RunRecord{
				{RunID: "s300", Result: v1alpha1.RunResultRunning},
				run("s200", ok, 210, map[string]string{"rows": "1"}),
				run("s100", failed, 110, map[string]string{"rows": "0"}),
			}}},
			want:   [][]v1alpha1.TriggerRef{{ref("etl", "s100", 110)}},
			params: []map[string]string{{"rows": "0", "day": "today"}},
		},
		{
			name:  "a run whose id exists already is not pending (its status write was lost)",
			task:  report(v1alpha1.AfterAll, rowsFromETL),
			ups:   []Upstream{etl},
			known: map[string]bool{runs.ChainID([]v1alpha1.TriggerRef{ref("etl", "s200", 210)}): true},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			consumed := tc.consumed
			if consumed == nil {
				consumed = map[string]v1alpha1.AfterStatus{}
			}
			got := Pending(tc.task, tc.ups, consumed, tc.known)
			var refs [][]v1alpha1.TriggerRef
			for i, g := range got {
				refs = append(refs, g.Refs)
				if g.ID != runs.ChainID(g.Refs) || !strings.HasPrefix(g.ID, "a") {
					t.Errorf("trigger %d: id %q", i, g.ID)
				}
				if tc.params != nil && tc.params[i] != nil && !cmp.Equal(g.Params, tc.params[i]) {
					t.Errorf("trigger %d: params %v, want %v", i, g.Params, tc.params[i])
				}
				if tc.params != nil && tc.params[i] == nil && (g.ParamsErr == nil || !strings.Contains(g.ParamsErr.Error(), tc.err)) {
					t.Errorf("trigger %d: params error %v, want one naming %q", i, g.ParamsErr, tc.err)
				}
			}
			if diff := cmp.Diff(tc.want, refs); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConsumedIsTheNewestOfTheStatusAndWhatTheRunsRecord(t *testing.T) {
	stored := []v1alpha1.AfterStatus{{Task: "etl", LastConsumedRunID: "s100", LastConsumedTime: at(110)}}
	// The status write that recorded s200 was lost; the run it started
	// records it on its Jobs.
	got := Consumed(stored, []v1alpha1.TriggerRef{ref("etl", "s200", 210)}, []v1alpha1.TriggerRef{ref("load", "0", 150)})
	want := map[string]v1alpha1.AfterStatus{
		"etl":  {Task: "etl", LastConsumedRunID: "s200", LastConsumedTime: at(210)},
		"load": {Task: "load", LastConsumedRunID: "0", LastConsumedTime: at(150)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("consumed (-want +got):\n%s", diff)
	}
	task := report(v1alpha1.AfterAll, after("load"), after("etl"))
	if diff := cmp.Diff([]v1alpha1.AfterStatus{want["load"], want["etl"]}, Status(task, got)); diff != "" {
		t.Errorf("status.after in spec.after's order (-want +got):\n%s", diff)
	}
}

func TestTheSameUpstreamRunsAlwaysMakeTheSameRunID(t *testing.T) {
	a := runs.ChainID([]v1alpha1.TriggerRef{ref("etl", "s1", 1), ref("load", "0", 2)})
	b := runs.ChainID([]v1alpha1.TriggerRef{ref("load", "0", 9), ref("etl", "s1", 9)})
	c := runs.ChainID([]v1alpha1.TriggerRef{ref("etl", "s2", 1), ref("load", "0", 2)})
	if a != b || a == c || len(a) != 11 {
		t.Errorf("ids %q %q %q: want the first two equal, the third other, 11 characters", a, b, c)
	}
}
