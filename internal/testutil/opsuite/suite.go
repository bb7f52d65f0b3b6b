// Package opsuite is the operator's envtest suite, shared by the tests of
// both controllers (internal/reconciler, internal/taskqueue): one real
// kube-apiserver + etcd, one manager running the operator as cmd/manager
// wires it (operator.Setup) on a fake clock, and a second manager with no
// controller whose cache serves the reconcilers a test drives by hand, on
// Tasks labelled ManualLabel that the first ignores. Its helpers build,
// observe and act on objects the way every test of the suite does, so the
// two packages' tests read alike and share one copy of each.
//
// A test binary runs one suite: TestMain calls Run, and the helpers use
// the suite's package-level state. suite.go holds the suite and its
// state; act.go the builders and what tests do to objects; observe.go the
// waits and checks.
package opsuite

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/metrics"
	"github.com/taskops/task-operator/internal/operator"
	"github.com/taskops/task-operator/internal/reconciler"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/internal/waitline"
)

// The suite's state, set by Run before the tests run.
var (
	Ctx        context.Context
	K8s        client.Client // direct to the API server, no cache
	RestConfig *rest.Config
	// Clock is the operator's clock: tests move time without waiting.
	Clock *clocktesting.FakeClock
	// Tasks is the Task controller the manager runs.
	Tasks   *reconciler.TaskReconciler
	JobOpts = jobs.Options{ShellImage: "busybox:test", RunnerImage: "runner:test"}
	// PodLogs plays the kubelet's logs for the Task controller.
	PodLogs = &FakePodLogs{logs: map[string]string{}}

	// The second manager's cache, for hand-driven reconcilers, and the
	// queues' lines as it shows them (no queue controller fills them).
	ManualClient client.Client
	ManualReader client.Reader
	ManualLines  *waitline.Lines
	ManualOwners index.JobOwners
)

// ManualLabel marks Tasks only hand-driven reconcilers handle.
const ManualLabel = "test.taskops.io/manual"

// Run starts the suite, calls ready (a package's tests may keep short
// names for the suite's state), runs the tests and stops the suite;
// TestMain exits with what it returns. TEST_MANAGER_LOG=1 prints the
// manager's log, every pass included: what a failed wait needs to be
// understood.
func Run(m *testing.M, ready func()) int {
	if os.Getenv("TEST_MANAGER_LOG") != "" {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.Level(zapcore.Level(-5))))
	}
	cfg, c, stop, err := testutil.StartAPIServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	RestConfig, K8s = cfg, c
	var cancel context.CancelFunc
	Ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	Clock = clocktesting.NewFakeClock(time.Now())
	if err := startOperator(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := startManual(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if ready != nil {
		ready()
	}
	return m.Run()
}

// startOperator starts the manager that runs both controllers.
func startOperator(cfg *rest.Config) error {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 testutil.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  operatorCacheOptions(),
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	shared := operator.NewShared(mgr, Clock, nil, testutil.Shortcuts())
	if Tasks, err = operator.Setup(Ctx, mgr, controller.Options{MaxConcurrentReconciles: 4}, shared, operator.TaskSettings{Jobs: JobOpts, Logs: PodLogs}); err != nil {
		return err
	}
	metrics.Register(mgr.GetCache(), mgr.Elected(), metrics.PerTaskAll)
	go func() {
		if err := mgr.Start(Ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return nil
}

// startManual starts the second manager: no controller, only its cache.
func startManual(cfg *rest.Config) error {
	manualMgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: testutil.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: reconciler.CacheOptions(testutil.FastPathOff()),
	})
	if err != nil {
		return err
	}
	if err := index.Add(Ctx, manualMgr.GetFieldIndexer()); err != nil {
		return err
	}
	if ManualOwners, err = index.AddOwners(Ctx, manualMgr.GetCache()); err != nil {
		return err
	}
	ManualClient, ManualReader = manualMgr.GetClient(), manualMgr.GetAPIReader()
	ManualLines = waitline.New()
	taskInformer, err := manualMgr.GetCache().GetInformer(Ctx, &v1alpha1.Task{})
	if err == nil {
		_, err = taskInformer.AddEventHandler(ManualLines.Handler())
	}
	if err != nil {
		return err
	}
	go func() { _ = manualMgr.Start(Ctx) }()
	if !manualMgr.GetCache().WaitForCacheSync(Ctx) {
		return fmt.Errorf("manual cache did not sync")
	}
	return nil
}

// operatorCacheOptions is the operator's cache, minus the manual Tasks.
func operatorCacheOptions() cache.Options {
	opts := reconciler.CacheOptions(testutil.FastPathOff())
	notManual, err := labels.Parse("!" + ManualLabel)
	if err != nil {
		panic(err)
	}
	// The Task entry CacheOptions made gets the selector: a second entry
	// for the same type would make controller-runtime pick one of the two
	// in map order (the manual Tasks cached by the operator's manager in
	// some runs, or the Tasks untrimmed).
	for obj, by := range opts.ByObject {
		if _, ok := obj.(*v1alpha1.Task); ok {
			by.Label = notManual
			opts.ByObject[obj] = by
			return opts
		}
	}
	opts.ByObject[&v1alpha1.Task{}] = cache.ByObject{Label: notManual}
	return opts
}

// FakePodLogs serves the logs tests set, by namespace/pod.
type FakePodLogs struct {
	mu   sync.Mutex
	logs map[string]string
}

// StaleTask is a cache whose Task is behind the API server: Get answers
// the Task as it was, whatever the API server holds now.
type StaleTask struct {
	client.Client
	Task *v1alpha1.Task
}

func (f *FakePodLogs) Set(ns, pod, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs[ns+"/"+pod] = text
}

func (f *FakePodLogs) Tail(_ context.Context, ns, pod, _ string, limit int64) (string, error) {
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

func (s StaleTask) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if t, ok := obj.(*v1alpha1.Task); ok && key == client.ObjectKeyFromObject(s.Task) {
		s.Task.DeepCopyInto(t)
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}

// ManualReconciler is a reconciler the test drives by hand, as a second
// replica or a restarted operator would run; c wraps its client.
func ManualReconciler(c client.Client) *reconciler.TaskReconciler {
	if c == nil {
		c = ManualClient
	}
	return &reconciler.TaskReconciler{Client: c, APIReader: ManualReader, Clock: Clock, Jobs: JobOpts, Owners: ManualOwners, Shortcuts: testutil.Shortcuts()}
}

// T, F and U are the condition statuses, short as in the contract's
// tables (AssertConditions(t, task, U, F, T, F)).
const (
	T = metav1.ConditionTrue
	F = metav1.ConditionFalse
	U = metav1.ConditionUnknown
)
