// Package chain decides which runs of a Task the finished runs of its
// upstream Tasks start (spec.after, docs/chains.md). It is pure: Pending
// turns the upstream Tasks' histories as the pass saw them, and what this
// Task consumed so far, into the triggers that may start runs now, oldest
// first; the run planner (internal/scheduler) then starts them under the
// Task's suspend and concurrencyPolicy, and the queue (internal/plan) gates
// them like any new run.
//
// Invariant: an upstream run starts at most one run of this Task. What a
// Task consumed is, per upstream, the newest run it consumed (by the run's
// completion time, then run id): a run is pending only when it is newer.
// That pointer is kept in status.after and rebuilt, when the status is
// lost, from the triggers the Task's own runs record (their Jobs'
// annotation, history[].trigger, a queued run's entry): Consumed takes the
// newest of all of them, so a lost status write never starts a run again.
package chain

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/params"
	"github.com/taskops/task-operator/internal/runs"
)

// Upstream is one Task of spec.after as the pass saw it.
type Upstream struct {
	Name string
	// Missing: no Task of that name in the namespace.
	Missing bool
	// History is its status.history: the runs it finished, with results.
	History []v1alpha1.RunRecord
}

// Trigger is a run the upstream runs start.
type Trigger struct {
	// ID is the run's id (runs.ChainID of Refs).
	ID string
	// Refs are the upstream runs it consumes, in spec.after's order.
	Refs []v1alpha1.TriggerRef
	// Params are the run's values: the upstream results spec.after[].params
	// name, defaults filling the rest; ParamsErr says why there are none
	// (a result missing and no default): the run fails at once
	// (InvalidParams), its upstream runs consumed all the same.
	Params    map[string]string
	ParamsErr error
}

// Consumed is, per upstream Task, the newest of its runs this Task
// consumed: the newest of status.after and the triggers the Task's runs
// record (known).
func Consumed(stored []v1alpha1.AfterStatus, known ...[]v1alpha1.TriggerRef) map[string]v1alpha1.AfterStatus {
	out := map[string]v1alpha1.AfterStatus{}
	for _, a := range stored {
		keepNewer(out, a)
	}
	for _, refs := range known {
		Consume(out, refs)
	}
	return out
}

// Status is status.after from consumed, in spec.after's order; upstream
// Tasks no longer named are dropped.
func Status(task *v1alpha1.Task, consumed map[string]v1alpha1.AfterStatus) []v1alpha1.AfterStatus {
	var out []v1alpha1.AfterStatus
	for _, a := range task.Spec.After {
		if c, ok := consumed[a.Task]; ok {
			c.LastConsumedTime = c.LastConsumedTime.DeepCopy()
			out = append(out, c)
		}
	}
	return out
}

// Pending are the triggers that may start runs now, oldest first, from
// the upstream Tasks (in spec.after's order) and what was consumed. Under
// afterPolicy All there is at most one: once every upstream has a
// matching run newer than the one consumed, the newest of each. Under Any,
// one per matching upstream run. A missing upstream holds All and is
// passed over by Any. known are the run ids the Task ever had: a trigger
// whose run exists already is not pending (its status write was lost).
func Pending(task *v1alpha1.Task, ups []Upstream, consumed map[string]v1alpha1.AfterStatus, known map[string]bool) []Trigger {
	byName := map[string]Upstream{}
	for _, u := range ups {
		byName[u.Name] = u
	}
	fresh := make([][]v1alpha1.TriggerRef, len(task.Spec.After))
	for i, a := range task.Spec.After {
		if u, ok := byName[a.Task]; ok && !u.Missing {
			fresh[i] = newerRuns(a, u.History, consumed[a.Task])
		}
	}
	var out []Trigger
	if task.Spec.AfterPolicy == v1alpha1.AfterAny {
		var all []v1alpha1.TriggerRef
		for _, refs := range fresh {
			all = append(all, refs...)
		}
		slices.SortStableFunc(all, order)
		for _, r := range all {
			out = append(out, trigger(task, ups, []v1alpha1.TriggerRef{r}))
		}
	} else {
		refs := make([]v1alpha1.TriggerRef, 0, len(fresh))
		for _, f := range fresh {
			if len(f) == 0 {
				return nil
			}
			refs = append(refs, f[len(f)-1]) // the newest of each
		}
		if len(refs) > 0 {
			out = append(out, trigger(task, ups, refs))
		}
	}
	return slices.DeleteFunc(out, func(t Trigger) bool { return known[t.ID] })
}

// newerRuns are the upstream runs in h that match a's on and finished
// after the one consumed, oldest first.
func newerRuns(a v1alpha1.TaskAfter, h []v1alpha1.RunRecord, consumed v1alpha1.AfterStatus) []v1alpha1.TriggerRef {
	on := a.On
	if len(on) == 0 {
		on = []v1alpha1.AfterOn{v1alpha1.AfterOnSucceeded}
	}
	var out []v1alpha1.TriggerRef
	for _, r := range h {
		if r.CompletionTime == nil || !slices.Contains(on, v1alpha1.AfterOn(r.Result)) {
			continue
		}
		if consumed.LastConsumedRunID != "" && !newer(r.CompletionTime.Time, r.RunID, timeOf(consumed.LastConsumedTime), consumed.LastConsumedRunID) {
			continue
		}
		out = append(out, v1alpha1.TriggerRef{Task: a.Task, RunID: r.RunID, CompletionTime: r.CompletionTime.DeepCopy()})
	}
	slices.SortFunc(out, order)
	return out
}

// trigger is the run refs start, with its params from the upstream runs'
// results.
func trigger(task *v1alpha1.Task, ups []Upstream, refs []v1alpha1.TriggerRef) Trigger {
	t := Trigger{ID: runs.ChainID(refs), Refs: refs}
	given := map[string]string{}
	var missing []string
	for _, ref := range refs {
		res := resultsOf(ups, ref)
		for _, a := range task.Spec.After {
			if a.Task != ref.Task {
				continue
			}
			for _, p := range a.Params {
				if v, ok := res[p.FromResult]; ok {
					given[p.Name] = v
				} else if !hasDefault(task, p.Name) {
					missing = append(missing, fmt.Sprintf("result %q of Task %s run %s (for param %q)", p.FromResult, ref.Task, ref.RunID, p.Name))
				}
			}
		}
	}
	if len(missing) > 0 {
		t.ParamsErr = fmt.Errorf("no value for %s, and the param has no default", strings.Join(missing, ", "))
		return t
	}
	t.Params, t.ParamsErr = params.Values(task.Spec.Params, given)
	return t
}

func resultsOf(ups []Upstream, ref v1alpha1.TriggerRef) map[string]string {
	for _, u := range ups {
		if u.Name != ref.Task {
			continue
		}
		for _, r := range u.History {
			if r.RunID == ref.RunID {
				return r.Results
			}
		}
	}
	return nil
}

func hasDefault(task *v1alpha1.Task, name string) bool {
	for _, p := range task.Spec.Params {
		if p.Name == name {
			return p.Default != nil
		}
	}
	return false
}

// Consume moves consumed past the refs of a trigger taken (started, or
// skipped for a skip date).
func Consume(consumed map[string]v1alpha1.AfterStatus, refs []v1alpha1.TriggerRef) {
	for _, r := range refs {
		keepNewer(consumed, v1alpha1.AfterStatus{Task: r.Task, LastConsumedRunID: r.RunID, LastConsumedTime: r.CompletionTime})
	}
}

// keepNewer records a as its upstream's consumed run when it is newer
// than the one recorded.
func keepNewer(consumed map[string]v1alpha1.AfterStatus, a v1alpha1.AfterStatus) {
	if cur, ok := consumed[a.Task]; !ok || newer(timeOf(a.LastConsumedTime), a.LastConsumedRunID, timeOf(cur.LastConsumedTime), cur.LastConsumedRunID) {
		consumed[a.Task] = a
	}
}

// Missing are the upstream Tasks the pass did not find, in spec.after's
// order.
func Missing(ups []Upstream) (names []string) {
	for _, u := range slices.DeleteFunc(slices.Clone(ups), func(u Upstream) bool { return !u.Missing }) {
		names = append(names, u.Name)
	}
	return names
}

// order sorts upstream runs oldest first: by completion time, then Task
// and run id, so runs that finished within one second (the resolution of
// the times the status keeps) still have one order.
func order(a, b v1alpha1.TriggerRef) int {
	return cmp.Or(timeOf(a.CompletionTime).Compare(timeOf(b.CompletionTime)), cmp.Compare(a.Task, b.Task), cmp.Compare(a.RunID, b.RunID))
}

// newer reports whether the run (t, id) finished after (t0, id0): later,
// or in the same second with a greater id.
func newer(t time.Time, id string, t0 time.Time, id0 string) bool {
	if !t.Equal(t0) {
		return t.After(t0)
	}
	return id > id0
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}
