package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// The tracker watches Tasks and Jobs in one namespace and notes, with the
// benchmark's own clock, when it first saw each object and each state of
// interest. Object timestamps (creationTimestamp, condition times) have
// one-second resolution, too coarse for latencies of a few hundred
// milliseconds; watch events arrive within milliseconds, and a latency is
// the difference of two watch observations, so the watch delay cancels.

type taskTrack struct {
	seen, ready time.Time
	queued      time.Time // first seen waiting in its queue (status.queued)
	priority    int32
	next        time.Time // status.nextScheduleTime, once set
	// shown is when each run id first appeared in status.history.
	shown map[string]time.Time
	// finished: when each run id first showed in status.history with a
	// final result.
	finished map[string]time.Time
}

// cronJobTrack is a CronJob's status as last seen, and when it was first
// seen with no active Job and its current lastSuccessfulTime: when the
// CronJob controller had recorded that success.
type cronJobTrack struct {
	active        int
	lastSucceeded time.Time // status.lastSuccessfulTime
	recorded      time.Time
}

type jobTrack struct {
	seen, complete time.Time
	task, run      string    // the operator's labels
	admitted       time.Time // when its queue's record first listed it (snapshot only)
	cronJob        string    // the owning CronJob, if any
	scheduled      time.Time // the CronJob's slot (annotation), if any
}

type tracker struct {
	mu    sync.Mutex
	tasks map[string]*taskTrack
	jobs  map[string]*jobTrack
	// admitted holds, by Job name, when a TaskQueue's admission record
	// first listed it.
	admitted map[string]time.Time
	cronJobs map[string]cronJobTrack
	// inLine holds the Tasks seen waiting in their queue's line
	// (status.queued) or with a Job (lined).
	inLine map[string]bool
	stop   context.CancelFunc
	// onComplete, when set, is called (under the tracker's lock) each time
	// a Job is first seen complete: a closed-loop load generator's signal.
	onComplete func()
}

// cronJobScheduledAnnotation is the slot the CronJob controller records on
// the Jobs it creates.
const cronJobScheduledAnnotation = "batch.kubernetes.io/cronjob-scheduled-timestamp"

func startTracker(ctx context.Context, cl *cluster, namespace string, withTasks bool) (*tracker, error) {
	return startTrackerIn(ctx, cl, []string{namespace}, withTasks)
}

// startTrackerIn tracks several namespaces at once (object names must
// differ across them).
func startTrackerIn(ctx context.Context, cl *cluster, namespaces []string, withTasks bool) (*tracker, error) {
	nss := map[string]cache.Config{}
	for _, ns := range namespaces {
		nss[ns] = cache.Config{}
	}
	c, err := cache.New(cl.cfg, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: nss,
		DefaultTransform:  cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, err
	}
	t := newTracker()
	objs := []client.Object{&batchv1.Job{}}
	if withTasks {
		objs = append(objs, &v1alpha1.Task{}, &v1alpha1.TaskQueue{})
	} else {
		objs = append(objs, &batchv1.CronJob{})
	}
	for _, obj := range objs {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { t.observe(o) },
			UpdateFunc: func(_, o any) { t.observe(o) },
		}); err != nil {
			return nil, err
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	t.stop = cancel
	go func() { _ = c.Start(cctx) }()
	sctx, scancel := context.WithTimeout(ctx, time.Minute)
	defer scancel()
	if !c.WaitForCacheSync(sctx) {
		cancel()
		return nil, fmt.Errorf("the benchmark's watches did not sync")
	}
	return t, nil
}

func newTracker() *tracker {
	return &tracker{tasks: map[string]*taskTrack{}, jobs: map[string]*jobTrack{}, admitted: map[string]time.Time{}, cronJobs: map[string]cronJobTrack{}, inLine: map[string]bool{}}
}

func (t *tracker) observe(o any) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	switch obj := o.(type) {
	case *v1alpha1.TaskQueue:
		for _, name := range obj.Status.Admitted {
			if _, ok := t.admitted[name]; !ok {
				t.admitted[name] = now
			}
		}
	case *v1alpha1.Task:
		tt := t.tasks[obj.Name]
		if tt == nil {
			tt = &taskTrack{seen: now}
			t.tasks[obj.Name] = tt
		}
		if tt.ready.IsZero() && meta.IsStatusConditionTrue(obj.Status.Conditions, v1alpha1.ConditionReady) {
			tt.ready = now
		}
		if tt.queued.IsZero() && len(obj.Status.Queued) > 0 {
			tt.queued = now
			t.inLine[obj.Name] = true
		}
		tt.priority = obj.Spec.Priority
		if tt.next.IsZero() && obj.Status.NextScheduleTime != nil {
			tt.next = obj.Status.NextScheduleTime.Time
		}
		for _, h := range obj.Status.History {
			if tt.shown == nil {
				tt.shown = map[string]time.Time{}
			}
			if _, ok := tt.shown[h.RunID]; !ok {
				tt.shown[h.RunID] = now
			}
			if h.Result != "" && h.Result != v1alpha1.RunResultRunning {
				if tt.finished == nil {
					tt.finished = map[string]time.Time{}
				}
				if _, ok := tt.finished[h.RunID]; !ok {
					tt.finished[h.RunID] = now
				}
			}
		}
	case *batchv1.CronJob:
		prev := t.cronJobs[obj.Name]
		ct := cronJobTrack{active: len(obj.Status.Active), recorded: prev.recorded}
		if obj.Status.LastSuccessfulTime != nil {
			ct.lastSucceeded = obj.Status.LastSuccessfulTime.Time
		}
		if ct.active == 0 && !ct.lastSucceeded.IsZero() && (prev.recorded.IsZero() || !ct.lastSucceeded.Equal(prev.lastSucceeded)) {
			ct.recorded = now
		}
		t.cronJobs[obj.Name] = ct
	case *batchv1.Job:
		jt := t.jobs[obj.Name]
		if jt == nil {
			jt = &jobTrack{seen: now, task: obj.Labels[v1alpha1.LabelTask], run: obj.Labels[v1alpha1.LabelRun]}
			if jt.task != "" {
				t.inLine[jt.task] = true
			}
			for _, ref := range obj.OwnerReferences {
				if ref.Kind == "CronJob" {
					jt.cronJob = ref.Name
				}
			}
			if s, ok := obj.Annotations[cronJobScheduledAnnotation]; ok {
				jt.scheduled, _ = time.Parse(time.RFC3339, s)
			}
			t.jobs[obj.Name] = jt
		}
		if jt.complete.IsZero() {
			for _, c := range obj.Status.Conditions {
				if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
					jt.complete = now
					if t.onComplete != nil {
						t.onComplete()
					}
				}
			}
		}
	}
}

// counts: Tasks seen, Tasks Ready, Tasks with a nextScheduleTime, Jobs
// seen, Jobs complete.
func (t *tracker) counts() (tasks, ready, scheduled, jobs, complete int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tt := range t.tasks {
		tasks++
		if !tt.ready.IsZero() {
			ready++
		}
		if !tt.next.IsZero() {
			scheduled++
		}
	}
	for _, jt := range t.jobs {
		jobs++
		if !jt.complete.IsZero() {
			complete++
		}
	}
	return
}

// lined counts the Tasks whose place in their queue's line was seen
// written (status.queued) or that have a Job (admitted, or started
// without waiting).
func (t *tracker) lined() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.inLine)
}

// runsFinished counts the Tasks whose status.history shows run runID
// with a final result, and the latest time one first did.
func (t *tracker) runsFinished(runID string) (n int, last time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tt := range t.tasks {
		if at, ok := tt.finished[runID]; ok {
			n++
			if at.After(last) {
				last = at
			}
		}
	}
	return n, last
}

// cronJobsDone counts the CronJobs with no active Job whose last success
// is at or after slot (the CronJob controller has recorded the slot's run
// as finished), and the latest time one was first seen so.
func (t *tracker) cronJobsDone(slot time.Time) (n int, last time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ct := range t.cronJobs {
		if ct.active == 0 && !ct.lastSucceeded.Before(slot) {
			n++
			if ct.recorded.After(last) {
				last = ct.recorded
			}
		}
	}
	return n, last
}

// snapshot copies the records (safe to read without the lock).
func (t *tracker) snapshot() (map[string]taskTrack, map[string]jobTrack) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ts := make(map[string]taskTrack, len(t.tasks))
	for k, v := range t.tasks {
		ts[k] = *v
	}
	js := make(map[string]jobTrack, len(t.jobs))
	for k, v := range t.jobs {
		jt := *v
		jt.admitted = t.admitted[k]
		js[k] = jt
	}
	return ts, js
}

// waitFor polls the tracker until cond holds; it reports progress through
// logf every 10 s.
// taskToJob is, for every Job whose Task was seen, the seconds from the
// Task seen to its Job seen: the burst's Task-to-Job latency, the
// operator's and the floor's alike.
func taskToJob(tasks map[string]taskTrack, jobs map[string]jobTrack) []float64 {
	var out []float64
	for _, j := range jobs {
		if t, ok := tasks[j.task]; ok {
			out = append(out, j.seen.Sub(t.seen).Seconds())
		}
	}
	return out
}

func (t *tracker) waitFor(ctx context.Context, o *options, what string, timeout time.Duration, cond func(tasks, ready, scheduled, jobs, complete int) bool) error {
	start := time.Now()
	lastLog := start
	err := poll(ctx, timeout, 50*time.Millisecond, func() (bool, error) {
		tasks, ready, scheduled, jobs, complete := t.counts()
		if cond(tasks, ready, scheduled, jobs, complete) {
			return true, nil
		}
		if time.Since(lastLog) > 10*time.Second {
			lastLog = time.Now()
			o.logf("  waiting for %s (%.0f s): Tasks %d (Ready %d, scheduled %d), Jobs %d (complete %d)",
				what, time.Since(start).Seconds(), tasks, ready, scheduled, jobs, complete)
		}
		return false, nil
	})
	if err != nil {
		tasks, ready, scheduled, jobs, complete := t.counts()
		return fmt.Errorf("waiting for %s: %w (Tasks %d, Ready %d, scheduled %d, Jobs %d, complete %d)",
			what, err, tasks, ready, scheduled, jobs, complete)
	}
	return nil
}

func (t *tracker) close() {
	if t != nil && t.stop != nil {
		t.stop()
	}
}

// shownAfter is how long after last every Task with a Job of run runID
// showed that run in its status (0 if all did by then; +Inf if one never
// did).
func (t *tracker) shownAfter(runID string, last time.Time) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	worst := 0.0
	for _, j := range t.jobs {
		if j.run != runID {
			continue
		}
		tt := t.tasks[j.task]
		if tt == nil {
			return math.Inf(1)
		}
		at, ok := tt.shown[runID]
		if !ok {
			return math.Inf(1)
		}
		worst = math.Max(worst, at.Sub(last).Seconds())
	}
	return worst
}
