package fuzz_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/taskops/task-operator/internal/index"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/reconciler"
	"github.com/taskops/task-operator/internal/testutil"
)

// The harness: ONE kube-apiserver + etcd (envtest, with the generated CRD)
// per test process, and one manager cache serving hand-driven reconcilers.
//
// It starts lazily, on the first input that needs it, because under
// `go test -fuzz` TestMain runs in the coordinating process too, which
// never runs an input: only the worker processes need an API server. A
// worker can also end abruptly (the coordinator interrupts it one second
// after asking it to stop, or a crasher kills it), so the API server and
// etcd, which envtest starts in process groups of their own, are also
// watched by testutil's ChildGuard, which kills them, by pid, once this
// process is gone.

const (
	admissionNS = "fuzz-admission"
	reconcileNS = "fuzz-reconcile"
)

var (
	jobOpts = jobs.Options{ShellImage: "busybox:test", RunnerImage: "runner:test"}

	// shuttingDown: the process was interrupted; failures no longer count.
	shuttingDown atomic.Bool

	envOnce sync.Once
	envErr  error
	h       *harness
)

type harness struct {
	ctx    context.Context
	cancel context.CancelFunc
	env    *envtest.Environment
	// k8s talks to the API server directly; cached reads through mgrClient.
	k8s       client.Client
	mgrClient client.Client
	apiReader client.Reader
	owners    index.JobOwners
	// decoder decodes a Task the way the operator's informer does.
	decoder  runtime.Decoder
	children []int
	// guard kills the children if this process dies without stop.
	guard    *testutil.ChildGuard
	stopOnce sync.Once
}

// need returns the harness, starting it on first use. A harness that could
// not start fails every input (and the first one says why).
func need(t *testing.T) *harness {
	t.Helper()
	envOnce.Do(func() {
		start := time.Now()
		h, envErr = startHarness()
		findingsLog.note("harness", fmt.Sprintf("pid %d started the API server in %v (err %v)", os.Getpid(), time.Since(start).Round(time.Millisecond), envErr), input{})
	})
	if envErr != nil {
		t.Fatalf("starting the test API server: %v", envErr)
	}
	return h
}

func TestMain(m *testing.M) {
	logf.SetLogger(logr.Discard())
	code := m.Run()
	findingsLog.flush()
	if h != nil {
		h.stop()
	}
	os.Exit(code)
}

func startHarness() (*harness, error) {
	env, err := testutil.NewEnv()
	if err != nil {
		return nil, err
	}
	// Without the watch cache every read goes to etcd. With it, each
	// consistent LIST (this harness checking Jobs, the reconciler reading
	// pods) waits for the cache to be provably fresh, up to the cache's
	// 100 ms progress-request period: most of an input's time.
	env.ControlPlane.GetAPIServer().Configure().Set("watch-cache", "false")
	guard := testutil.GuardChildren()
	cfg, err := env.Start()
	guard.Seal()
	if err != nil {
		guard.Stop()
		return nil, err
	}
	hs := &harness{env: env, guard: guard, children: guard.Pids()}
	hs.onSignal()

	hs.ctx, hs.cancel = context.WithCancel(context.Background())
	scheme := testutil.Scheme()
	hs.decoder = serializer.NewCodecFactory(scheme).UniversalDeserializer()
	// Many small requests per input: the default client-side rate limit
	// (QPS 5 in client-go, 20 in controller-runtime) would be the bottleneck.
	cfg.QPS, cfg.Burst = 5000, 10000
	if hs.k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		hs.stop()
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: reconciler.CacheOptions(testutil.FastPathOff()),
	})
	if err != nil {
		hs.stop()
		return nil, err
	}
	if err := index.Add(hs.ctx, mgr.GetFieldIndexer()); err != nil {
		hs.stop()
		return nil, err
	}
	if hs.owners, err = index.AddOwners(hs.ctx, mgr.GetCache()); err != nil {
		hs.stop()
		return nil, err
	}
	hs.mgrClient, hs.apiReader = mgr.GetClient(), mgr.GetAPIReader()
	go func() { _ = mgr.Start(hs.ctx) }()
	if !mgr.GetCache().WaitForCacheSync(hs.ctx) {
		hs.stop()
		return nil, fmt.Errorf("the manager cache did not sync")
	}
	for _, ns := range []string{admissionNS, reconcileNS} {
		if err := hs.k8s.Create(hs.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			hs.stop()
			return nil, err
		}
	}
	return hs, nil
}

// stop ends the manager and the control plane quickly: SIGTERM to both
// processes at once, SIGKILL to what is still there after a moment, then
// envtest's own Stop, which only cleans up its folders by then.
func (hs *harness) stop() {
	hs.stopOnce.Do(func() {
		if hs.cancel != nil {
			hs.cancel()
		}
		for _, pid := range hs.children {
			_ = syscall.Kill(pid, syscall.SIGTERM)
		}
		deadline := time.Now().Add(700 * time.Millisecond)
		for time.Now().Before(deadline) && hs.anyChildAlive() {
			time.Sleep(20 * time.Millisecond) // polling the processes' exit
		}
		for _, pid := range hs.children {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		// The children are gone: the watchdog must not signal their pids,
		// which the system may give to other processes.
		hs.guard.Stop()
		_ = hs.env.Stop()
	})
}

func (hs *harness) anyChildAlive() bool {
	for _, pid := range hs.children {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !bytes.Contains(procState(b), []byte("Z")) {
			return true
		}
	}
	return false
}

// onSignal stops the control plane when the process is interrupted (the
// fuzzing coordinator interrupts a worker that does not exit within a
// second of being told to).
func (hs *harness) onSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ch
		// What is in flight fails once the control plane is gone: that is
		// not a finding.
		shuttingDown.Store(true)
		hs.stop()
		findingsLog.flush()
		os.Exit(1)
	}()
}

func procState(stat []byte) []byte {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+3 > len(stat) {
		return nil
	}
	return stat[i+2 : i+3]
}
