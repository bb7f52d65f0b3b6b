package reconciler

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/chain"
	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/plan"
)

// A Task that runs after others (spec.after, docs/chains.md): the pass
// reads its upstream Tasks from the cache (readUpstreams) and looks for a
// cycle through it; internal/chain decides which upstream runs start runs;
// upstreamToTasks wakes a Task when a Task it runs after finishes a run.

// maxChainWalk bounds the Tasks the cycle search reads: a cycle longer
// than that goes unseen by this Task, and its runs then start at most once
// per upstream run, as always (never an endless burst: each run is
// consumed once).
const maxChainWalk = 64

// readUpstreams reads the Tasks spec.after names and a cycle through
// this Task, if there is one; each Task is read from the cache once a
// pass (upstreams), the cycle search starting from those read.
func (p *pass) readUpstreams(ctx context.Context, in *plan.Input) error {
	if len(p.task.Spec.After) == 0 {
		return nil
	}
	up := upstreams{p: p, read: map[string]*v1alpha1.Task{}}
	for _, a := range p.task.Spec.After {
		t, err := up.get(ctx, a.Task)
		if err != nil {
			return fmt.Errorf("reading Task %s (spec.after): %w", a.Task, err)
		}
		u := chain.Upstream{Name: a.Task, Missing: t == nil}
		if t != nil {
			u.History = t.Status.History
		}
		in.Upstreams = append(in.Upstreams, u)
	}
	cycle, err := up.findCycle(ctx)
	in.Cycle = cycle
	return err
}

// upstreams reads the Tasks of this Task's namespace from the cache, each
// once a pass: nil for one that does not exist.
type upstreams struct {
	p    *pass
	read map[string]*v1alpha1.Task
}

func (u upstreams) get(ctx context.Context, name string) (*v1alpha1.Task, error) {
	if t, ok := u.read[name]; ok {
		return t, nil
	}
	t := &v1alpha1.Task{}
	switch err := u.p.r.Client.Get(ctx, types.NamespacedName{Namespace: u.p.task.Namespace, Name: name}, t); {
	case apierrors.IsNotFound(err):
		t = nil
	case err != nil:
		return nil, err
	}
	u.read[name] = t
	return t, nil
}

// findCycle walks spec.after upstream from this Task, breadth first over
// at most maxChainWalk Tasks, and returns the path back to it
// (this Task first and last), or nil.
func (u upstreams) findCycle(ctx context.Context) ([]string, error) {
	self := u.p.task.Name
	parent := map[string]string{}
	queue := []string{}
	for _, a := range u.p.task.Spec.After {
		if _, seen := parent[a.Task]; !seen {
			parent[a.Task] = self
			queue = append(queue, a.Task)
		}
	}
	for read := 0; len(queue) > 0 && read < maxChainWalk; read++ {
		name := queue[0]
		queue = queue[1:]
		t, err := u.get(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("reading Task %s (spec.after of a Task this one runs after): %w", name, err)
		}
		if t == nil {
			continue
		}
		for _, a := range t.Spec.After {
			if a.Task == self {
				return cyclePath(parent, name, self), nil
			}
			if _, seen := parent[a.Task]; !seen {
				parent[a.Task] = name
				queue = append(queue, a.Task)
			}
		}
	}
	return nil, nil
}

// cyclePath is self, then the Tasks from self's upstream down to last,
// then self: the order in which each runs after the next.
func cyclePath(parent map[string]string, last, self string) []string {
	path := []string{last}
	for n := last; parent[n] != self; n = parent[n] {
		path = append(path, parent[n])
	}
	slices.Reverse(path)
	return append(append([]string{self}, path...), self)
}

// chainEvents reports what spec.after did: the runs upstream runs
// started that the status records for the first time (ChainTriggered;
// from the status, so a pass that left its write to the next still has
// it told), the triggers a skip date consumed this pass (SlotSkipped),
// and upstream Tasks that went missing (UpstreamMissing, when Ready's
// message first names them).
func (p *pass) chainEvents() {
	r, task := p.r, p.task
	for _, h := range task.Status.History {
		if len(h.Trigger) > 0 && !slices.ContainsFunc(p.old.History, func(o v1alpha1.RunRecord) bool { return o.RunID == h.RunID }) {
			r.event(task, nil, eventNormal, v1alpha1.EventChainTriggered, "Trigger", fmt.Sprintf("run %s started after %s", h.RunID, refsText(h.Trigger)))
		}
	}
	for _, t := range p.plan.ChainSkipped {
		r.event(task, nil, eventNormal, v1alpha1.EventSlotSkipped, "Trigger", fmt.Sprintf("no run after %s: today is a skip date (the upstream run is consumed)", refsText(t.Refs)))
	}
	if m := p.plan.UpstreamMissing; len(m) > 0 && !strings.Contains(readyMessage(p.old), "missing: "+strings.Join(m, ", ")) {
		r.event(task, nil, eventWarning, v1alpha1.EventUpstreamMissing, "Trigger", fmt.Sprintf(
			"spec.after names %s, which does not exist in this namespace: the Task runs after it once it exists", strings.Join(m, ", ")))
	}
}

func refsText(refs []v1alpha1.TriggerRef) string {
	parts := make([]string, 0, len(refs))
	for _, r := range refs {
		parts = append(parts, fmt.Sprintf("%s run %s", r.Task, r.RunID))
	}
	return strings.Join(parts, ", ")
}

// upstreamToTasks wakes the Tasks that run after a Task (index.After):
// when it finishes a run (its history's finished runs change), when its
// own spec.after changes (a cycle may form or break), and when it is
// created or deleted (a missing upstream). One indexed list, never a scan
// of the namespace.
type upstreamToTasks struct{ c client.Reader }

func (h upstreamToTasks) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.wake(ctx, e.Object, q)
}

func (h upstreamToTasks) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	o, n := e.ObjectOld.(*v1alpha1.Task), e.ObjectNew.(*v1alpha1.Task)
	if finishedChanged(o.Status.History, n.Status.History) || !equality.Semantic.DeepEqual(o.Spec.After, n.Spec.After) {
		h.wake(ctx, n, q)
	}
}

func (h upstreamToTasks) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.wake(ctx, e.Object, q)
}

func (upstreamToTasks) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (h upstreamToTasks) wake(ctx context.Context, t client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	enqueueTasksBy(ctx, h.c, q, t.GetNamespace(), index.After, t.GetName())
}

// finishedChanged reports whether the finished runs of two histories
// differ (a run ended, whichever run it is), without allocating: it runs
// on every Task update the cache sees.
func finishedChanged(old, cur []v1alpha1.RunRecord) bool {
	i, j := 0, 0
	for {
		for i < len(old) && old[i].Result == v1alpha1.RunResultRunning {
			i++
		}
		for j < len(cur) && cur[j].Result == v1alpha1.RunResultRunning {
			j++
		}
		switch {
		case i == len(old) || j == len(cur):
			return i != len(old) || j != len(cur)
		case old[i].RunID != cur[j].RunID || old[i].Result != cur[j].Result:
			return true
		}
		i, j = i+1, j+1
	}
}
