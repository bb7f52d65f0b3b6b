package main

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/fastpath"
	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/reconciler"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/status"
)

// The CPU floor of the burst: the smallest program that makes the API
// traffic the operator must make for a one-shot Task, so that the
// operator's CPU per 1000 Tasks can be read against what that traffic alone
// costs a Go process on the same cluster. It is an oracle process in mode
// "floor" (oracle.go) and does, per Task, exactly what the burst counts of
// the operator (3 writes, 1 read):
//
//   - a watch of the namespace's Tasks and of its Jobs, through
//     controller-runtime's cache with the operator's own cache options
//     (reconciler.CacheOptions: managed fields stripped, Jobs trimmed), the
//     Jobs over protobuf as the operator's;
//   - the attempt's Job created (jobs.Build, as the operator builds it);
//   - the status computed with the operator's pure status.Compute and
//     written as the operator writes it (a merge patch of the status with
//     the resource version as a lock, its answer read as metadata), once
//     when the operator records a start (plan.RecordStartAt with the
//     operator's fastpath.RecordStartDelay: 2 to 3 s after the Job, or
//     never for a run that ends before) and once when it finished;
//   - the finished attempt's pods listed once (the operator reads their
//     output for the status);
//   - no patch from a cached Task older than its own last write (the
//     operator's shortcuts keep it from those too), so its patches are
//     not inflated by 409s.
//
// It orders its work as the operator's queue does (fastpath's priorities:
// a new Task's Job first, then a finished Job's record, then the rest), so
// that its timings bound what the operator's could be. What it leaves out
// is the operator's own work: the plan, the observers, events, metrics,
// the other shortcuts. It runs
// with the operator's GC target (cmd/manager's defaultGCPercent, 50) and no
// client-side limit, 32 workers, and reports its CPU (user + system) from
// its caches' sync to its N-th finished status, and its live heap and RSS
// growth over the same span (each after a forced GC).

const (
	oracleFloor oracleMode = "floor"
	// floorGCPercent is cmd/manager's defaultGCPercent.
	floorGCPercent = 50
	floorUserAgent = "task-operator-floor"
)

// floor is a running floor process's state.
type floor struct {
	cached client.Client // reads from the cache, writes to the API server
	direct client.Reader // reads from the API server (pods), as the operator's APIReader
	owners index.JobOwners
	q      priorityqueue.PriorityQueue[types.NamespacedName]

	mu      sync.Mutex
	written map[types.NamespacedName]int // by Task: 1 once its start is recorded, 2 once its end is
	// rv is, by Task name, the resource version its last status write
	// returned: a cached Task at another one is behind that write, and
	// its Task's update event brings the pass again once it is not (a
	// patch from it would only be refused with a 409).
	rv      map[types.NamespacedName]string
	ended   int
	patches int // status patches sent, refused ones (409) included
	n       int
	done    chan struct{}
	// split, cpu0, cpuSplit: with split > 0, cpuSplit is its CPU from
	// cpu0 (its "ready") to its split-th end (the scale scenario's first
	// phase; its second is from there to the n-th).
	split          int
	cpu0, cpuSplit float64
}

// floorMain runs the floor until n Tasks have their end recorded, then
// prints "cpu <seconds>" (its CPU since it printed "ready"), and with a
// split "cpu-split <seconds>" (its CPU from "ready" to the split-th end).
// a.namespace may name several namespaces, comma-separated.
func floorMain(cfg *rest.Config, a oracleArgs) error {
	if _, set := syscall.Getenv("GOGC"); !set {
		debug.SetGCPercent(floorGCPercent)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.UserAgent = -1, floorUserAgent
	opts := reconciler.CacheOptions(false)
	opts.Scheme = scheme
	opts.DefaultNamespaces = map[string]cache.Config{}
	for ns := range strings.SplitSeq(a.namespace, ",") {
		opts.DefaultNamespaces[ns] = cache.Config{}
	}
	ca, err := cache.New(cfg, opts)
	if err != nil {
		return err
	}
	cached, err := client.New(cfg, client.Options{Scheme: scheme, Cache: &client.CacheOptions{Reader: ca}})
	if err != nil {
		return err
	}
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &floor{
		cached: cached, direct: direct, n: a.n, split: a.split, written: map[types.NamespacedName]int{}, rv: map[types.NamespacedName]string{}, done: make(chan struct{}),
		q: priorityqueue.New[types.NamespacedName]("floor"),
	}
	// The operator's order (fastpath's priorities): a new Task's Job
	// before any record, a finished Job's record before a start's.
	enqueue := func(key types.NamespacedName, prio int) {
		f.q.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(prio)}, key)
	}
	enqueueTask := func(o any, prio int) {
		if t, ok := o.(*v1alpha1.Task); ok {
			enqueue(types.NamespacedName{Namespace: t.Namespace, Name: t.Name}, prio)
		}
	}
	enqueueJob := func(o any, prio int) {
		if j, ok := o.(*batchv1.Job); ok && j.Labels[v1alpha1.LabelTask] != "" {
			enqueue(types.NamespacedName{Namespace: j.Namespace, Name: j.Labels[v1alpha1.LabelTask]}, prio)
		}
	}
	// The operator's indexes: its Jobs are read by their Task's UID.
	if err := index.Add(ctx, ca); err != nil {
		return err
	}
	if f.owners, err = index.AddOwners(ctx, ca); err != nil {
		return err
	}
	ti, err := ca.GetInformer(ctx, &v1alpha1.Task{})
	if err != nil {
		return err
	}
	if _, err := ti.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { enqueueTask(o, fastpath.StartPriority) },
		UpdateFunc: func(_, o any) { enqueueTask(o, fastpath.RecordPriority) },
	}); err != nil {
		return err
	}
	ji, err := ca.GetInformer(ctx, &batchv1.Job{})
	if err != nil {
		return err
	}
	if _, err := ji.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { enqueueJob(o, fastpath.RecordPriority) },
		UpdateFunc: func(old, o any) {
			if j, ok := o.(*batchv1.Job); ok {
				enqueueJob(j, fastpath.JobUpdatePriority(old.(*batchv1.Job), j))
			}
		},
	}); err != nil {
		return err
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		return fmt.Errorf("the floor's caches did not sync")
	}
	heap0 := liveHeap()
	rss0 := selfRSS()
	f.cpu0 = selfCPU()
	fmt.Println("ready")
	for range a.workers {
		go f.work(ctx)
	}
	<-f.done
	f.q.ShutDown()
	cpu := selfCPU() - f.cpu0
	f.mu.Lock()
	patches, cpuSplit := f.patches, f.cpuSplit
	f.mu.Unlock()
	// Its caches now hold the N finished Tasks and their Jobs, as the
	// operator's do at N in the memory session.
	heap := liveHeap() - heap0
	fmt.Printf("cpu %.3f\npatches %d\nheap %d\nrss %d\n", cpu, patches, heap, selfRSS()-rss0)
	if f.split > 0 {
		fmt.Printf("cpu-split %.3f\n", cpuSplit)
	}
	return nil
}

func (f *floor) work(ctx context.Context) {
	for {
		key, quit := f.q.Get()
		if quit {
			return
		}
		if err := f.pass(ctx, key); err != nil {
			f.q.AddRateLimited(key)
		} else {
			f.q.Forget(key)
		}
		f.q.Done(key)
	}
}

// pass creates the Task's Job, or records its start or end.
func (f *floor) pass(ctx context.Context, key types.NamespacedName) error {
	f.mu.Lock()
	w, rv := f.written[key], f.rv[key]
	f.mu.Unlock()
	if w == 2 {
		return nil
	}
	var task v1alpha1.Task
	if err := f.cached.Get(ctx, key, &task); err != nil {
		return client.IgnoreNotFound(err)
	}
	if w > 0 && task.ResourceVersion != rv {
		return nil
	}
	owned, err := f.owners.OwnedBy(ctx, key.Namespace, string(task.UID))
	if err != nil {
		return err
	}
	if len(owned) == 0 {
		if w > 0 || task.Status.ObservedGeneration != 0 {
			return nil
		}
		err := f.cached.Create(ctx, jobs.Build(&task, runs.OneShot, 1, nil, nil, benchJobOptions))
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	rs := runs.FromJobs(task.UID, owned)
	if len(rs) == 0 {
		return nil
	}
	a := rs[0].Latest()
	in := status.Input{Task: &task, Runs: rs, Now: time.Now()}
	switch {
	case a.Phase == runs.Succeeded || a.Phase == runs.Failed:
		var pods corev1.PodList
		if err := f.direct.List(ctx, &pods, client.InNamespace(key.Namespace), client.MatchingLabels{batchv1.JobNameLabel: a.JobName, v1alpha1.LabelTask: key.Name}); err != nil {
			return err
		}
		in.Outputs = map[string]status.Output{a.JobName: floorOutput(pods.Items)}
		w = 2
	case w == 0:
		// The start is recorded when the operator records it: a pass
		// before then comes back at that moment (the operator's wake-up).
		if at := plan.RecordStartAt(rs, in.Now, fastpath.RecordStartDelay); !at.IsZero() {
			f.q.AddWithOpts(priorityqueue.AddOpts{After: at.Sub(in.Now), Priority: ptr.To(fastpath.RecordPriority)}, key)
			return nil
		}
		w = 1
	default:
		return nil
	}
	rv, err = f.writeStatus(ctx, &task, status.Compute(in))
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.written[key], f.rv[key] = w, rv
	if w == 2 {
		f.ended++
		if f.ended == f.split {
			f.cpuSplit = selfCPU() - f.cpu0
		}
		if f.ended == f.n {
			close(f.done)
		}
	}
	f.mu.Unlock()
	return nil
}

// writeStatus patches the status as the operator's writeStatus does: a
// merge patch of the status alone, locked to the resource version read;
// it returns the written Task's resource version.
func (f *floor) writeStatus(ctx context.Context, task *v1alpha1.Task, st v1alpha1.TaskStatus) (string, error) {
	next := *task
	next.Status = st
	patch, err := reconciler.StatusPatch(&next, &task.Status)
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	f.patches++
	f.mu.Unlock()
	written := reconciler.WrittenTask(task)
	err = f.cached.Status().Patch(ctx, written, patch)
	return written.ResourceVersion, err
}

// floorOutput is what the operator's status takes from the pods: the task
// container's termination message and exit code.
func floorOutput(pods []corev1.Pod) status.Output {
	var out status.Output
	for i := range pods {
		for _, cs := range pods[i].Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil {
				code := t.ExitCode
				out.Text, out.ExitCode = t.Message, &code
			}
		}
	}
	return out
}

// selfCPU is this process's CPU time so far (user + system), in seconds.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// liveHeap is the live heap after a forced collection, in bytes.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// selfRSS is this process's resident set in bytes, read as the
// operator's process_resident_memory_bytes is (procfs, the Prometheus
// process collector's); 0 when /proc does not say.
func selfRSS() int64 {
	p, err := procfs.Self()
	if err != nil {
		return 0
	}
	st, err := p.Stat()
	if err != nil {
		return 0
	}
	return int64(st.ResidentMemory())
}

// floorResult is what a floor process printed: its CPU (s), its live heap
// and RSS growth (bytes) and its status patches; runFloorBurst turns the
// first three into figures per 1000 Tasks (CPU-s, MiB, MiB) and adds the
// seconds from the first Task create to its N-th Job (NaN when the
// cluster has no audit log) and its Task-to-Job p99 as the burst's
// tracker sees the operator's (s).
//
// cpuSplit is its CPU to the split-th end, of a run with a split.
type floorResult struct{ cpu, cpuSplit, heap, rss, patches, firstToNth, taskToJobP99 float64 }

// scaleFloor is the floor of the scale scenario's CPU rows: the floor's
// CPU-s per 1000 Tasks over the first burst and over the next.
type scaleFloor struct{ first, next float64 }

// parseFloor reads the "cpu", "heap", "rss" and "patches" lines a floor
// process printed, and with split its "cpu-split" line.
func parseFloor(out string, split bool) (floorResult, error) {
	got := map[string]float64{}
	for line := range strings.Lines(out) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return floorResult{}, fmt.Errorf("the floor's %q: %w", line, err)
		}
		got[k] = x
	}
	want := []string{"cpu", "heap", "rss", "patches"}
	if split {
		want = append(want, "cpu-split")
	}
	for _, k := range want {
		if _, ok := got[k]; !ok {
			return floorResult{}, fmt.Errorf("the floor printed no %s figure: %q", k, out)
		}
	}
	return floorResult{cpu: got["cpu"], cpuSplit: got["cpu-split"], heap: got["heap"], rss: got["rss"], patches: got["patches"]}, nil
}

// floorNamespace is where the floor works (emptied before the operator's
// burst, as the oracle's).
const floorNamespace = "bench-floor"

// runFloorBurst runs the floor as its own process over N new Tasks created
// as the burst creates them, and returns its figures per 1000 Tasks. It
// cleans up as runOracleBurst does.
func runFloorBurst(ctx context.Context, o *options, cl *cluster) (*floorResult, error) {
	if err := cl.ensureNamespace(ctx, floorNamespace); err != nil {
		return nil, err
	}
	if err := waitQuiet(ctx, o, cl, "the floor burst"); err != nil {
		return nil, err
	}
	p, err := startOracle(ctx, o, cl, oracleArgs{namespace: floorNamespace, mode: oracleFloor, n: o.n})
	if err != nil {
		return nil, err
	}
	tr, err := startTracker(ctx, cl, floorNamespace, true)
	if err != nil {
		return nil, err
	}
	defer tr.close()
	start, _, err := createAll(ctx, cl.c, o.n, o.workers, func(i int) client.Object {
		return oneShotTask(floorNamespace, fmt.Sprintf("floor-%05d", i))
	})
	if err != nil {
		return nil, err
	}
	if err := p.wait(); err != nil {
		return nil, err
	}
	t2j := taskToJob(tr.snapshot())
	fr, err := parseFloor(p.stdout.String(), false)
	if err != nil {
		return nil, err
	}
	k, mib := float64(o.n)/1000, float64(1<<20)
	perK := &floorResult{cpu: fr.cpu / k, heap: fr.heap / k / mib, rss: fr.rss / k / mib, patches: fr.patches, firstToNth: math.NaN(), taskToJobP99: percentile(t2j, 99)}
	// The N-th Job as the oracle's is read, from the audit log; without
	// one it is not known (the floor's end, a minute later, is no bound).
	at, err := nthCreateAt(cl, floorNamespace, floorUserAgent, start, o.n, time.Time{})
	if err != nil {
		return nil, err
	}
	if !at.IsZero() {
		perK.firstToNth = at.Sub(start).Seconds()
	}
	o.logf("floor burst: %d Tasks to their end in %.2f s, %d-th Job after %.2f s, Task->Job p50 %.3f s p99 %.3f s: %.2f CPU-s (%.2f per 1000 Tasks), %.0f status patches, live heap +%.2f MiB and RSS +%.2f MiB (%.2f and %.2f per 1000 Tasks)",
		o.n, time.Since(p.started).Seconds(), o.n, perK.firstToNth, percentile(t2j, 50), perK.taskToJobP99, fr.cpu, perK.cpu, fr.patches, fr.heap/mib, fr.rss/mib, perK.heap, perK.rss)
	return perK, cleanNamespace(ctx, o, cl, floorNamespace)
}

// scaleFloorNamespaceOf is the namespace of the scale floor's Task i,
// sharded as the operator's (scaleNamespaceOf).
func scaleFloorNamespaceOf(i int) string { return fmt.Sprintf("bench-scale-floor-%d", i%scaleShards) }

// runFloorScale is the scale scenario's floor (its step "floor", before
// the operator starts): the floor process over the namespaces of
// scaleFloorNamespaceOf, given the scale's two bursts as the operator is
// (N/10 one-shot Tasks, every one Ready, then the other 9N/10), so that
// the operator's CPU per 1000 Tasks in each phase has a floor measured on
// the same cluster in the same run. It then empties its namespaces and
// waits for a quiet API server, so the operator starts on the cluster it
// would have had without it.
func runFloorScale(ctx context.Context, o *options, cl *cluster) (*scaleFloor, error) {
	n := o.n
	first := max(n/10, 1)
	nss := shardNamespaces(scaleFloorNamespaceOf)
	for _, ns := range nss {
		if err := cl.ensureNamespace(ctx, ns); err != nil {
			return nil, err
		}
	}
	if err := waitQuiet(ctx, o, cl, "the scale floor"); err != nil {
		return nil, err
	}
	p, err := startOracle(ctx, o, cl, oracleArgs{namespace: strings.Join(nss, ","), mode: oracleFloor, n: n, split: first})
	if err != nil {
		return nil, err
	}
	tr, err := startTrackerIn(ctx, cl, nss, true)
	if err != nil {
		return nil, err
	}
	defer tr.close()
	burst := func(base, add int) error {
		if _, err := createScaleTasks(ctx, o, cl, scaleFloorNamespaceOf, base, add); err != nil {
			return err
		}
		want := base + add
		return tr.waitFor(ctx, o, fmt.Sprintf("the floor's %d Tasks Ready", want), o.timeout(15*time.Minute), func(_, ready, _, _, _ int) bool { return ready >= want })
	}
	if err := burst(0, first); err != nil {
		return nil, err
	}
	if n > first {
		if err := burst(first, n-first); err != nil {
			return nil, err
		}
	}
	if err := p.wait(); err != nil {
		return nil, err
	}
	fr, err := parseFloor(p.stdout.String(), true)
	if err != nil {
		return nil, err
	}
	res := &scaleFloor{first: fr.cpuSplit / (float64(first) / 1000), next: math.NaN()}
	if n > first {
		res.next = (fr.cpu - fr.cpuSplit) / (float64(n-first) / 1000)
	}
	o.logf("scale floor: %d Tasks then %d to their end in %.0f s: %.2f CPU-s per 1000 Tasks over the first, %.2f over the next (%.0f status patches)",
		first, n-first, time.Since(p.started).Seconds(), res.first, res.next, fr.patches)
	// One namespace at a time: ten collection deletes of 1000 Tasks at
	// once outlast the client's minute on 2 cores.
	for _, ns := range nss {
		if err := cleanNamespace(ctx, o, cl, ns); err != nil {
			return nil, fmt.Errorf("emptying %s: %w", ns, err)
		}
	}
	return res, waitQuiet(ctx, o, cl, "the scale bursts")
}
