package reconciler

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// finishedTask is a one-shot Task as the API server sends it once it
// succeeded (its JSON, so each decoding brings its own strings).
const finishedTask = `{"apiVersion":"batch.taskops.io/v1alpha1","kind":"Task",
"metadata":{"name":"%s","namespace":"team-a","uid":"%s","resourceVersion":"230","generation":1,
 "finalizers":["batch.taskops.io/cleanup"],"labels":{"team":"a"},"annotations":{"example.com/note":"x"}},
"spec":{"type":"shell","shell":"echo hello","replicas":1,"concurrencyPolicy":"Forbid","image":"busybox:1.37"},
"status":{"phase":"Succeeded","currentRun":"0","lastJobName":"%[1]s-3b790-0-1",
 "history":[{"runID":"0","generation":1,"attempts":1,"result":"Succeeded","reason":"Succeeded","message":"succeeded on attempt 1"}],
 "attemptRecords":[{"attempt":1,"jobName":"%[1]s-3b790-0-1","result":"Succeeded"}],
 "conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-12-05T16:21:54Z","reason":"Succeeded","message":"succeeded on attempt 1"},
  {"type":"Failed","status":"False","lastTransitionTime":"2026-12-05T16:21:54Z","reason":"NotFailed","message":""}]}}`

func decodeTask(t *testing.T, name string) *v1alpha1.Task {
	t.Helper()
	task := &v1alpha1.Task{}
	if err := json.Unmarshal(fmt.Appendf(nil, finishedTask, name, "uid-"+name), task); err != nil {
		t.Fatal(err)
	}
	return task
}

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// Two Tasks through the cache transform share their vocabulary strings,
// keep their own names, and say exactly what they said before.
func TestCachedTasksShareTheirRepeatedStrings(t *testing.T) {
	a, b := decodeTask(t, "a"), decodeTask(t, "b")
	wantA := a.DeepCopy()
	for _, task := range []*v1alpha1.Task{a, b} {
		if _, err := trimTask(task); err != nil {
			t.Fatal(err)
		}
	}
	if d := cmp.Diff(wantA, a); d != "" {
		t.Fatalf("the transform changed what the Task says (-want +got):\n%s", d)
	}
	key := func(m map[string]string) string {
		for k := range m {
			return k
		}
		return ""
	}
	for what, pair := range map[string][2]string{
		"namespace":         {a.Namespace, b.Namespace},
		"apiVersion":        {a.APIVersion, b.APIVersion},
		"finalizer":         {a.Finalizers[0], b.Finalizers[0]},
		"label key":         {key(a.Labels), key(b.Labels)},
		"label value":       {a.Labels["team"], b.Labels["team"]},
		"annotation key":    {key(a.Annotations), key(b.Annotations)},
		"image":             {a.Spec.Image, b.Spec.Image},
		"phase":             {string(a.Status.Phase), string(b.Status.Phase)},
		"condition type":    {a.Status.Conditions[0].Type, b.Status.Conditions[0].Type},
		"condition reason":  {a.Status.Conditions[1].Reason, b.Status.Conditions[1].Reason},
		"condition message": {a.Status.Conditions[0].Message, b.Status.Conditions[0].Message},
		"history message":   {a.Status.History[0].Message, b.Status.History[0].Message},
		"attempt result":    {string(a.Status.AttemptRecords[0].Result), string(b.Status.AttemptRecords[0].Result)},
	} {
		if !same(pair[0], pair[1]) {
			t.Errorf("%s %q: two copies", what, pair[0])
		}
	}
	if a.ManagedFields != nil {
		t.Error("managed fields kept")
	}
}

// A Job's Task label names one Task: interning it would fill the table
// with names. The other labels and the conditions are shared.
func TestCachedJobsShareAllButTheirTasksName(t *testing.T) {
	job := func(task string) *batchv1.Job {
		j := &batchv1.Job{}
		j.Namespace = strings.Clone("team-a")
		j.Labels = map[string]string{strings.Clone(v1alpha1.LabelTask): strings.Clone(task), strings.Clone(v1alpha1.LabelManagedBy): strings.Clone(v1alpha1.ManagedByValue)}
		j.OwnerReferences = []metav1.OwnerReference{{APIVersion: strings.Clone(v1alpha1.GroupVersion.String()), Kind: strings.Clone("Task"), Name: task, Controller: ptr.To(true)}}
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobConditionType(strings.Clone("Complete")), Status: "True", Reason: strings.Clone("CompletionsReached")}}
		return j
	}
	first, _ := trimJob(job("reused-name"))
	second, _ := trimJob(job("reused-name"))
	a, b := first.(*batchv1.Job), second.(*batchv1.Job)
	if !same(a.Labels[v1alpha1.LabelManagedBy], b.Labels[v1alpha1.LabelManagedBy]) || !same(a.Namespace, b.Namespace) ||
		!same(a.OwnerReferences[0].APIVersion, b.OwnerReferences[0].APIVersion) || !same(a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason) {
		t.Error("a Job's vocabulary is not shared")
	}
	if same(a.Labels[v1alpha1.LabelTask], b.Labels[v1alpha1.LabelTask]) {
		t.Error("the Task label's value (a name) was interned")
	}
}

// The table holds at most internMaxEntries strings, none longer than
// internMaxLen: strings that change over time (a cron run's message) cost
// a fixed amount, never a growing one, and what comes after a full table
// is shared again.
func TestTheInternTableIsBounded(t *testing.T) {
	tab := &internTable{m: map[string]string{}}
	for i := range internMaxEntries {
		tab.of(fmt.Sprint("s", i))
	}
	if len(tab.m) != internMaxEntries {
		t.Fatalf("%d entries, want %d", len(tab.m), internMaxEntries)
	}
	long := strings.Repeat("x", internMaxLen+1)
	tab.of(long)
	if _, ok := tab.m[long]; ok {
		t.Fatal("a string longer than internMaxLen was kept")
	}
	tab.of("after")
	if len(tab.m) != 1 {
		t.Fatalf("a full table was not emptied: %d entries", len(tab.m))
	}
	if s := strings.Clone("after"); !same(tab.of(s), tab.of("after")) || same(tab.of(s), s) {
		t.Fatal("a string after a full table is not shared")
	}
}
