package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/localcluster"
)

// Cluster is a local control plane (test/localcluster), with the Task CRD
// installed and an admin client.
type Cluster struct {
	Root       string // repository root
	Dir        string // the cluster's state folder
	Kubeconfig string // admin (system:masters) kubeconfig
	Kubectl    string // the project's kubectl (same version as the cluster)
	Config     *rest.Config
	Client     client.WithWatch
	// Node is the node mode the cluster came up with: "real", "kwok" or
	// "both" (localcluster.Settings.Node).
	Node string
	lc   *localcluster.Cluster
}

// RealNode reports whether pods run real containers (a real node, alone).
func (c *Cluster) RealNode() bool { return c.Node == localcluster.NodeReal }

// ClusterOptions says where and how to start a Cluster.
type ClusterOptions struct {
	// Dir is the state folder.
	Dir string
	// Reuse keeps a cluster already running in Dir, objects and all (Up
	// reuses a running cluster whose settings match); otherwise the cluster
	// starts afresh from an empty etcd.
	Reuse bool
	// Env overrides the environment the settings are read from
	// (localcluster.SettingsFromEnv: KCM_QPS, ...), as NAME=value.
	Env []string
	// Node asks for a node mode (real, kwok, both, auto); empty means the
	// environment's LOCAL_CLUSTER_NODE, else auto.
	Node string
	// Logf reports progress; nil means stderr.
	Logf func(format string, args ...any)
	// Log receives the cluster's own progress; nil means stderr.
	Log io.Writer
}

// settings reads localcluster.Settings from the environment with o's
// overrides.
func (o ClusterOptions) settings() (localcluster.Settings, error) {
	env := map[string]string{}
	for _, kv := range o.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	if o.Node != "" {
		env["LOCAL_CLUSTER_NODE"] = o.Node
	}
	return localcluster.SettingsFromEnv(func(k string) string {
		if v, ok := env[k]; ok {
			return v
		}
		return os.Getenv(k)
	})
}

// StartCluster brings the cluster up (afresh unless o.Reuse), installs the
// Task CRD and makes an admin client with generous client-side limits.
func StartCluster(o ClusterOptions) (*Cluster, error) {
	logf := o.Logf
	if logf == nil {
		logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	}
	settings, err := o.settings()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Root: testutil.RepoRoot()}
	if c.lc, err = localcluster.New(c.Root, o.Dir, settings, o.Log); err != nil {
		return nil, err
	}
	c.Dir = c.lc.Dir
	out, err := exec.Command(filepath.Join(c.Root, "hack", "k8s-binaries.sh"), "kubectl").Output()
	if err != nil {
		return nil, fmt.Errorf("hack/k8s-binaries.sh kubectl: %w", err)
	}
	c.Kubectl = filepath.Join(strings.TrimSpace(string(out)), "kubectl")

	t := time.Now()
	if !o.Reuse {
		// Up would reuse a cluster left running by an earlier, aborted run,
		// with its objects in it.
		if err := c.lc.Down(); err != nil {
			return nil, err
		}
	}
	// Up stops what it started when it fails.
	if c.Kubeconfig, err = c.lc.Up(context.Background()); err != nil {
		return nil, err
	}
	state, err := c.State()
	if err != nil {
		return nil, err
	}
	c.Node = state.NodeMode
	logf("cluster up in %s (node: %s)", time.Since(t).Round(time.Millisecond), c.Node)

	if out, err := c.RunKubectl(context.Background(), "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(c.Root, "config", "crd", "bases")); err != nil {
		return nil, fmt.Errorf("installing the CRD: %w\n%s", err, out)
	}
	// `kubectl wait` fails, rather than waits, while a new CRD has no
	// conditions yet: poll their Established conditions instead. All of
	// them: the operator watches each kind, and does not start without.
	crds := []string{"tasks.batch.taskops.io", "taskqueues.batch.taskops.io", "taskcalendars.batch.taskops.io"}
	established := func() bool {
		out, err := c.RunKubectl(context.Background(), append(append([]string{"get", "crd"}, crds...),
			"-o", `jsonpath={range .items[*]}{.status.conditions[?(@.type=="Established")].status}{" "}{end}`)...)
		return err == nil && strings.TrimSpace(string(out)) == strings.TrimSpace(strings.Repeat("True ", len(crds)))
	}
	for deadline := time.Now().Add(60 * time.Second); !established(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the CRDs %v were not Established within 60s", crds)
		}
	}
	c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	c.Config.QPS, c.Config.Burst = 200, 400
	c.Client, err = client.NewWithWatch(c.Config, client.Options{Scheme: testutil.Scheme()})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// LoadImages imports image archives into the real node (a no-op on kwok).
func (c *Cluster) LoadImages(archives ...string) error { return c.lc.LoadImages(archives...) }

// StartKubelet starts the real node's kubelet again after it died, and waits
// for the node to be Ready.
func (c *Cluster) StartKubelet(ctx context.Context) error { return c.lc.StartKubelet(ctx) }

// Down stops the cluster.
func (c *Cluster) Down() error { return c.lc.Down() }

// DownCluster stops the local cluster in dir, whoever started it; log nil
// means stderr.
func DownCluster(root, dir string, log io.Writer) error {
	lc, err := localcluster.New(root, dir, localcluster.Settings{}, log)
	if err != nil {
		return err
	}
	return lc.Down()
}

// RunKubectl runs the project's kubectl against the cluster as admin.
func (c *Cluster) RunKubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.Kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// State is the cluster's state as Up recorded it: ports, bin folder, node
// mode, settings, the real node's bridge.
func (c *Cluster) State() (localcluster.State, error) { return localcluster.ReadState(c.Dir) }

// PIDFile is the file the cluster keeps a component's pid in.
func (c *Cluster) PIDFile(component string) string {
	return filepath.Join(c.Dir, "pids", component+".pid")
}

// LogFile is the file a component logs to.
func (c *Cluster) LogFile(component string) string {
	return filepath.Join(c.Dir, "logs", component+".log")
}

// ComponentPID is the pid of a running component (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok) and its command line.
func (c *Cluster) ComponentPID(component string) (int, []string, error) {
	b, err := os.ReadFile(c.PIDFile(component))
	if err != nil {
		return 0, nil, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", c.PIDFile(component), err)
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0, nil, fmt.Errorf("%s (pid %d) is not running: %w", component, pid, err)
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	if !strings.Contains(string(raw), c.Dir+"/") {
		return 0, nil, fmt.Errorf("pid %d is not this cluster's %s", pid, component)
	}
	return pid, args, nil
}

// BuildManager builds ./cmd/manager into out.
func BuildManager(root, out string) error { return Build(root, "./cmd/manager", out) }

// Build builds one of the module's commands (pkg, as "./cmd/NAME") into out,
// statically (CGO_ENABLED=0) as the release image ships it.
func Build(root, pkg, out string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// CleanupOnSignal runs teardown and exits 130 when the test binary gets
// Ctrl-C or a kill, so what a suite started is still stopped. (A `go test
// -timeout` panic does not run it; the operator dies with the test process
// on Linux, and the next run restarts the cluster.)
func CleanupOnSignal(logf func(format string, args ...any), teardown func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig := <-sigs
		logf("got %v: cleaning up", sig)
		teardown()
		os.Exit(130)
	}()
}
