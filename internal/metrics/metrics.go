// Package metrics defines the operator's own Prometheus metrics, served on
// the manager's metrics endpoint next to controller-runtime's: counters and
// histograms the reconciler adds to (metrics.go), and gauges computed from
// the manager's cache when scraped (collector.go): Tasks by phase, each
// Task's own series, each TaskQueue's depth.
package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/taskops/task-operator/api/v1alpha1"
)

const namespace = "taskoperator"

var (
	// RunsTotal counts finished runs by Task type and result.
	RunsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "runs_total",
		Help: "Runs that finished, by Task type and result (Succeeded, Failed, Stopped).",
	}, []string{"type", "result"})

	// AttemptsTotal counts attempts by Task type and outcome.
	AttemptsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "attempts_total",
		Help: "Attempts by Task type and outcome: started (a Job was created), failed, succeeded.",
	}, []string{"type", "outcome"})

	// RunDuration observes how long finished runs took, retries included.
	RunDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "run_duration_seconds",
		Help:    "Duration of finished runs from their first Job to their end, by Task type and result.",
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600},
	}, []string{"type", "result"})

	// ScheduleDelay observes how late a scheduled run's Job was created
	// after its slot.
	ScheduleDelay = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "schedule_start_delay_seconds",
		Help:    "Delay from a cron slot to the creation of its run's Job.",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
	})

	// RetriesScheduled counts retries the operator scheduled.
	RetriesScheduled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "retries_scheduled_total",
		Help: "Retries scheduled after a failed attempt, by Task type.",
	}, []string{"type"})

	// QueuedSlotsMissed counts cron slots skipped because their run was
	// still queued startingDeadlineSeconds after the slot.
	QueuedSlotsMissed = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: namespace, Name: "queued_slots_missed_total",
		Help: "Cron slots skipped because their run waited in its TaskQueue past startingDeadlineSeconds.",
	})

	// NotificationsTotal counts run notifications (spec.notify) by result.
	NotificationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "notifications_total",
		Help: "Run notifications (spec.notify) whose Job finished, by result: sent, failed.",
	}, []string{"result"})

	// EventsDropped counts Kubernetes Events the operator did not record
	// (internal/recorder): Events are a courtesy, never waited for.
	EventsDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "events_dropped_total",
		Help: "Kubernetes Events not recorded, by why: queue_full (more waiting than the recorder holds), refused (the API server refused one for good), gave_up (refused for a reason that may pass, every try), unreferenced (an object with no reference).",
	}, []string{"why"})
)

// The values of EventsDropped's label why.
const (
	EventQueueFull    = "queue_full"
	EventRefused      = "refused"
	EventGaveUp       = "gave_up"
	EventUnreferenced = "unreferenced"
)

// Collectors are the operator's own metrics; reader (the manager's cache)
// serves the gauges computed at scrape time (collector.go), and only once
// elected is closed (the manager's Elected(): this replica leads, or
// leader election is off).
func Collectors(reader client.Reader, elected <-chan struct{}, perTask PerTask) []prometheus.Collector {
	cs := []prometheus.Collector{RunsTotal, AttemptsTotal, RunDuration, ScheduleDelay, RetriesScheduled, QueuedSlotsMissed,
		NotificationsTotal, EventsDropped, &cacheCollector{reader: reader, elected: elected, perTask: perTask}}
	return cs
}

// Register adds the metrics to controller-runtime's registry (see
// Collectors).
func Register(reader client.Reader, elected <-chan struct{}, perTask PerTask) {
	ctrlmetrics.Registry.MustRegister(Collectors(reader, elected, perTask)...)
}

// RunFinished records a run that finished.
func RunFinished(taskType v1alpha1.TaskType, result v1alpha1.RunResult, took time.Duration) {
	RunsTotal.WithLabelValues(string(taskType), string(result)).Inc()
	RunDuration.WithLabelValues(string(taskType), string(result)).Observe(took.Seconds())
}
