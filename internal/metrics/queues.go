package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// queueCollector serves each TaskQueue's depth from the cache when scraped:
// its cap and running attempts (its status), how many attempts wait and
// since when the oldest waits (the Tasks' status.queued), for the
// dashboard and the backlog alert.
type queueCollector struct {
	reader client.Reader
}

var (
	queueLabels      = []string{"namespace", "queue"}
	queueMaxDesc     = prometheus.NewDesc(namespace+"_queue_max_running", "A TaskQueue's spec.maxRunning.", queueLabels, nil)
	queueRunningDesc = prometheus.NewDesc(namespace+"_queue_running", "Attempts a TaskQueue admitted that have not finished (its status.running).", queueLabels, nil)
	queueQueuedDesc  = prometheus.NewDesc(namespace+"_queue_queued", "Attempts waiting for a TaskQueue's admission.", queueLabels, nil)
	queueOldestDesc  = prometheus.NewDesc(namespace+"_queue_oldest_queued_timestamp_seconds",
		"Since when the longest-waiting attempt of a TaskQueue waits (Unix seconds); absent when none waits.", queueLabels, nil)
)

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueMaxDesc
	ch <- queueRunningDesc
	ch <- queueQueuedDesc
	ch <- queueOldestDesc
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var queues v1alpha1.TaskQueueList
	if err := c.reader.List(ctx, &queues); err != nil {
		ch <- prometheus.NewInvalidMetric(queueQueuedDesc, err)
		return
	}
	if len(queues.Items) == 0 {
		return // no Task list walk for clusters without queues
	}
	var tasks v1alpha1.TaskList
	if err := c.reader.List(ctx, &tasks); err != nil {
		ch <- prometheus.NewInvalidMetric(queueQueuedDesc, err)
		return
	}
	type key struct{ ns, name string }
	waiting, oldest := map[key]int{}, map[key]time.Time{}
	for i := range tasks.Items {
		t := &tasks.Items[i]
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
