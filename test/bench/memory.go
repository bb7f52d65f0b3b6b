package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/test/harness"
)

// Memory: the operator's RSS and Go heap at 0, N and 5N finished Tasks.

type memPoint struct {
	tasks, jobs int
	rss, heap   float64 // bytes
	// scrape is the size of one scrape of the operator's metrics (bytes),
	// taskSeries how many of its series are per-Task ones (the
	// cardinality spec.notify's metrics add).
	scrape, taskSeries float64
}

type memResult struct{ points []memPoint }

// slope is MiB per 1000 Tasks between points i and j.
func (m memResult) slope(i, j int, heap bool) float64 {
	if len(m.points) <= max(i, j) {
		return math.NaN()
	}
	a, b := m.points[i], m.points[j]
	va, vb := a.rss, b.rss
	if heap {
		va, vb = a.heap, b.heap
	}
	return (vb - va) / (1 << 20) / (float64(b.tasks-a.tasks) / 1000)
}

func sessionMemory(ctx context.Context, o *options, rep int) (*memResult, error) {
	s := o.fastKCM()
	s.nodePods = max(s.nodePods, 5*o.n+100)
	ss, err := startSession(ctx, o, s, benchNamespace, fmt.Sprintf("memory-%d", rep))
	defer ss.end(ctx, o)
	if err != nil {
		return nil, err
	}
	cl, op, tr := ss.cl, ss.op, ss.tr

	res := &memResult{}
	measure := func(tasks int) error {
		p, err := measureMemory(ctx, o, op, tr, fmt.Sprintf("memory-%d-%d", rep, tasks), tasks)
		if err == nil {
			res.points = append(res.points, p)
		}
		return err
	}
	if err := measure(0); err != nil {
		return nil, err
	}
	total := 0
	for _, add := range []int{o.n, 4 * o.n} {
		base := total
		if _, _, err := createAll(ctx, cl.c, add, o.workers, func(i int) client.Object {
			return oneShotTask(benchNamespace, fmt.Sprintf("mem-%06d", base+i))
		}); err != nil {
			return nil, err
		}
		total += add
		want := total
		if err := tr.waitFor(ctx, o, fmt.Sprintf("%d Tasks Ready", want), o.timeout(15*time.Minute), func(_, ready, _, _, _ int) bool { return ready >= want }); err != nil {
			return nil, err
		}
		if err := measure(total); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// measureMemory is the operator's memory with tasks Tasks in the cluster:
// after a pause, three samples a second apart, each after a forced GC (the
// median), the first heap profile kept as label.heap.pprof; and the size
// of one metrics scrape with its per-Task series.
func measureMemory(ctx context.Context, o *options, op *operator, tr *tracker, label string, tasks int) (memPoint, error) {
	p := memPoint{tasks: tasks}
	if err := sleepUntil(ctx, time.Now().Add(2*o.settle)); err != nil {
		return p, err
	}
	var rss, heap []float64
	for i := range 3 {
		save := ""
		if i == 0 {
			save = filepath.Join(o.workDir, "profiles", label+".heap.pprof")
		}
		r, h, err := op.memory(ctx, save)
		if err != nil {
			return p, err
		}
		rss, heap = append(rss, r), append(heap, h)
		time.Sleep(time.Second)
	}
	_, _, _, p.jobs, _ = tr.counts()
	p.rss, p.heap = harness.Median(rss), harness.Median(heap)
	body, err := op.get(ctx, op.MetricsURL())
	if err != nil {
		return p, err
	}
	p.scrape = float64(len(body))
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "taskoperator_task_") {
			p.taskSeries++
		}
	}
	o.logf("memory: %d Tasks, %d Jobs: RSS %.1f MiB, heap %.1f MiB; metrics scrape %.0f KiB with %.0f per-Task series",
		tasks, p.jobs, p.rss/(1<<20), p.heap/(1<<20), p.scrape/1024, p.taskSeries)
	return p, nil
}
