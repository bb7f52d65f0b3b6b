package harness

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

// PollInterval is how often Eventually asks again.
const PollInterval = 250 * time.Millisecond

// Eventually polls cond until it reports done, and fails the test at the
// deadline with what cond last said, plus note() when note is not nil (say,
// that the operator is not running). It returns how long it took.
func Eventually(t testing.TB, timeout time.Duration, what string, note func() string, cond func(ctx context.Context) (done bool, detail string)) time.Duration {
	t.Helper()
	deadline := time.Now().Add(testutil.Timeout(timeout)) // as testutil.Eventually scales it
	return testutil.Eventually(t, timeout, PollInterval, what, func(ctx context.Context) (bool, string) {
		done, detail := cond(ctx)
		if !done && note != nil && !time.Now().Before(deadline) {
			detail += note() // said only with the failure
		}
		return done, detail
	})
}

// JobKey is what makes an attempt: at most one Job may carry each.
type JobKey struct{ Task, Run, Attempt string }

// KeyOf is the attempt a Job's labels name.
func KeyOf(job *batchv1.Job) JobKey {
	l := job.Labels
	return JobKey{l[v1alpha1.LabelTask], l[v1alpha1.LabelRun], l[v1alpha1.LabelAttempt]}
}

// JobRecorder remembers every Job that ever existed in a namespace while it
// watched, so a duplicate created and deleted in between is seen too.
type JobRecorder struct {
	c     client.WithWatch
	ns    string
	mu    sync.Mutex
	seen  map[types.UID]batchv1.Job
	first map[types.UID]time.Time // when the recorder first saw each Job
	gone  map[types.UID]time.Time // when it saw each deleted Job go
	// active holds the Jobs whose attempt is active (not finished or
	// stopped) as last seen; maxActive is the most at any event; order the
	// Tasks of the Jobs in the order they were first seen.
	active    map[types.UID]bool
	maxActive int
	// running: the active Jobs not held suspended (by Kueue, say).
	running    map[types.UID]bool
	maxRunning int
	started    map[types.UID]bool
	startOrder []string
	order      []string
	cancel     context.CancelFunc
	done       chan struct{}
}

// RecordJobs starts recording the Jobs of namespace ns; the test's cleanup
// stops it.
func RecordJobs(t testing.TB, c client.WithWatch, ns string) *JobRecorder {
	return RecordJobsAcross(t, ns, c)
}

// RecordJobsAcross records the Jobs of namespace ns in several clusters as
// one set (MultiKueue's worker clusters: what runs anywhere); Snapshot
// lists the first. The test's cleanup stops it.
func RecordJobsAcross(t testing.TB, ns string, cs ...client.WithWatch) *JobRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	r := &JobRecorder{c: cs[0], ns: ns, seen: map[types.UID]batchv1.Job{}, first: map[types.UID]time.Time{}, gone: map[types.UID]time.Time{},
		active: map[types.UID]bool{}, running: map[types.UID]bool{}, started: map[types.UID]bool{}, cancel: cancel, done: make(chan struct{})}
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.watch(ctx, c)
		}()
	}
	go func() { wg.Wait(); close(r.done) }()
	t.Cleanup(r.Stop)
	return r
}

// watch feeds the Jobs of r.ns in one cluster to the recorder until ctx
// ends.
func (r *JobRecorder) watch(ctx context.Context, c client.WithWatch) {
	for ctx.Err() == nil {
		// A watch without a resourceVersion starts with an ADDED event
		// for every existing Job, so a re-watch misses nothing that
		// still exists.
		w, err := c.Watch(ctx, &batchv1.JobList{}, client.InNamespace(r.ns))
		if err != nil {
			time.Sleep(PollInterval)
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				continue
			}
			if job, ok := ev.Object.(*batchv1.Job); ok {
				r.add(job, ev.Type == watch.Deleted)
			}
		}
		w.Stop()
	}
}

// Seen returns when the recorder first saw a Job and when it saw it go
// (zero while it exists or when its deletion was missed).
func (r *JobRecorder) Seen(uid types.UID) (first, gone time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first[uid], r.gone[uid]
}

// Overlaps returns the attempts that had two Jobs at the same time, going
// by when the recorder saw each Job appear and go (a Job re-created after
// the first one was deleted is not an overlap).
func (r *JobRecorder) Overlaps() map[JobKey][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	type life struct {
		name     string
		from, to time.Time
	}
	byKey := map[JobKey][]life{}
	for uid, job := range r.seen {
		to, ok := r.gone[uid]
		if !ok {
			to = time.Now().Add(time.Hour)
		}
		byKey[KeyOf(&job)] = append(byKey[KeyOf(&job)], life{job.Name + "(" + string(uid) + ")", r.first[uid], to})
	}
	out := map[JobKey][]string{}
	for k, ls := range byKey {
		for i := range ls {
			for j := i + 1; j < len(ls); j++ {
				if ls[i].from.Before(ls[j].to) && ls[j].from.Before(ls[i].to) {
					out[k] = append(out[k], ls[i].name+" & "+ls[j].name)
				}
			}
		}
	}
	return out
}

func (r *JobRecorder) add(job *batchv1.Job, deleted bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.first[job.UID]; !ok {
		r.first[job.UID] = time.Now()
		r.order = append(r.order, job.Labels[v1alpha1.LabelTask])
	}
	if deleted {
		r.gone[job.UID] = time.Now()
	}
	// Keep the newest version; a deletion event carries the last one.
	r.seen[job.UID] = *job.DeepCopy()
	a := runs.AttemptOf(job, 1)
	if active := !deleted && a.Phase == runs.Active; active {
		r.active[job.UID] = true
	} else {
		delete(r.active, job.UID)
	}
	if r.active[job.UID] && !a.Held {
		r.running[job.UID] = true
		if !r.started[job.UID] {
			r.started[job.UID] = true
			r.startOrder = append(r.startOrder, job.Labels[v1alpha1.LabelTask])
		}
	} else {
		delete(r.running, job.UID)
	}
	r.maxActive = max(r.maxActive, len(r.active))
	r.maxRunning = max(r.maxRunning, len(r.running))
}

// StartOrder is the Tasks of the Jobs seen, in the order each Job was
// first seen running (not held suspended).
func (r *JobRecorder) StartOrder() []string {
	return locked(&r.mu, func() []string { return append([]string(nil), r.startOrder...) })
}

// MaxRunning is the most active Jobs not held suspended at any Job event
// seen: what a Kueue quota caps.
func (r *JobRecorder) MaxRunning() int {
	return locked(&r.mu, func() int { return r.maxRunning })
}

// MaxActive is the most Jobs whose attempt was active (a Job that exists
// and has not finished or been stopped) at any Job event seen: what a
// queue's maxRunning caps.
func (r *JobRecorder) MaxActive() int {
	return locked(&r.mu, func() int { return r.maxActive })
}

// Order is the Tasks of the Jobs seen, in the order their Jobs were first
// seen (created).
func (r *JobRecorder) Order() []string {
	return locked(&r.mu, func() []string { return append([]string(nil), r.order...) })
}

// Stop stops recording (idempotent).
func (r *JobRecorder) Stop() {
	r.cancel()
	<-r.done
}

// Snapshot returns every Job seen so far plus a fresh listing, without
// stopping.
func (r *JobRecorder) Snapshot(ctx context.Context) ([]batchv1.Job, error) {
	var list batchv1.JobList
	if err := r.c.List(ctx, &list, client.InNamespace(r.ns)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		r.add(&list.Items[i], false)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]batchv1.Job, 0, len(r.seen))
	for _, j := range r.seen {
		out = append(out, j)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].CreationTimestamp.Before(&out[j].CreationTimestamp)
	})
	return out, nil
}

// All stops recording and returns every Job seen (plus a last listing).
func (r *JobRecorder) All(t testing.TB) []batchv1.Job {
	t.Helper()
	r.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := r.Snapshot(ctx)
	if err != nil {
		t.Fatalf("listing Jobs: %v", err)
	}
	return out
}

// Duplicates groups the Jobs by attempt and returns the attempts that had
// more than one Job (by UID), each with its Jobs' "name(uid)".
func Duplicates(jobs []batchv1.Job) map[JobKey][]string {
	byKey := map[JobKey][]string{}
	for i := range jobs {
		k := KeyOf(&jobs[i])
		byKey[k] = append(byKey[k], jobs[i].Name+"("+string(jobs[i].UID)+")")
	}
	for k, js := range byKey {
		if len(js) < 2 {
			delete(byKey, k)
		}
	}
	return byKey
}

// StatusMonitor watches the Tasks of a namespace and records every step
// backwards it sees in their status: a run's attempts going down, the
// history getting shorter, a run disappearing from a history that is not
// full, a run's recorded attempts going down, a finished run turning back,
// and a finished one-shot Task leaving its final phase for the same run.
// It sees every update the API server sends, not samples.
type StatusMonitor struct {
	mu       sync.Mutex
	last     map[string]v1alpha1.Task
	problems []string
	events   int
	cancel   context.CancelFunc
	done     chan struct{}
}

// MonitorStatus starts watching the Tasks of namespace ns; the test's
// cleanup stops it.
func MonitorStatus(t testing.TB, c client.WithWatch, ns string) *StatusMonitor {
	ctx, cancel := context.WithCancel(context.Background())
	m := &StatusMonitor{last: map[string]v1alpha1.Task{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			w, err := c.Watch(ctx, &v1alpha1.TaskList{}, client.InNamespace(ns))
			if err != nil {
				time.Sleep(PollInterval)
				continue
			}
			for ev := range w.ResultChan() {
				task, ok := ev.Object.(*v1alpha1.Task)
				if !ok {
					continue
				}
				switch ev.Type {
				case watch.Added, watch.Modified:
					m.Observe(task)
				case watch.Deleted:
					m.forget(task)
				}
			}
			w.Stop()
		}
	}()
	t.Cleanup(m.Stop)
	return m
}

func (m *StatusMonitor) forget(task *v1alpha1.Task) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.last[task.Name]; ok && old.UID == task.UID {
		delete(m.last, task.Name)
	}
}

var finalResult = map[v1alpha1.RunResult]bool{
	v1alpha1.RunResultSucceeded: true, v1alpha1.RunResultFailed: true, v1alpha1.RunResultStopped: true,
}

// Observe compares one Task with the last version seen.
func (m *StatusMonitor) Observe(task *v1alpha1.Task) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events++
	old, ok := m.last[task.Name]
	if ok && old.UID == task.UID {
		// A re-watch replays the current state: never older than what was seen.
		if rvOlder(task.ResourceVersion, old.ResourceVersion) {
			return
		}
		m.problems = append(m.problems, compareStatus(task.Name, task.Spec.Schedule == nil, &old.Status, &task.Status)...)
	}
	m.last[task.Name] = *task.DeepCopy()
}

// rvOlder: resource versions are opaque, but etcd's are integers; compare
// them as such when they are.
func rvOlder(a, b string) bool {
	var x, y uint64
	if _, err := fmt.Sscan(a, &x); err != nil {
		return false
	}
	if _, err := fmt.Sscan(b, &y); err != nil {
		return false
	}
	return x < y
}

func compareStatus(name string, oneShot bool, old, now *v1alpha1.TaskStatus) []string {
	var p []string
	if old.CurrentRun == now.CurrentRun && now.Attempts < old.Attempts {
		p = append(p, fmt.Sprintf("%s: attempts of run %q went from %d to %d", name, now.CurrentRun, old.Attempts, now.Attempts))
	}
	if len(now.History) < len(old.History) {
		p = append(p, fmt.Sprintf("%s: history shrank from %d to %d runs", name, len(old.History), len(now.History)))
	}
	byID := map[string]v1alpha1.RunRecord{}
	for _, h := range now.History {
		byID[h.RunID] = h
	}
	for _, o := range old.History {
		n, ok := byID[o.RunID]
		if !ok {
			if len(now.History) < 10 {
				p = append(p, fmt.Sprintf("%s: run %q left a history of %d runs", name, o.RunID, len(now.History)))
			}
			continue
		}
		if n.Attempts < o.Attempts {
			p = append(p, fmt.Sprintf("%s: history of run %q: attempts went from %d to %d", name, o.RunID, o.Attempts, n.Attempts))
		}
		if finalResult[o.Result] && n.Result != o.Result {
			p = append(p, fmt.Sprintf("%s: history of run %q: result went from %s to %s", name, o.RunID, o.Result, n.Result))
		}
	}
	final := func(ph v1alpha1.TaskPhase) bool { return ph == v1alpha1.PhaseSucceeded || ph == v1alpha1.PhaseFailed }
	if oneShot && old.CurrentRun != "" && old.CurrentRun == now.CurrentRun && final(old.Phase) && now.Phase != old.Phase {
		p = append(p, fmt.Sprintf("%s: run %q: phase went from %s to %s", name, now.CurrentRun, old.Phase, now.Phase))
	}
	return p
}

// Stop stops watching (idempotent).
func (m *StatusMonitor) Stop() {
	m.cancel()
	<-m.done
}

// Problems are the steps backwards seen so far.
func (m *StatusMonitor) Problems() []string {
	return locked(&m.mu, func() []string { return append([]string(nil), m.problems...) })
}

// Events counts the Task versions seen.
func (m *StatusMonitor) Events() int {
	return locked(&m.mu, func() int { return m.events })
}

// Check stops the monitor and reports what it saw go backwards.
func (m *StatusMonitor) Check(t testing.TB) {
	t.Helper()
	m.Stop()
	for _, p := range m.Problems() {
		t.Errorf("status went backwards: %s", p)
	}
}

// locked reads a recorder's field under its mutex.
func locked[T any](mu *sync.Mutex, get func() T) T {
	mu.Lock()
	defer mu.Unlock()
	return get()
}
