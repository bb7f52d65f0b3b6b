package reconciler_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/metrics"
	"github.com/taskops/task-operator/internal/operator"
	"github.com/taskops/task-operator/internal/reconciler"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/internal/waitline"
)

// The suite runs one real kube-apiserver + etcd and one manager whose
// reconciler reads a fake clock, so tests move time without waiting.
var (
	ctx       context.Context
	k8s       client.Client // direct to the API server, no cache
	restCfg   *rest.Config
	fakeClock *clocktesting.FakeClock
	rec       *reconciler.TaskReconciler
	jobOpts   = jobs.Options{ShellImage: "busybox:test", RunnerImage: "runner:test"}
	// podLogs plays the kubelet's logs for the suite's reconciler.
	podLogs = &fakePodLogs{logs: map[string]string{}}
)

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	// TEST_MANAGER_LOG=1 prints the manager's log, every pass included:
	// what a failed wait needs to be understood.
	if os.Getenv("TEST_MANAGER_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.Level(-5))))
	}
	cfg, c, stop, err := testutil.StartAPIServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	restCfg, k8s = cfg, c

	var cancel context.CancelFunc
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	fakeClock = clocktesting.NewFakeClock(time.Now())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testutil.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  suiteCacheOptions(),
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	shared := operator.NewShared(mgr, fakeClock, nil, testutil.Shortcuts())
	rec, err = operator.Setup(ctx, mgr, controller.Options{MaxConcurrentReconciles: 4}, shared, operator.TaskSettings{Jobs: jobOpts, Logs: podLogs})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	metrics.Register(mgr.GetCache(), mgr.Elected(), metrics.PerTaskAll)
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()

	// A second manager runs no controller: its cache serves reconcilers the
	// tests drive by hand, on Tasks labelled manual that the first ignores.
	manualMgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: testutil.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: reconciler.CacheOptions(testutil.FastPathOff()),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := index.Add(ctx, manualMgr.GetFieldIndexer()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	manualClient, manualReader = manualMgr.GetClient(), manualMgr.GetAPIReader()
	// The queues' lines as the manual cache shows them, for the queue
	// reconcilers the tests drive by hand (no queue controller fills them).
	manualLines = waitline.New()
	taskInformer, err := manualMgr.GetCache().GetInformer(ctx, &v1alpha1.Task{})
	if err == nil {
		_, err = taskInformer.AddEventHandler(manualLines.Handler())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() { _ = manualMgr.Start(ctx) }()
	if !manualMgr.GetCache().WaitForCacheSync(ctx) {
		fmt.Fprintln(os.Stderr, "manual cache did not sync")
		return 1
	}
	return m.Run()
}

// manualLabel marks Tasks only hand-driven reconcilers handle.
const manualLabel = "test.taskops.io/manual"

var (
	manualClient client.Client
	manualReader client.Reader
	manualLines  *waitline.Lines
)

// suiteCacheOptions is the operator's cache, minus the manual Tasks.
func suiteCacheOptions() cache.Options {
	opts := reconciler.CacheOptions(testutil.FastPathOff())
	notManual, err := labels.Parse("!" + manualLabel)
	if err != nil {
		panic(err)
	}
	opts.ByObject[&v1alpha1.Task{}] = cache.ByObject{Label: notManual}
	return opts
}

// manualReconciler is a reconciler the test drives by hand, as a second
// replica or a restarted operator would run; c wraps its client.
func manualReconciler(c client.Client) *reconciler.TaskReconciler {
	if c == nil {
		c = manualClient
	}
	return &reconciler.TaskReconciler{Client: c, APIReader: manualReader, Clock: fakeClock, Jobs: jobOpts, Shortcuts: testutil.Shortcuts()}
}

// --- builders ---------------------------------------------------------------

// newNamespace makes a namespace of its own for a test.
func newNamespace(t *testing.T) string {
	t.Helper()
	return testutil.NewNamespace(t, k8s, "t")
}

// newTask builds a shell Task (testutil.NewTask). Tests that do not test
// the start timeout get a long one, so a clock moved forward by another
// step does not trip it.
func newTask(ns, name string, opts ...testutil.TaskOpt) *v1alpha1.Task {
	return testutil.NewTask(ns, name, append([]testutil.TaskOpt{testutil.StartTimeout(86400)}, opts...)...)
}

// --- observing ----------------------------------------------------------------

// eventually polls check (testutil.Eventually) for up to 20 s, failing the
// test with the last thing check said when the deadline passes.
func eventually(t *testing.T, what string, check func() (bool, string)) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, what, func(context.Context) (bool, string) { return check() })
}

func getTask(t *testing.T, task *v1alpha1.Task) *v1alpha1.Task {
	t.Helper()
	got := &v1alpha1.Task{}
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(task), got))
	return got
}

// edit changes an object the operator also writes (a Task, a TaskQueue:
// their status) as a user would: read, change, update, again on a
// conflict. It returns the object as stored.
func edit[T client.Object](t *testing.T, obj T, change func(T)) T {
	t.Helper()
	var got T
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got = reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T) // a fresh object each try
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			return err
		}
		change(got)
		return k8s.Update(ctx, got)
	}))
	return got
}

// waitNextSchedule waits until the Task's status.nextScheduleTime is want.
func waitNextSchedule(t *testing.T, task *v1alpha1.Task, want time.Time) {
	t.Helper()
	waitTask(t, task, "nextScheduleTime "+want.Format(time.RFC3339), func(x *v1alpha1.Task) bool {
		return x.Status.NextScheduleTime != nil && x.Status.NextScheduleTime.Time.Equal(want)
	})
}

// waitTask waits until the stored Task satisfies ok.
func waitTask(t *testing.T, task *v1alpha1.Task, what string, ok func(*v1alpha1.Task) bool) *v1alpha1.Task {
	t.Helper()
	var got *v1alpha1.Task
	eventually(t, what, func() (bool, string) {
		got = &v1alpha1.Task{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(task), got); err != nil {
			return false, err.Error()
		}
		return ok(got), fmt.Sprintf("status %s", statusSummary(got))
	})
	return got
}

func statusSummary(t *v1alpha1.Task) string {
	s := t.Status
	conds := ""
	for _, c := range s.Conditions {
		conds += fmt.Sprintf(" %s=%s(%s)", c.Type, c.Status, c.Reason)
	}
	return fmt.Sprintf("phase=%s run=%s attempts=%d active=%d lastError=%q%s", s.Phase, s.CurrentRun, s.Attempts, len(s.Active), s.LastError, conds)
}

func phaseIs(p v1alpha1.TaskPhase) func(*v1alpha1.Task) bool {
	return func(t *v1alpha1.Task) bool {
		return t.Status.Phase == p && t.Status.ObservedGeneration == t.Generation
	}
}

// jobsOf lists the Task's Jobs from the API server, by name.
func jobsOf(t *testing.T, task *v1alpha1.Task) []batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	must(t, k8s.List(ctx, &list, client.InNamespace(task.Namespace), testutil.TaskLabel(task)))
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// waitJobs waits until the Task has n Jobs and returns them.
func waitJobs(t *testing.T, task *v1alpha1.Task, n int) []batchv1.Job {
	t.Helper()
	var js []batchv1.Job
	eventually(t, fmt.Sprintf("%d Job(s) of %s", n, task.Name), func() (bool, string) {
		js = jobsOf(t, task)
		return len(js) == n, fmt.Sprintf("%d Jobs", len(js))
	})
	return js
}

// eventsOf drains recorder (a hand-driven reconciler's events) and
// returns the events of reason.
func eventsOf(recorder *events.FakeRecorder, reason v1alpha1.Reason) []string {
	var out []string
	for len(recorder.Events) > 0 {
		if e := <-recorder.Events; strings.Contains(e, string(reason)) {
			out = append(out, e)
		}
	}
	return out
}

// waitJobsAtOnce is waitJobs for what the operator promises to do on the
// event itself (testutil.AtOnce): a bound that a wait for a recheck fails.
func waitJobsAtOnce(t *testing.T, task *v1alpha1.Task, n int) []batchv1.Job {
	t.Helper()
	var js []batchv1.Job
	testutil.Promptly(t, testutil.AtOnce, 50*time.Millisecond, fmt.Sprintf("%d Job(s) of %s", n, task.Name), func(context.Context) (bool, string) {
		js = jobsOf(t, task)
		return len(js) == n, fmt.Sprintf("%d Jobs", len(js))
	})
	return js
}

// jobOf finds the Job of one run and attempt.
func jobOf(t *testing.T, task *v1alpha1.Task, run string, attempt int) *batchv1.Job {
	t.Helper()
	for _, j := range jobsOf(t, task) {
		if j.Labels[v1alpha1.LabelRun] == run && j.Labels[v1alpha1.LabelAttempt] == strconv.Itoa(attempt) {
			return &j
		}
	}
	t.Fatalf("no Job for run %s attempt %d", run, attempt)
	return nil
}

func condition(t *v1alpha1.Task, typ string) *metav1.Condition {
	return meta.FindStatusCondition(t.Status.Conditions, typ)
}

// assertConditions checks Ready, Failed, Reconciling and Stalled against a
// row of the contract's table, and that each has observedGeneration.
func assertConditions(t *testing.T, task *v1alpha1.Task, ready, failed, reconciling, stalled metav1.ConditionStatus) {
	t.Helper()
	want := map[string]metav1.ConditionStatus{
		v1alpha1.ConditionReady: ready, v1alpha1.ConditionFailed: failed,
		v1alpha1.ConditionReconciling: reconciling, v1alpha1.ConditionStalled: stalled,
	}
	for typ, status := range want {
		c := condition(task, typ)
		if c == nil {
			t.Fatalf("condition %s missing: %s", typ, statusSummary(task))
		}
		if c.Status != status {
			t.Fatalf("condition %s = %s, want %s: %s", typ, c.Status, status, statusSummary(task))
		}
		if c.ObservedGeneration != task.Generation {
			t.Fatalf("condition %s has observedGeneration %d, want %d", typ, c.ObservedGeneration, task.Generation)
		}
	}
}

// --- acting -------------------------------------------------------------------

// poke changes an annotation, which makes the operator look at the Task
// again (used after moving the fake clock).
func poke(t *testing.T, task *v1alpha1.Task) {
	t.Helper()
	setAnnotation(t, task, "test.taskops.io/poke", strconv.FormatInt(time.Now().UnixNano(), 10))
}

// setRunNow sets the run-now annotation to token.
func setRunNow(t *testing.T, task *v1alpha1.Task, token string) {
	t.Helper()
	setAnnotation(t, task, v1alpha1.AnnotationRunNow, token)
}

// setAnnotation sets one annotation of the stored Task (a merge patch).
func setAnnotation(t *testing.T, task *v1alpha1.Task, name, value string) {
	t.Helper()
	fresh := getTask(t, task)
	patch := client.MergeFrom(fresh.DeepCopy())
	if fresh.Annotations == nil {
		fresh.Annotations = map[string]string{}
	}
	fresh.Annotations[name] = value
	must(t, k8s.Patch(ctx, fresh, patch))
}

// reconcileOnce runs one pass by hand, next to the manager's. A conflict
// with the manager's own pass is expected (optimistic locking at work) and
// retried, as the workqueue would.
func reconcileOnce(t *testing.T, r *reconciler.TaskReconciler, task *v1alpha1.Task) reconcile.Result {
	t.Helper()
	for i := 0; ; i++ {
		res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(task)})
		if err == nil {
			return res
		}
		if !apierrors.IsConflict(err) || i == 10 {
			t.Fatalf("reconcile: %v", err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func getJob(t *testing.T, job *batchv1.Job) *batchv1.Job {
	t.Helper()
	got := &batchv1.Job{}
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(job), got))
	return got
}

// assertKstatus checks the verdict health tools (Flux, kpt, cli-utils)
// read from the Task, with the kstatus library itself.
func assertKstatus(t *testing.T, task *v1alpha1.Task, want kstatus.Status) {
	t.Helper()
	got, msg, err := testutil.Kstatus(task)
	must(t, err)
	if got != want {
		t.Fatalf("kstatus %s (%s), want %s: %s", got, msg, want, statusSummary(task))
	}
}

// fakePodLogs serves the logs tests set, by namespace/pod.
type fakePodLogs struct {
	mu   sync.Mutex
	logs map[string]string
}

func (f *fakePodLogs) set(ns, pod, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs[ns+"/"+pod] = text
}

func (f *fakePodLogs) Tail(_ context.Context, ns, pod, _ string, limit int64) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	text, ok := f.logs[ns+"/"+pod]
	if !ok {
		return "", fmt.Errorf("pods %q not found", pod)
	}
	if int64(len(text)) > limit {
		text = text[int64(len(text))-limit:]
	}
	return text, nil
}
