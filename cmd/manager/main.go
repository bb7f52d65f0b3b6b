// Command manager runs the task-operator controller: it turns Tasks into
// Jobs and keeps their status.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-logr/zapr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/fastpath"
	"github.com/taskops/task-operator/internal/guards"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/leader"
	"github.com/taskops/task-operator/internal/metrics"
	"github.com/taskops/task-operator/internal/notify"
	"github.com/taskops/task-operator/internal/operator"
	"github.com/taskops/task-operator/internal/reconciler"
	"github.com/taskops/task-operator/internal/version"
	"github.com/taskops/task-operator/internal/workers"
)

// errorRetryMax caps the delay before a failed pass runs again.
const errorRetryMax = 10 * time.Second

// leaseName is the leader election Lease.
const leaseName = "task-operator.batch.taskops.io"

// Leader election needs its Lease, in the operator's own namespace only.
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=task-operator-system
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch,namespace=task-operator-system
// The workers' read-only kubeconfigs (internal/workers), found by label in
// the operator's own namespace only.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=list,namespace=task-operator-system

// A secure metrics endpoint (--metrics-secure) asks the API server who a
// scraper's bearer token belongs to and whether it may GET /metrics.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

type options struct {
	metricsAddr, probeAddr  string
	metricsSecure           bool
	metricsCertDir          string
	taskMetrics             metrics.PerTask
	pprofAddr               string
	leaderElect             bool
	serviceAccountOptIn     bool
	notificationDeadline    time.Duration
	fastPath                bool
	leaderElectionNamespace string
	workerSecretsNamespace  string
	shellImage, runnerImage string
	maxConcurrent           int
	qps                     float64
	burst                   int
	logLevel                string
	logFormat               string
	// namespaces, when set, is the only namespaces this install watches
	// and acts in (a shard); leaseID names its leader election Lease.
	namespaces []string
	leaseID    string
}

func parseFlags() options {
	o := options{taskMetrics: metrics.PerTaskAll}
	bindFlags(flag.CommandLine, &o)
	flag.Parse()
	return o
}

// bindFlags defines the manager's flags on fs, writing into o; the test of
// docs/reference/flags.md renders the page from the same set.
func bindFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "address of the metrics endpoint; 0 disables it")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true, "serve metrics over HTTPS to scrapers whose bearer token the API server authenticates and authorizes for GET /metrics (the metrics-reader ClusterRole); false serves plain HTTP to anyone who reaches the port")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "", "directory with tls.crt and tls.key for the secure metrics endpoint, reloaded when they change; empty: a self-signed certificate made at start")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz probes")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "0", "address of the Go pprof endpoints (/debug/pprof/); 0 disables them")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader, so only one replica reconciles (needed with more than one replica)")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace)")
	fs.StringVar(&o.workerSecretsNamespace, "worker-kubeconfig-namespace", "", "namespace of the Secrets labelled batch.taskops.io/worker-cluster that hold read-only kubeconfigs of MultiKueue worker clusters, to read the output of attempts that ran there (default: the pod's namespace; outside a pod, none)")
	fs.StringVar(&o.shellImage, "shell-image", "busybox:1.37", "image of shell Tasks that set no spec.image; it needs /bin/sh")
	fs.StringVar(&o.runnerImage, "runner-image", version.Image(), "image holding /task-runner, run by http Tasks; defaults to this build's own release image, pinned to its version (the shipped Deployment sets it to the image it runs)")
	fs.DurationVar(&o.notificationDeadline, "notification-deadline", notify.DefaultDeadline, "how long after a run's end its notification Job may be refused by the API server for reasons that may pass (a webhook or the API server restarting, throttling) before the notification is Failed")
	fs.BoolVar(&o.serviceAccountOptIn, "service-accounts-opt-in", false, "refuse (InvalidSpec) Tasks that name spec.serviceAccountName unless their Namespace has the annotation batch.taskops.io/allow-service-accounts=true")
	fs.IntVar(&o.maxConcurrent, "max-concurrent-reconciles", 32, "Tasks reconciled in parallel (each pass mostly waits on the API server, so many are cheap)")
	fs.Float64Var(&o.qps, "kube-api-qps", 0, "client-side limit of API requests per second, shared by all resource types; 0 means no client-side limit (API Priority and Fairness protects the server)")
	fs.IntVar(&o.burst, "kube-api-burst", 0, "burst of the client-side limit (with --kube-api-qps; default 1.5 x qps)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&o.logFormat, "log-format", "json", "log format: json or console")
	fs.Func("task-metrics", "which Tasks get their own metric series (last run, last success, failure streak, next slot): all, labelled (Tasks labelled batch.taskops.io/metrics=true) or none; Tasks by phase and queue gauges are always exported (default all)", func(s string) error {
		var err error
		o.taskMetrics, err = metrics.ParsePerTask(s)
		return err
	})
	fs.Func("namespaces", "comma-separated namespaces this install watches and acts in, for a cluster one operator cannot carry (run one install per set, each with its own --leader-election-id); empty: all namespaces", func(v string) error {
		for _, ns := range strings.Split(v, ",") {
			if ns = strings.TrimSpace(ns); ns != "" {
				o.namespaces = append(o.namespaces, ns)
			}
		}
		return nil
	})
	fs.StringVar(&o.leaseID, "leader-election-id", leaseName, "name of the leader election Lease: give each install of a sharded cluster (--namespaces) its own")
	fs.BoolVar(&o.fastPath, "fast-path", true, "take the speed shortcuts (in-process memories of the operator's own writes, wake-ups between the controllers, work-queue priorities, a trimmed Job cache); false turns them all off: the same behaviour, slower under load (internal/fastpath)")
}

// metricsOptions serves metrics as kubebuilder's scaffold does by default:
// HTTPS, each scrape's bearer token checked by a TokenReview and its
// GET /metrics by a SubjectAccessReview (metrics.ScrapeAuth), HTTP/1.1 only (HTTP/2's rapid reset
// and stream floods, CVE-2023-44487 and CVE-2023-39325, reach a server that
// anyone on the pod network can dial). --metrics-secure=false is plain HTTP.
func metricsOptions(o options) metricsserver.Options {
	if !o.metricsSecure {
		return metricsserver.Options{BindAddress: o.metricsAddr}
	}
	return metricsserver.Options{
		BindAddress:    o.metricsAddr,
		SecureServing:  true,
		FilterProvider: metrics.ScrapeAuth,
		CertDir:        o.metricsCertDir,
		TLSOpts:        []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }},
	}
}

// defaultGCPercent is the garbage collector's target unless GOGC is set.
// After a collection the Go runtime keeps memory up to its heap goal, live
// heap x (1 + GOGC/100), so at Go's default of 100 the operator's RSS grows
// by twice its cache: about 17 MiB per 1000 Tasks for 8 MiB of live heap.
// At 50 it is 1.5 times, for somewhat more GC work on a heap of tens of MiB.
const defaultGCPercent = 50

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	o := parseFlags()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "task-operator:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	logger, err := newLogger(o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	ctrl.SetLogger(zapr.NewLogger(logger))
	setupLog := ctrl.Log.WithName("setup")
	if n, from := setSoftMemoryLimit(); n > 0 {
		setupLog.Info("Go soft memory limit set from the container's memory limit", "bytes", n, "from", from)
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("no cluster to talk to: %w", err)
	}
	limitClient(cfg, o.qps, o.burst)

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}

	mgrOpts := ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsOptions(o),
		HealthProbeBindAddress: o.probeAddr,
		PprofBindAddress:       o.pprofAddr,
		Cache:                  reconciler.CacheOptions(!o.fastPath),
	}
	if len(o.namespaces) > 0 {
		// A shard: every informer (Tasks, Jobs, TaskQueues, ConfigMaps'
		// metadata) lists and watches these namespaces only, so the
		// operator neither sees nor acts on a Task elsewhere.
		mgrOpts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.namespaces {
			mgrOpts.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	// With leader election the manager gets a Lease lock built here, wrapped
	// so the reconciler can tell whether the lease is still held (see
	// internal/leader): a replica resumed after a pause past its lease must
	// not act on its stale cache in the seconds before client-go notices.
	var lease *leader.Lock
	var leaseLock *resourcelock.LeaseLock
	if o.leaderElect {
		ns, err := leader.Namespace(o.leaderElectionNamespace)
		if err != nil {
			return err
		}
		if leaseLock, err = leader.NewLeaseLock(cfg, ns, o.leaseID, leader.RenewDeadline); err != nil {
			return fmt.Errorf("leader election lock: %w", err)
		}
		if lease, err = leader.NewLock(leaseLock, leader.RenewDeadline, clock.RealClock{}); err != nil {
			return err
		}
		leaseDuration, renewDeadline, retryPeriod := leader.LeaseDuration, leader.RenewDeadline, leader.RetryPeriod
		mgrOpts.LeaderElection = true
		mgrOpts.LeaderElectionResourceLockInterface = lease
		// Ignored by the manager once it is given a lock, but they name the
		// same Lease.
		mgrOpts.LeaderElectionID = o.leaseID
		mgrOpts.LeaderElectionNamespace = ns
		mgrOpts.LeaseDuration = &leaseDuration
		mgrOpts.RenewDeadline = &renewDeadline
		mgrOpts.RetryPeriod = &retryPeriod
		mgrOpts.LeaderElectionReleaseOnCancel = true
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if leaseLock != nil {
		// The elector's events ("became leader", "stopped leading") as
		// controller-runtime records them: core/v1 events on the Lease.
		//lint:ignore SA1019 as controller-runtime's own lock does: the elector takes the old events API only
		leaseLock.LockConfig.EventRecorder = mgr.GetEventRecorderFor(leaseLock.Identity())
	}

	var leaseHolder guards.Lease
	if lease != nil { // not a nil *leader.Lock in the interface: nil means no leader election
		leaseHolder = lease
	}
	shared := operator.NewShared(mgr, clock.RealClock{}, leaseHolder, fastpath.New(o.fastPath))
	settings := operator.TaskSettings{
		Jobs:                 jobs.Options{ShellImage: o.shellImage, RunnerImage: o.runnerImage},
		Logs:                 reconciler.ClientsetPodLogs{Clientset: kubernetes.NewForConfigOrDie(cfg)},
		Workers:              workers.New(mgr.GetAPIReader(), workerSecretsNamespace(o.workerSecretsNamespace)),
		ServiceAccountOptIn:  o.serviceAccountOptIn,
		NotificationDeadline: o.notificationDeadline,
	}
	ctx := ctrl.SetupSignalHandler()
	opts := controller.Options{
		MaxConcurrentReconciles: o.maxConcurrent,
		// A pass that failed (the API server unreachable, say) is retried
		// after 5 ms, doubling per failure up to errorRetryMax. client-go's
		// cap of 1000 s meant that after a 15 s API server outage the
		// operator sat idle for up to 36 s more (reliability scenario 2);
		// failures the operator cannot fix by retrying are reported as
		// conditions instead, so this never retries a broken spec.
		RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Millisecond, errorRetryMax),
	}
	if _, err := operator.Setup(ctx, mgr, opts, shared, settings); err != nil {
		return err
	}
	metrics.Register(mgr.GetCache(), mgr.Elected(), o.taskMetrics)
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	setupLog.Info("starting", "version", version.Version, "shellImage", o.shellImage, "runnerImage", o.runnerImage, "leaderElect", o.leaderElect)
	// A replica that loses its lease gets an error here and exits, so it
	// never writes as a stale leader.
	return mgr.Start(ctx)
}

// workerSecretsNamespace is where the workers' kubeconfig Secrets are: the
// flag's namespace, else the pod's; outside a pod, none (reading on the
// workers is off).
func workerSecretsNamespace(flagValue string) string {
	ns, err := leader.Namespace(flagValue)
	if err != nil {
		ctrl.Log.WithName("setup").Info("reading output on MultiKueue worker clusters is off: no namespace for their kubeconfig Secrets (--worker-kubeconfig-namespace)")
		return ""
	}
	return ns
}

// limitClient sets one client-side rate limit shared by every resource type
// (controller-runtime otherwise gives each type its own bucket), or none.
func limitClient(cfg *rest.Config, qps float64, burst int) {
	if qps <= 0 {
		cfg.QPS = -1 // no client-side limit
		return
	}
	if burst <= 0 {
		burst = int(qps * 1.5)
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(float32(qps), burst)
}
