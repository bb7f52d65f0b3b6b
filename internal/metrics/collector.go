package metrics

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/scheduler"
)

// cacheCollector computes the gauges that describe objects from the
// manager's cache at scrape time: Tasks by phase, each Task's own series
// and each TaskQueue's depth. Computed when scraped, they are always true,
// cost no memory between scrapes (series held in a GaugeVec cost about a
// kilobyte each, measured at 5000 Tasks), and a deleted Task's series go
// with it. The lists share the cache's objects (UnsafeDisableDeepCopy):
// read, never changed.
//
// Only the replica that leads exports them: a standby's scrape would
// otherwise start a Task informer of its own and export the same series,
// so every sum over replicas counted twice and an alert fired once per
// replica. A standby exports taskoperator_leader 0 and nothing read from
// the cache.
type cacheCollector struct {
	reader client.Reader
	// perTask says which Tasks get their own series.
	perTask PerTask
	// elected is closed once this replica leads (the manager's Elected()).
	elected <-chan struct{}
}

var (
	leaderDesc = prometheus.NewDesc(namespace+"_leader", "1 on the replica that leads and exports the per-Task and per-queue gauges, 0 on a standby.", nil, nil)
	tasksDesc  = prometheus.NewDesc(namespace+"_tasks", "Tasks by phase.", []string{"phase"}, nil)

	// Per Task (namespace, task). A series whose value the Task does not
	// have (no run ended yet, no success yet, a one-shot Task's next slot)
	// is absent rather than 0, so `time() - x` alerts mean what they say.
	taskLabels         = []string{"namespace", "task"}
	taskLastRunSuccess = prometheus.NewDesc(namespace+"_task_last_run_success",
		"1 if the Task's newest run that ended in success or failure succeeded, 0 if it failed.", taskLabels, nil)
	taskLastSuccess = prometheus.NewDesc(namespace+"_task_last_success_timestamp_seconds",
		"When a run of the Task last succeeded (Unix seconds).", taskLabels, nil)
	taskConsecutiveFailures = prometheus.NewDesc(namespace+"_task_consecutive_failures",
		"Runs of the Task that failed in a row since its last success or spec change (status.consecutiveFailures).", taskLabels, nil)
	taskNextSchedule = prometheus.NewDesc(namespace+"_task_next_schedule_timestamp_seconds",
		"The next slot of a cron Task that will start a run (Unix seconds); absent while suspended.", taskLabels, nil)
	taskSchedulePeriod = prometheus.NewDesc(namespace+"_task_schedule_period_seconds",
		"Seconds between a cron Task's next slot and the one after it: what 'N periods without success' alerts compare with.", taskLabels, nil)

	// Per TaskQueue (namespace, queue).
	queueLabels      = []string{"namespace", "queue"}
	queueMaxDesc     = prometheus.NewDesc(namespace+"_queue_max_running", "A TaskQueue's spec.maxRunning.", queueLabels, nil)
	queueRunningDesc = prometheus.NewDesc(namespace+"_queue_running", "Attempts a TaskQueue admitted that have not finished (its status.running).", queueLabels, nil)
	queueQueuedDesc  = prometheus.NewDesc(namespace+"_queue_queued", "Attempts waiting for a TaskQueue's admission.", queueLabels, nil)
	queueOldestDesc  = prometheus.NewDesc(namespace+"_queue_oldest_queued_timestamp_seconds",
		"Since when the longest-waiting attempt of a TaskQueue waits (Unix seconds); absent when none waits.", queueLabels, nil)
)

func (c *cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{leaderDesc, tasksDesc, taskLastRunSuccess, taskLastSuccess, taskConsecutiveFailures, taskNextSchedule,
		taskSchedulePeriod, queueMaxDesc, queueRunningDesc, queueQueuedDesc, queueOldestDesc} {
		ch <- d
	}
}

func (c *cacheCollector) Collect(ch chan<- prometheus.Metric) {
	select {
	case <-c.elected:
		ch <- prometheus.MustNewConstMetric(leaderDesc, prometheus.GaugeValue, 1)
	default:
		ch <- prometheus.MustNewConstMetric(leaderDesc, prometheus.GaugeValue, 0)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var tasks v1alpha1.TaskList
	if err := c.reader.List(ctx, &tasks, client.UnsafeDisableDeepCopy); err != nil {
		ch <- prometheus.NewInvalidMetric(tasksDesc, err)
		return
	}
	counts := map[v1alpha1.TaskPhase]int{}
	for _, phase := range []v1alpha1.TaskPhase{v1alpha1.PhasePending, v1alpha1.PhaseQueued, v1alpha1.PhaseRunning, v1alpha1.PhaseRetrying,
		v1alpha1.PhaseSucceeded, v1alpha1.PhaseFailed, v1alpha1.PhaseScheduled, v1alpha1.PhaseSuspended} {
		counts[phase] = 0
	}
	for i := range tasks.Items {
		t := &tasks.Items[i]
		phase := t.Status.Phase
		if phase == "" {
			phase = v1alpha1.PhasePending
		}
		counts[phase]++
		if c.perTask.selects(t) {
			c.collectTask(ch, t)
		}
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(tasksDesc, prometheus.GaugeValue, float64(n), string(phase))
	}
	c.collectQueues(ctx, ch, tasks.Items)
}

// PerTask says which Tasks get their own series (--task-metrics): three to
// five per Task, about 250 KiB of scrape per 1000 Tasks (docs/install.md,
// "Metrics"). Tasks by phase and the queues' gauges are always exported.
type PerTask string

const (
	// PerTaskAll exports every Task's series (the default).
	PerTaskAll PerTask = "all"
	// PerTaskLabelled exports them for Tasks labelled
	// batch.taskops.io/metrics=true only.
	PerTaskLabelled PerTask = "labelled"
	// PerTaskNone exports none.
	PerTaskNone PerTask = "none"
)

// ParsePerTask reads a --task-metrics value.
func ParsePerTask(s string) (PerTask, error) {
	switch p := PerTask(s); p {
	case PerTaskAll, PerTaskLabelled, PerTaskNone:
		return p, nil
	}
	return "", fmt.Errorf("--task-metrics must be all, labelled or none, not %q", s)
}

func (p PerTask) selects(t *v1alpha1.Task) bool {
	switch p {
	case PerTaskNone:
		return false
	case PerTaskLabelled:
		return t.Labels[v1alpha1.LabelMetrics] == "true"
	}
	return true
}

// collectTask sends one Task's own series.
func (c *cacheCollector) collectTask(ch chan<- prometheus.Metric, t *v1alpha1.Task) {
	st := &t.Status
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, t.Namespace, t.Name)
	}
	gauge(taskConsecutiveFailures, float64(st.ConsecutiveFailures))
	if v, ok := lastRunSuccess(st); ok {
		gauge(taskLastRunSuccess, v)
	}
	if st.LastSuccessfulTime != nil {
		gauge(taskLastSuccess, float64(st.LastSuccessfulTime.Unix()))
	}
	if next, period, ok := c.nextSlot(t); ok {
		gauge(taskNextSchedule, next)
		if period > 0 {
			gauge(taskSchedulePeriod, period)
		}
	}
}

// lastRunSuccess is 1 or 0 for the newest run that succeeded or failed for
// good; a stopped or cancelled run says nothing of the work.
func lastRunSuccess(st *v1alpha1.TaskStatus) (float64, bool) {
	for _, h := range st.History {
		switch h.Result {
		case v1alpha1.RunResultSucceeded:
			return 1, true
		case v1alpha1.RunResultFailed:
			return 0, true
		}
	}
	return 0, false
}

// nextSlot is a cron Task's next slot that will start a run and the
// period after it (0 when the schedule does not parse); ok is false for a
// one-shot Task and while no slot will start (suspended, or stopped by its
// failure streak).
func (c *cacheCollector) nextSlot(t *v1alpha1.Task) (next, period float64, ok bool) {
	spec, st := &t.Spec, &t.Status
	if spec.Schedule == nil || st.NextScheduleTime == nil || ptr.Deref(spec.Suspend, false) ||
		scheduler.TooManyFailures(spec, st.ConsecutiveFailures) {
		return 0, 0, false
	}
	at := st.NextScheduleTime.Time
	next = float64(at.Unix())
	s, err := scheduler.ParseCached(*spec.Schedule, ptr.Deref(spec.TimeZone, ""))
	if err != nil {
		return next, 0, true
	}
	return next, s.Next(at).Sub(at).Seconds(), true
}

// collectQueues sends each TaskQueue's depth; tasks are the cached Tasks,
// whose status.queued says who waits since when.
func (c *cacheCollector) collectQueues(ctx context.Context, ch chan<- prometheus.Metric, tasks []v1alpha1.Task) {
	var queues v1alpha1.TaskQueueList
	if err := c.reader.List(ctx, &queues, client.UnsafeDisableDeepCopy); err != nil {
		ch <- prometheus.NewInvalidMetric(queueQueuedDesc, err)
		return
	}
	if len(queues.Items) == 0 {
		return
	}
	type key struct{ ns, name string }
	waiting, oldest := map[key]int{}, map[key]time.Time{}
	for i := range tasks {
		t := &tasks[i]
		if t.Spec.QueueName == "" {
			continue
		}
		k := key{t.Namespace, t.Spec.QueueName}
		for _, q := range t.Status.Queued {
			waiting[k]++
			if o, ok := oldest[k]; !ok || q.Since.Time.Before(o) {
				oldest[k] = q.Since.Time
			}
		}
	}
	for i := range queues.Items {
		q := &queues.Items[i]
		k := key{q.Namespace, q.Name}
		ch <- prometheus.MustNewConstMetric(queueMaxDesc, prometheus.GaugeValue, float64(q.Spec.MaxRunning), q.Namespace, q.Name)
		ch <- prometheus.MustNewConstMetric(queueRunningDesc, prometheus.GaugeValue, float64(q.Status.Running), q.Namespace, q.Name)
		ch <- prometheus.MustNewConstMetric(queueQueuedDesc, prometheus.GaugeValue, float64(waiting[k]), q.Namespace, q.Name)
		if o, ok := oldest[k]; ok {
			ch <- prometheus.MustNewConstMetric(queueOldestDesc, prometheus.GaugeValue, float64(o.UnixNano())/1e9, q.Namespace, q.Name)
		}
	}
}
