package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// writeSnap is the state of the write counters at one moment.
type writeSnap struct {
	at  time.Time
	cpu cpuTimes // the whole machine's, from /proc/stat
	api metrics  // the API server's /metrics
	op  metrics  // the operator's /metrics; nil when none runs
}

func takeSnap(ctx context.Context, cl *cluster, op *operator) (writeSnap, error) {
	s := writeSnap{at: time.Now(), cpu: readCPUTimes()}
	var err error
	if s.api, err = cl.apiMetrics(ctx); err != nil {
		return s, err
	}
	if op != nil {
		if s.op, err = op.metrics(ctx); err != nil {
			return s, err
		}
	}
	return s, nil
}

// settledSnap waits o.settle, so the last writes of a measured step land,
// then takes the closing snapshot.
func settledSnap(ctx context.Context, o *options, cl *cluster, op *operator) (writeSnap, error) {
	if err := sleepUntil(ctx, time.Now().Add(o.settle)); err != nil {
		return writeSnap{}, err
	}
	return takeSnap(ctx, cl, op)
}

// writeCount is one controller's API writes (creates, updates, patches,
// deletes) in a window: by resource for the objects it manages, and events
// and leases apart.
type writeCount struct {
	method string             // "audit log" or "metrics"
	core   map[string]float64 // by resource key; events and leases excluded
	events float64
	leases float64
	// conflicts are the core writes refused with 409 Conflict (optimistic
	// locking), included in core.
	conflicts float64
	// reconciles is the operator's controller_runtime_reconcile_total diff.
	reconciles float64
	// reads are its get and list requests by resource key (audit log
	// only: nil in metrics mode).
	reads map[string]float64
}

// readTotal is the reads of all resources; NaN when not counted.
func (w writeCount) readTotal() float64 {
	if w.reads == nil {
		return math.NaN()
	}
	var t float64
	for _, v := range w.reads {
		t += v
	}
	return t
}

func (w writeCount) total() float64 {
	var t float64
	for _, v := range w.core {
		t += v
	}
	return t
}

// breakdown prints the core writes by resource: "jobs 1000, tasks 1000, tasks/status 2000".
func (w writeCount) breakdown(per float64) string { return breakdown(w.core, per) }

// breakdown prints counts by resource, each divided by per.
func breakdown(counts map[string]float64, per float64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %s", k, fmtNum(counts[k]/per)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func isEventsOrLeases(k string) bool { return k == "events" || k == "leases" }

// operatorCoreResources are what the operator writes besides events and
// leases. In metrics mode they are counted from the API server, where
// nothing else writes them during the benchmark's windows (the Job
// controller writes jobs/status, a separate subresource).
var operatorCoreResources = []string{"jobs", "tasks", "tasks/status", "taskqueues/status"}

// auditWrites adds to w what who wrote between two snapshots, from the
// audit log: conflicts (events and leases apart), events, leases, and the
// rest by resource.
func auditWrites(cl *cluster, who actor, before, after writeSnap, w writeCount) (writeCount, error) {
	counts, err := countAuditFile(cl.audit, before.at, after.at)
	if err != nil {
		return w, err
	}
	w.method = "audit log"
	w.reads = map[string]float64{}
	for k, v := range counts[who] {
		switch {
		case strings.HasPrefix(k, readPrefix):
			w.reads[strings.TrimPrefix(k, readPrefix)] += v
		case strings.HasPrefix(k, conflictPrefix):
			if !isEventsOrLeases(strings.TrimPrefix(k, conflictPrefix)) {
				w.conflicts += v
			}
		case k == "events":
			w.events += v
		case k == "leases":
			w.leases += v
		default:
			w.core[k] += v
		}
	}
	return w, nil
}

// operatorWrites counts the operator's writes between two snapshots.
// benchWrites are the benchmark's own writes to the same resources in the
// window (subtracted in metrics mode, where requests carry no author).
func operatorWrites(cl *cluster, before, after writeSnap, benchWrites map[string]float64) (writeCount, error) {
	w := writeCount{core: map[string]float64{}}
	if before.op != nil && after.op != nil {
		w.reconciles = after.op.Sum("controller_runtime_reconcile_total", nil) - before.op.Sum("controller_runtime_reconcile_total", nil)
	}
	if cl.audit != "" {
		return auditWrites(cl, actorOperator, before, after, w)
	}
	w.addAPIWrites(before, after, operatorCoreResources, benchWrites)
	// Everything else the operator wrote: events (no leader election, so no
	// leases). The operator's own client counts every request it sent.
	opTotal := clientWrites(after.op) - clientWrites(before.op)
	w.events = math.Max(opTotal-w.total(), 0)
	return w, nil
}

// addAPIWrites counts, from the API server's request metrics between two
// snapshots, the writes to resources and their conflicts, less what
// others wrote to them (by resource; nil: nothing).
func (w *writeCount) addAPIWrites(before, after writeSnap, resources []string, others map[string]float64) {
	w.method = "metrics"
	d := diffMap(apiWrites(before.api), apiWrites(after.api))
	c := diffMap(apiConflicts(before.api), apiConflicts(after.api))
	for _, k := range resources {
		if v := d[k] - others[k]; v != 0 {
			w.core[k] = v
		}
		w.conflicts += c[k]
	}
}

// cronJobControllerResources are what the CronJob controller writes besides
// events; nothing else writes them during a CronJob window.
var cronJobControllerResources = []string{"jobs", "cronjobs", "cronjobs/status"}

// cronJobWrites counts the CronJob controller's writes between two
// snapshots. In metrics mode its events are counted from the Event objects
// about CronJobs in namespace (each created once and patched count-1 times).
func cronJobWrites(ctx context.Context, cl *cluster, namespace string, before, after writeSnap) (writeCount, error) {
	w := writeCount{core: map[string]float64{}}
	if cl.audit != "" {
		return auditWrites(cl, actorCronJob, before, after, w)
	}
	w.addAPIWrites(before, after, cronJobControllerResources, nil)
	var evs corev1.EventList
	if err := cl.c.List(ctx, &evs, client.InNamespace(namespace)); err != nil {
		return w, err
	}
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind != "CronJob" {
			continue
		}
		last := e.LastTimestamp.Time
		if last.IsZero() {
			last = e.EventTime.Time
		}
		// Second resolution: an event in the second the window opened counts.
		if last.Before(before.at.Truncate(time.Second)) {
			continue
		}
		w.events += math.Max(float64(e.Count), 1)
	}
	return w, nil
}
