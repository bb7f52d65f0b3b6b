package harness

import (
	"context"
	"encoding/json"
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
)

// Cluster is a local control plane run by hack/local-cluster.sh, with the
// Task CRD installed and an admin client.
type Cluster struct {
	Root       string // repository root
	Dir        string // the cluster's state folder
	Kubeconfig string // admin (system:masters) kubeconfig
	Kubectl    string // the project's kubectl (same version as the cluster)
	Config     *rest.Config
	Client     client.WithWatch
	// Node is the node mode the cluster came up with: "real", "kwok" or
	// "both" (hack/local-cluster.sh, LOCAL_CLUSTER_NODE).
	Node string
	// Log receives hack/local-cluster.sh's progress; nil means stderr.
	Log io.Writer
	env []string
}

// RealNode reports whether pods run real containers (a real node, alone).
func (c *Cluster) RealNode() bool { return c.Node == "real" }

// ClusterOptions says where and how to start a Cluster.
type ClusterOptions struct {
	// Dir is the state folder (hack/local-cluster.sh --dir).
	Dir string
	// Reuse keeps a cluster already running in Dir, objects and all
	// (hack/local-cluster.sh up reuses a running cluster whose settings
	// match); otherwise the cluster starts afresh from an empty etcd.
	Reuse bool
	// Env is added to hack/local-cluster.sh's environment (KCM_QPS, ...).
	Env []string
	// Node asks for a node mode (LOCAL_CLUSTER_NODE: real, kwok, both,
	// auto); empty means the script's default, auto.
	Node string
	// Logf reports progress; nil means stderr.
	Logf func(format string, args ...any)
	// Log receives hack/local-cluster.sh's progress; nil means stderr.
	Log io.Writer
}

// StartCluster brings the cluster up (afresh unless o.Reuse), installs the
// Task CRD and makes an admin client with generous client-side limits.
func StartCluster(o ClusterOptions) (*Cluster, error) {
	logf := o.Logf
	if logf == nil {
		logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	}
	c := &Cluster{Root: testutil.RepoRoot(), Dir: o.Dir, Log: o.Log, env: o.Env}
	if o.Node != "" {
		c.env = append(c.env, "LOCAL_CLUSTER_NODE="+o.Node)
	}
	if abs, err := filepath.Abs(c.Dir); err == nil {
		c.Dir = abs
	}
	out, err := exec.Command(filepath.Join(c.Root, "hack", "k8s-binaries.sh"), "kubectl").Output()
	if err != nil {
		return nil, fmt.Errorf("hack/k8s-binaries.sh kubectl: %w", err)
	}
	c.Kubectl = filepath.Join(strings.TrimSpace(string(out)), "kubectl")

	t := time.Now()
	if !o.Reuse {
		// `up` would reuse a cluster left running by an earlier, aborted
		// run, with its objects in it.
		if err := c.Script("down"); err != nil {
			return nil, err
		}
	}
	if err := c.Script("up"); err != nil {
		// An interrupted or failed up may leave components behind.
		_ = c.Script("down")
		return nil, err
	}
	out, err = exec.Command(filepath.Join(c.Root, "hack", "local-cluster.sh"), "kubeconfig", "--dir", c.Dir).Output()
	if err != nil {
		return nil, fmt.Errorf("hack/local-cluster.sh kubeconfig: %w", err)
	}
	c.Kubeconfig = strings.TrimSpace(string(out))
	state, err := c.State()
	if err != nil {
		return nil, err
	}
	c.Node = state["NODE_MODE"]
	logf("cluster up in %s (node: %s)", time.Since(t).Round(time.Millisecond), c.Node)

	if out, err := c.RunKubectl(context.Background(), "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(c.Root, "config", "crd", "bases")); err != nil {
		return nil, fmt.Errorf("installing the CRD: %w\n%s", err, out)
	}
	// `kubectl wait` fails, rather than waits, while the new CRD has no
	// conditions yet: poll its Established condition instead.
	established := func() bool {
		out, err := c.RunKubectl(context.Background(), "get", "crd", "tasks.batch.taskops.io",
			"-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		return err == nil && strings.TrimSpace(string(out)) == "True"
	}
	for deadline := time.Now().Add(60 * time.Second); !established(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the Task CRD was not Established within 60s")
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

// Script runs hack/local-cluster.sh CMD --dir DIR ARGS..., its progress on
// stderr.
func (c *Cluster) Script(cmd string, args ...string) error {
	sh := exec.Command(filepath.Join(c.Root, "hack", "local-cluster.sh"), append([]string{cmd, "--dir", c.Dir}, args...)...)
	sh.Env = append(os.Environ(), c.env...)
	sh.Stdout, sh.Stderr = io.Discard, c.Log
	if c.Log == nil {
		sh.Stderr = os.Stderr
	}
	if err := sh.Run(); err != nil {
		return fmt.Errorf("hack/local-cluster.sh %s --dir %s %s: %w", cmd, c.Dir, strings.Join(args, " "), err)
	}
	return nil
}

// LoadImages imports image archives into the real node (a no-op on kwok).
func (c *Cluster) LoadImages(archives ...string) error { return c.Script("load-image", archives...) }

// Down stops the cluster (hack/local-cluster.sh down).
func (c *Cluster) Down() error { return c.Script("down") }

// RunKubectl runs the project's kubectl against the cluster as admin.
func (c *Cluster) RunKubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.Kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// State is the cluster's state as `up` recorded it (cluster.json: ports,
// bin folder, node mode, settings), keyed as in cluster.env.
func (c *Cluster) State() (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(c.Dir, "cluster.json"))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(c.Dir, "cluster.json"), err)
	}
	return out, nil
}

// PIDFile is the file hack/local-cluster.sh keeps a component's pid in.
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
