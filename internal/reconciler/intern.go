package reconciler

import (
	"slices"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// Interning: the cache transforms (cache.go) make the strings that repeat
// from one cached object to the next - the namespace, label and
// annotation keys, the finalizer, the owner's kind, condition types,
// reasons and the common messages - point at one shared copy instead of
// the copy each decoded object brings. A finished Task and its Job carry
// some forty of them, and without interning each is a small allocation
// kept as long as the object is cached (the figures:
// docs/performance-history.md, "Interned strings").
//
// Only fields whose values come from a small vocabulary are interned;
// names, UIDs and other values unique to one object are left alone (a
// table entry for them would cost more than it saves). Some of what is
// interned still changes over time (a cron run's message names its run),
// so the table is bounded: internMaxEntries strings of at most
// internMaxLen bytes, emptied when full and filled again from what comes
// next. The strings already shared stay valid (a string never changes);
// only later copies of them are shared with a new entry.

const (
	internMaxEntries = 4096
	internMaxLen     = 96
)

// internTable is the shared copies. A read-mostly map under a lock: the
// Task and Job informers' transforms are its only users, and a lookup by
// a string key allocates nothing (a sync.Map's would box the key).
type internTable struct {
	mu sync.RWMutex
	m  map[string]string
}

var interned = &internTable{m: map[string]string{}}

// of returns the shared copy of s, adding s (after emptying a full
// table).
func (t *internTable) of(s string) string {
	if s == "" || len(s) > internMaxLen {
		return s
	}
	t.mu.RLock()
	v, ok := t.m[s]
	t.mu.RUnlock()
	if ok {
		return v
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.m[s]; ok {
		return v
	}
	if len(t.m) >= internMaxEntries {
		t.m = make(map[string]string, internMaxEntries)
	}
	t.m[s] = s
	return s
}

// internMeta interns an object's vocabulary metadata: namespace, label
// keys (and values, but for the keys whose values name one object:
// uniqueValues), annotation keys, finalizers, and the owners' API version
// and kind. Maps are rebuilt (a map's keys cannot be replaced in place):
// the decoded map becomes garbage at once, the cached one is the same size.
func internMeta(tm *metav1.TypeMeta, om *metav1.ObjectMeta, uniqueValues ...string) {
	t := interned
	tm.APIVersion, tm.Kind = t.of(tm.APIVersion), t.of(tm.Kind)
	om.Namespace = t.of(om.Namespace)
	if len(om.Labels) > 0 {
		out := make(map[string]string, len(om.Labels))
		for k, v := range om.Labels {
			if !slices.Contains(uniqueValues, k) {
				v = t.of(v)
			}
			out[t.of(k)] = v
		}
		om.Labels = out
	}
	if len(om.Annotations) > 0 {
		out := make(map[string]string, len(om.Annotations))
		for k, v := range om.Annotations {
			out[t.of(k)] = v
		}
		om.Annotations = out
	}
	for i := range om.Finalizers {
		om.Finalizers[i] = t.of(om.Finalizers[i])
	}
	for i := range om.OwnerReferences {
		ref := &om.OwnerReferences[i]
		ref.APIVersion, ref.Kind = t.of(ref.APIVersion), t.of(ref.Kind)
	}
}

// internTask interns a cached Task's vocabulary: its metadata (no label
// names one object: a Task's labels are the user's), the spec's type,
// image and policies, and the status's phase, conditions and records
// (results, reasons, messages: "succeeded on attempt 1" is every
// one-shot Task's).
func internTask(task *v1alpha1.Task) {
	t := interned
	internMeta(&task.TypeMeta, &task.ObjectMeta)
	sp := &task.Spec
	sp.Type, sp.Image, sp.QueueName = v1alpha1.TaskType(t.of(string(sp.Type))), t.of(sp.Image), t.of(sp.QueueName)
	sp.ConcurrencyPolicy = v1alpha1.ConcurrencyPolicy(t.of(string(sp.ConcurrencyPolicy)))
	st := &task.Status
	st.Phase = v1alpha1.TaskPhase(t.of(string(st.Phase)))
	for i := range st.Conditions {
		c := &st.Conditions[i]
		c.Type, c.Reason, c.Message = t.of(c.Type), t.of(c.Reason), t.of(c.Message)
		c.Status = metav1.ConditionStatus(t.of(string(c.Status)))
	}
	for i := range st.History {
		h := &st.History[i]
		h.Result, h.Reason, h.Message = v1alpha1.RunResult(t.of(string(h.Result))), v1alpha1.Reason(t.of(string(h.Reason))), t.of(h.Message)
	}
	for i := range st.AttemptRecords {
		a := &st.AttemptRecords[i]
		a.Result, a.Reason, a.Message = v1alpha1.AttemptResult(t.of(string(a.Result))), v1alpha1.Reason(t.of(string(a.Reason))), t.of(a.Message)
	}
}

// internJob interns a trimmed Job's vocabulary: its metadata (the Task
// label's value is the Task's name: left alone) and its conditions.
func internJob(job *batchv1.Job) {
	t := interned
	internMeta(&job.TypeMeta, &job.ObjectMeta, v1alpha1.LabelTask)
	for i := range job.Status.Conditions {
		c := &job.Status.Conditions[i]
		c.Type = batchv1.JobConditionType(t.of(string(c.Type)))
		c.Status = corev1.ConditionStatus(t.of(string(c.Status)))
		c.Reason, c.Message = t.of(c.Reason), t.of(c.Message)
	}
}
