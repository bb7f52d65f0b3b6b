// Command bench measures task-operator on a local control plane: Job
// throughput against the API server's own limit, schedule skew against the
// CronJob controller, idle cost and memory. Every figure is measured in the
// same run as the baseline it is compared with, so the ratios mean something
// on a noisy machine; nothing here asserts a timing.
//
//	go run ./test/bench -n 1000 -repeat 3 -scenarios all
//
// It starts its own cluster with hack/local-cluster.sh (restarting it with
// the kube-controller-manager limits each session needs), runs the operator
// as a separate process per session, and prints a table. See
// test/bench/README.md.
//
// What lives where: main.go (flags, the sessions in order), scenarios.go
// (B0, T1, the burst and idle), short.go (short runs), precreated.go,
// memory.go, cron.go (the cron fire and the runs' whole lives), queue.go
// and passcost.go (the queue and its passes), chain.go (spec.after),
// scale.go, oracle.go (the
// oracles, their own process), load.go (objects and the load generator),
// track.go (the benchmark's watch), writes.go, audit.go and apiwrites.go
// (counting requests), diag.go, stats.go, report.go (the table),
// cluster.go and operator.go (the processes).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/zapr"
	"github.com/taskops/task-operator/internal/testutil"
	"go.uber.org/zap"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

type options struct {
	n, repeat    int
	memoryRepeat int // repetitions of the memory session (at most repeat)
	scenarios    map[string]bool
	workers      int
	clusterDir   string
	workDir      string
	idleWindow   time.Duration
	settle       time.Duration
	fastQPS      int
	fastBurst    int
	profile      bool
	keep         bool
	auditPolicy  string
	out          string
	opArgs       []string
	// operatorSource is the checkout ./cmd/manager is built from: this
	// repository unless -operator-source names another (a worktree of an
	// older commit, for a before/after run with one benchmark).
	operatorSource string
	// finalizerPolicy: the clusters get config/samples/policies/add-finalizer.yaml,
	// as the Helm chart installs it on Kubernetes 1.36+.
	finalizerPolicy bool
	// oracle: set (namespace not empty) when this process is an oracle
	// (oracle.go), started by the benchmark itself.
	oracle   oracleArgs
	cronRuns map[string]bool
	// scaleSteps: which steps of the scale scenario run (all by default;
	// a subset for experiments: the report leaves out the rows of the
	// others).
	scaleSteps map[string]bool

	root, managerBin string
	serverVersion    string
	logPath          string
	log              io.Writer // the full log (cluster script output included)
	logMu            sync.Mutex
}

// logf prints a progress line to stderr and the log file.
func (o *options) logf(format string, args ...any) {
	line := time.Now().Format("15:04:05") + " " + fmt.Sprintf(format, args...) + "\n"
	o.logMu.Lock()
	defer o.logMu.Unlock()
	fmt.Fprint(os.Stderr, line)
	if o.log != nil {
		fmt.Fprint(o.log, line)
	}
}

// fastKCM: kube-controller-manager limits raised so the Job controller is
// not what a completion-bound figure measures.
func (o *options) fastKCM() clusterSettings {
	return clusterSettings{kcmQPS: o.fastQPS, kcmBurst: o.fastBurst, nodePods: max(1000, o.n+100)}
}

// The CronJob controller's client limits: kube-controller-manager's
// defaults, and the "equal settings" the operator gets in one cron run.
const (
	equalQPS   = 20
	equalBurst = 30
)

// defaultKCM: kube-controller-manager's own defaults, as in the cron runs.
func (o *options) defaultKCM() clusterSettings {
	return clusterSettings{kcmQPS: equalQPS, kcmBurst: equalBurst, nodePods: max(1000, o.n+100)}
}

// timeout scales a wait meant for N=1000 with N (never below a minute).
func (o *options) timeout(at1000 time.Duration) time.Duration {
	return max(time.Duration(float64(at1000)*float64(o.n)/1000), time.Minute)
}

var allScenarios = []string{"burst", "precreated", "idle", "memory", "cron", "queue", "chain"}

// scaleScenario is not part of "all": it is meant for -n 10000 and takes
// up to half an hour (make bench-scale).
const scaleScenario = "scale"

func parseOptions() (*options, error) {
	o := &options{}
	defN := 1000
	if v := os.Getenv("BENCH_N"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("BENCH_N=%q is not a positive number", v)
		}
		defN = n
	}
	var scen string
	flag.IntVar(&o.n, "n", defN, "objects per scenario (Tasks, Jobs, CronJobs); memory points are 0, n and 5n (default $BENCH_N, else 1000)")
	flag.IntVar(&o.repeat, "repeat", 0, "repetitions of every scenario (0: 3 when n >= 1000, else 1)")
	flag.IntVar(&o.memoryRepeat, "memory-repeat", 1, "repetitions of the memory session (a size, not a latency: one run is steady, and at N=1000 it takes 9 minutes of the hour)")
	flag.StringVar(&scen, "scenarios", "all", "comma-separated subset of "+strings.Join(allScenarios, ",")+" (the B0 baseline runs with burst and cron), or scale (not in all: meant for -n 10000, make bench-scale)")
	flag.IntVar(&o.workers, "workers", 32, "goroutines creating objects (B0 and the load generator)")
	flag.StringVar(&o.clusterDir, "cluster-dir", "tmp/bench-cluster", "the benchmark's own local cluster folder (hack/local-cluster.sh --dir)")
	flag.StringVar(&o.workDir, "work-dir", "tmp/bench", "where the operator binary, logs, profiles and results go")
	flag.DurationVar(&o.idleWindow, "idle-window", 0, "how long the idle scenario watches (0: 60s when n < 1000, else 120s)")
	flag.DurationVar(&o.settle, "settle", 5*time.Second, "pause before a closing measurement so the last writes land")
	flag.IntVar(&o.fastQPS, "kcm-qps", 500, "kube-controller-manager --kube-api-qps for burst, idle and memory")
	flag.IntVar(&o.fastBurst, "kcm-burst", 1000, "kube-controller-manager --kube-api-burst for burst, idle and memory")
	flag.BoolVar(&o.profile, "profile", false, "record CPU profiles of the operator during burst and cron fire (heap profiles are always kept)")
	flag.BoolVar(&o.keep, "keep", false, "leave the last cluster running (for a look around)")
	flag.StringVar(&o.auditPolicy, "audit-policy", "hack/bench-audit-policy.yaml", "audit policy handed to hack/local-cluster.sh as LOCAL_CLUSTER_AUDIT_POLICY; writes are counted from the audit log when the cluster writes one")
	var opArgs, cronRuns, scaleSteps string
	flag.StringVar(&cronRuns, "cron-runs", "operator-equal,cronjob,operator-default", "which cron runs to make (a subset, for experiments; oracle: the cron oracle on a cluster of its own, which operator-default now runs on its own cluster first)")
	flag.StringVar(&scaleSteps, "scale-steps", strings.Join(allScaleSteps, ","), "which steps of the scale scenario to run (a subset, for experiments)")
	flag.BoolVar(&o.finalizerPolicy, "finalizer-policy", true, "install the MutatingAdmissionPolicy that adds the operator's finalizer at creation (config/samples/policies/add-finalizer.yaml; the Helm chart's default on Kubernetes 1.36+); false: the operator patches each new Task for it, as with install.yaml alone")
	var mode string
	var oracleSlot int64
	flag.StringVar(&o.oracle.namespace, "oracle-namespace", "", "internal: run as an oracle in this namespace (the benchmark starts it)")
	flag.StringVar(&o.oracle.kubeconfig, "oracle-kubeconfig", "", "internal: the oracle's kubeconfig")
	flag.StringVar(&mode, "oracle-mode", string(oracleBurst), "internal: the oracle's mode (burst, pre, cron, floor)")
	flag.Int64Var(&oracleSlot, "oracle-slot", 0, "internal: the cron oracle's slot (Unix seconds)")
	flag.IntVar(&o.oracle.split, "oracle-split", 0, "internal: the floor also reports its CPU at this many ends")
	flag.StringVar(&opArgs, "operator-args", "", "extra manager flags for every operator run, space separated (experiments, e.g. --max-concurrent-reconciles=16)")
	flag.StringVar(&o.operatorSource, "operator-source", "", "build the operator from this checkout instead of this repository (e.g. a git worktree of an older commit, to measure before and after with the same benchmark)")
	flag.StringVar(&o.out, "out", "", "also write the table to this file (default WORK_DIR/results.txt)")
	flag.Parse()
	if o.n < 1 {
		return nil, fmt.Errorf("-n must be positive")
	}
	o.opArgs = strings.Fields(opArgs)
	o.oracle.mode, o.oracle.n, o.oracle.workers = oracleMode(mode), o.n, o.workers
	if oracleSlot != 0 {
		o.oracle.slot = time.Unix(oracleSlot, 0)
	}
	o.cronRuns = map[string]bool{}
	for _, r := range strings.Split(cronRuns, ",") {
		o.cronRuns[strings.TrimSpace(r)] = true
	}
	o.scaleSteps = map[string]bool{}
	for _, st := range strings.Split(scaleSteps, ",") {
		st = strings.TrimSpace(st)
		if !contains(allScaleSteps, st) {
			return nil, fmt.Errorf("unknown scale step %q (have %s)", st, strings.Join(allScaleSteps, ", "))
		}
		o.scaleSteps[st] = true
	}
	if o.repeat == 0 {
		o.repeat = 1
		if o.n >= 1000 {
			o.repeat = 3
		}
	}
	if o.idleWindow == 0 {
		o.idleWindow = time.Minute
		if o.n >= 1000 {
			o.idleWindow = 2 * time.Minute
		}
	}
	o.scenarios = map[string]bool{}
	for _, s := range strings.Split(scen, ",") {
		s = strings.TrimSpace(s)
		switch {
		case s == "all":
			for _, a := range allScenarios {
				o.scenarios[a] = true
			}
		case contains(allScenarios, s) || s == scaleScenario:
			o.scenarios[s] = true
		case s == "":
		default:
			return nil, fmt.Errorf("unknown scenario %q (have %s, all, %s)", s, strings.Join(allScenarios, ", "), scaleScenario)
		}
	}
	root := testutil.RepoRoot()
	o.root = root
	for _, p := range []*string{&o.clusterDir, &o.workDir} {
		if !filepath.IsAbs(*p) {
			*p = filepath.Join(root, *p)
		}
	}
	if o.auditPolicy != "" {
		if !filepath.IsAbs(o.auditPolicy) {
			o.auditPolicy = filepath.Join(root, o.auditPolicy)
		}
		if !fileExists(o.auditPolicy) {
			o.auditPolicy = ""
		}
	}
	if o.out == "" {
		o.out = filepath.Join(o.workDir, "results.txt")
	}
	return o, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

func main() {
	// The benchmark's own watches use controller-runtime; its log is not
	// wanted here (progress goes through logf).
	ctrllog.SetLogger(zapr.NewLogger(zap.NewNop()))
	o, err := parseOptions()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if o.oracle.namespace != "" { // this process is an oracle (oracle.go)
		if err := oracleMain(o.oracle); err != nil {
			fmt.Fprintln(os.Stderr, "oracle:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(o *options) error {
	for _, d := range []string{o.workDir, filepath.Join(o.workDir, "logs"), filepath.Join(o.workDir, "profiles")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	o.logPath = filepath.Join(o.workDir, "logs", "bench.log")
	logf, err := os.Create(o.logPath)
	if err != nil {
		return err
	}
	defer logf.Close()
	o.log = logf

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	began := time.Now()
	mach := describeMachine()
	o.logf("task-operator benchmark: n=%d, repeat=%d, scenarios %s; log %s", o.n, o.repeat, strings.Join(selected(o), ","), rel(o.root, o.logPath))
	if o.managerBin, err = buildOperator(ctx, o); err != nil {
		return err
	}
	// The cluster binaries: built on first use (minutes), outside any timing.
	if err := downCluster(o); err != nil {
		return err
	}

	rs := &results{o: o, machine: mach, began: began}
	for rep := 1; rep <= o.repeat; rep++ {
		o.logf("=== repeat %d of %d", rep, o.repeat)
		r := &repeatResult{cron: map[string]*cronResult{}}
		rs.reps = append(rs.reps, r)
		if o.scenarios["burst"] || o.scenarios["idle"] {
			if r.burst, r.idle, err = sessionBurst(ctx, o, rep, o.scenarios["idle"]); err != nil {
				return fmt.Errorf("burst session: %w", err)
			}
		}
		if o.scenarios["precreated"] {
			if r.pre, err = sessionPrecreated(ctx, o, rep); err != nil {
				return fmt.Errorf("precreated session: %w", err)
			}
		}
		if o.scenarios["memory"] && rep <= o.memoryRepeat {
			if r.mem, err = sessionMemory(ctx, o, rep); err != nil {
				return fmt.Errorf("memory session: %w", err)
			}
		}
		if o.scenarios["queue"] {
			if r.queue, err = sessionQueue(ctx, o, rep); err != nil {
				return fmt.Errorf("queue session: %w", err)
			}
		}
		if o.scenarios["chain"] {
			if r.chain, err = sessionChain(ctx, o, rep); err != nil {
				return fmt.Errorf("chain session: %w", err)
			}
		}
		if o.scenarios[scaleScenario] {
			if r.scale, err = sessionScale(ctx, o, rep); err != nil {
				return fmt.Errorf("scale session: %w", err)
			}
		}
		if o.scenarios["cron"] {
			for _, k := range o.cronKinds() {
				if r.cron[k.name], err = sessionCron(ctx, o, rep, k); err != nil {
					return fmt.Errorf("cron session %s: %w", k.name, err)
				}
			}
		}
	}
	rs.ended = time.Now()
	table := rs.render()
	fmt.Print(table)
	if err := os.WriteFile(o.out, []byte(table), 0o644); err != nil {
		return err
	}
	o.logf("table written to %s; wall time %s", rel(o.root, o.out), time.Since(began).Round(time.Second))
	return nil
}

// cronKinds are the cron runs of one repeat. The CronJob controller runs
// once: its own defaults (20/30) are also the equal settings.
func (o *options) cronKinds() []cronKind {
	var out []cronKind
	for _, k := range []cronKind{
		{name: "operator-equal", operator: true, settings: operatorSettings{qps: equalQPS, burst: equalBurst}},
		{name: "cronjob", operator: false, life: true},
		{name: "operator-default", operator: true, life: true, withOracle: true},
		{name: "oracle", oracle: true},
	} {
		if o.cronRuns[k.name] {
			out = append(out, k)
		}
	}
	return out
}

func selected(o *options) []string {
	var out []string
	for _, s := range append(allScenarios, scaleScenario) {
		if o.scenarios[s] {
			out = append(out, s)
		}
	}
	return out
}
