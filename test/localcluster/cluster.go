package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cluster is one local cluster's state folder and what is asked of it.
type Cluster struct {
	Root     string    // repository root (hack/, bin/)
	Dir      string    // state folder, absolute
	Settings Settings  // what Up asks for
	Log      io.Writer // progress; nil means stderr

	started  []string // components started by this process, watched while waiting
	problems []string // what Down could not clean, reported at its end
}

// New is the cluster in dir (made absolute) of the repository at root.
func New(root, dir string, s Settings, log io.Writer) (*Cluster, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = os.Stderr
	}
	return &Cluster{Root: root, Dir: filepath.Clean(abs), Settings: s, Log: log}, nil
}

func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.Dir}, elem...)...)
}

func (c *Cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.Log, "local-cluster: "+format+"\n", args...)
}

// problem records what Down could not clean: it goes on with the rest and
// reports them all at the end.
func (c *Cluster) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	c.logf("warning: %s", msg)
	c.problems = append(c.problems, msg)
}

// Kubeconfig is the admin (system:masters) kubeconfig's path; an error when
// the cluster is not up.
func (c *Cluster) Kubeconfig() (string, error) {
	p := c.path("kubeconfig")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no cluster in %s; run: hack/local-cluster.sh up --dir %s", c.Dir, c.Dir)
	}
	return p, nil
}

// lock allows one Up or Down at a time per folder, across processes.
func (c *Cluster) lock() (unlock func(), err error) {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(c.path(".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
	select {
	case err = <-done:
	case <-time.After(15 * time.Minute):
		err = errors.New("another up/down on " + c.Dir + " is still running")
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { _ = f.Close() }, nil
}

// waitFor polls ok until it holds, within Settings.Timeout; a component this
// process started that exits fails it at once (it will not come back).
func (c *Cluster) waitFor(ctx context.Context, what string, ok func(context.Context) bool) error {
	deadline := time.Now().Add(c.Settings.Timeout)
	for !ok(ctx) {
		for _, name := range c.started {
			if c.pidOf(name) == 0 {
				return fmt.Errorf("%s exited while waiting for %s; see %s", name, what, c.path("logs", name+".log"))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", c.Settings.Timeout, what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	c.logf("ready: %s", what)
	return nil
}

// up reports whether every component of the recorded state runs and the
// API server is ready.
func (c *Cluster) up(ctx context.Context) (State, bool) {
	st, err := ReadState(c.Dir)
	if err != nil {
		return st, false
	}
	for _, name := range componentsFor(st.NodeMode) {
		if c.pidOf(name) == 0 {
			return st, false
		}
	}
	a, err := c.adminAPI(st)
	return st, err == nil && a.ready(ctx)
}

// Up starts the cluster, or reuses the one running in Dir when its settings
// are those asked for. A failed or interrupted (ctx) Up stops what it
// started. It returns the admin kubeconfig's path.
func (c *Cluster) Up(ctx context.Context) (kubeconfig string, err error) {
	unlock, err := c.lock()
	if err != nil {
		return "", err
	}
	defer unlock()
	want := c.Settings.key()
	if st, ok := c.up(ctx); ok {
		if st.Settings == want {
			c.logf("already up in %s", c.Dir)
			return c.path("kubeconfig"), nil
		}
		c.logf("running with %s; asked for %s: restarting", st.Settings, want)
		c.stopAll()
	}
	if len(c.running())+len(c.strays()) > 0 {
		c.logf("found a partly running cluster in %s; restarting it", c.Dir)
		c.stopAll()
	}
	t0 := time.Now()
	defer func() {
		if err != nil {
			c.reportFailure()
		}
	}()
	return c.upAfresh(ctx, want, t0)
}

func (c *Cluster) upAfresh(ctx context.Context, want string, t0 time.Time) (string, error) {
	st := State{Settings: want, KubeconfigPath: c.path("kubeconfig"), NodeName: kwokNodeName, APIServerHost: "127.0.0.1"}
	var err error
	if st.NodeMode, err = c.resolveNodeMode(); err != nil {
		return "", err
	}
	if st.NodeMode != NodeKwok {
		st.RealNodeName = realNodeName
	}
	out, err := exec.Command(filepath.Join(c.Root, "hack", "k8s-binaries.sh"), binariesFor(st.NodeMode)...).Output()
	if err != nil {
		return "", fmt.Errorf("could not get the Kubernetes binaries (hack/k8s-binaries.sh): %w", err)
	}
	st.BinDir = strings.TrimSpace(string(out))

	// A fresh cluster each time: old etcd data, certs and component state go.
	if err := c.removeState(); err != nil {
		return "", err
	}
	for _, d := range []string{"pids", "logs", "kwok"} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			return "", err
		}
	}
	logs, _ := filepath.Glob(c.path("logs", "*.log"))
	for _, f := range logs {
		_ = os.Rename(f, f+".prev") // keep one previous run
	}
	ports, err := pickPorts(7)
	if err != nil {
		return "", err
	}
	for i, p := range []*string{&st.EtcdPort, &st.EtcdPeerPort, &st.APIServerPort, &st.KCMPort, &st.SchedulerPort, &st.KubeletPort, &st.KubeletHealthzPort} {
		*p = strconv.Itoa(ports[i])
	}
	ips := []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(serviceIP)}
	if st.NodeMode != NodeKwok {
		if err := pickBridge(&st); err != nil {
			return "", err
		}
		// The API server serves on the bridge address too, so that pods
		// reach it without kube-proxy.
		st.APIServerHost = st.BridgeIP
		ips = append(ips, net.ParseIP(st.BridgeIP))
		if err := st.write(c.Dir); err != nil { // so that Down can clean up a failed Up
			return "", err
		}
		if err := c.prepareRealNode(st); err != nil {
			return "", err
		}
	}
	if err := c.writeCredentials(st, ips); err != nil {
		return "", err
	}
	if err := st.write(c.Dir); err != nil {
		return "", err
	}
	c.logf("ports: etcd %s (peer %s), apiserver %s:%s, controller-manager %s, scheduler %s",
		st.EtcdPort, st.EtcdPeerPort, st.APIServerHost, st.APIServerPort, st.KCMPort, st.SchedulerPort)
	if err := c.startComponents(ctx, st); err != nil {
		return "", err
	}
	// The admin kubeconfig appears only once everything answers, so a
	// caller that sees the file can use it.
	if err := c.writeKubeconfig(c.path("kubeconfig"), "admin", st); err != nil {
		return "", err
	}
	c.logf("up in %d s with %s (state, logs and pids in %s)", int(time.Since(t0).Seconds()), describeNodes(st), c.Dir)
	c.logf("kubeconfig: %s", c.path("kubeconfig"))
	return c.path("kubeconfig"), nil
}

func (c *Cluster) writeCredentials(st State, ips []net.IP) error {
	pki := c.path("pki")
	if err := os.RemoveAll(pki); err != nil {
		return err
	}
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	if err := writePKI(pki, ips); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	for _, id := range identities {
		if id.name == "admin" {
			continue
		}
		if err := c.writeKubeconfig(filepath.Join(pki, id.name+".kubeconfig"), id.name, st); err != nil {
			return err
		}
	}
	c.logf("made certificates and keys")
	return nil
}

func (c *Cluster) startComponents(ctx context.Context, st State) error {
	if err := c.startEtcd(st); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "etcd on port "+st.EtcdPort, func(context.Context) bool { return listening(st.EtcdPort) }); err != nil {
		return err
	}
	if err := c.startAPIServer(st); err != nil {
		return err
	}
	a, err := c.adminAPI(st)
	if err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-apiserver /readyz", a.ready); err != nil {
		return err
	}
	if err := c.startControllerManager(st); err != nil {
		return err
	}
	if err := c.startScheduler(st); err != nil {
		return err
	}
	if st.NodeMode != NodeReal {
		if err := c.startKwok(st); err != nil {
			return err
		}
		if err := c.createKwokNode(ctx, a); err != nil {
			return err
		}
		if err := c.waitFor(ctx, "node "+kwokNodeName+" Ready and schedulable", func(ctx context.Context) bool { return a.nodeSchedulable(ctx, kwokNodeName) }); err != nil {
			return err
		}
	}
	if st.NodeMode != NodeKwok {
		if err := c.startRealNode(ctx, st); err != nil {
			return err
		}
		if err := c.waitFor(ctx, "node "+realNodeName+" (a real kubelet) Ready and schedulable", func(ctx context.Context) bool { return a.nodeSchedulable(ctx, realNodeName) }); err != nil {
			return err
		}
	}
	if err := c.waitFor(ctx, "default ServiceAccount", a.defaultServiceAccount); err != nil {
		return err
	}
	if err := c.waitFor(ctx, "kube-scheduler /healthz", func(ctx context.Context) bool { return healthz(ctx, st.SchedulerPort) }); err != nil {
		return err
	}
	return c.waitFor(ctx, "kube-controller-manager /healthz", func(ctx context.Context) bool { return healthz(ctx, st.KCMPort) })
}

// reportFailure shows the last lines of every component's log and stops
// what was started.
func (c *Cluster) reportFailure() {
	c.logf("up failed; last log lines:")
	for _, name := range allComponents {
		b, err := os.ReadFile(c.path("logs", name+".log"))
		if err != nil || len(b) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		fmt.Fprintf(c.Log, "  --- %s\n", c.path("logs", name+".log"))
		for _, l := range lines[max(0, len(lines)-8):] {
			fmt.Fprintf(c.Log, "    %s\n", l)
		}
	}
	c.logf("stopping what was started")
	c.stopAll()
}

// stopAll stops the real node first (its pods, then containerd, then what
// they left on the host), then the clients, so they do not spin on a
// vanished API server, etcd last. No step stops the others: what fails is
// recorded (problem) and reported at the end of Down.
func (c *Cluster) stopAll() {
	st, _ := ReadState(c.Dir) // the real node's bridge, cgroup and binaries
	c.downRealNode(st)
	c.stop("kwok", "kube-scheduler", "kube-controller-manager")
	c.stop("kube-apiserver")
	c.stop("etcd")
	c.stopStrays()
}

// removeState removes what one run of the cluster leaves in Dir besides
// its logs (etcd data, pids, state files, the kubeconfig, the components'
// folders) and the extra entries named.
func (c *Cluster) removeState(extra ...string) error {
	paths, _ := filepath.Glob(c.path("kube-*"))
	for _, name := range append([]string{"etcd", "pids", "cluster.env", "cluster.json", "kubeconfig", "kwok"}, extra...) {
		paths = append(paths, c.path(name))
	}
	var errs []error
	for _, p := range paths {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, fmt.Errorf("could not remove %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// Down stops everything the cluster runs and removes its state, keeping the
// logs for a post-mortem; an error lists what it could not clean.
func (c *Cluster) Down() error {
	if _, err := os.Stat(c.Dir); err != nil {
		c.logf("no cluster in %s", c.Dir)
		return nil
	}
	unlock, err := c.lock()
	if err != nil {
		return err
	}
	defer unlock()
	st, _ := ReadState(c.Dir)
	c.stopAll()
	// Nothing in etcd outlives the processes (the next Up starts afresh), so
	// drop it and the credentials.
	if err := c.removeState("pki"); err != nil {
		c.problem("%v", err)
	}
	c.checkHostClean(st)
	if left := c.strays(); len(left) > 0 {
		c.problem("processes still running: %v", left)
	}
	if len(c.problems) > 0 {
		return fmt.Errorf("down (%s), but not clean: %s", c.Dir, strings.Join(c.problems, "; "))
	}
	c.logf("down (%s)", c.Dir)
	return nil
}

// checkHostClean warns when something of the real node is left on the host.
func (c *Cluster) checkHostClean(st State) {
	var left []string
	if _, err := net.InterfaceByName(st.BridgeName); st.BridgeName != "" && err == nil {
		left = append(left, "bridge "+st.BridgeName)
	}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(b), " "+c.Dir+"/") {
		left = append(left, "mounts under "+c.Dir)
	}
	if len(left) > 0 {
		c.logf("warning: left on the host: %s", strings.Join(left, ", "))
	}
}

// resolveNodeMode turns NodeAuto into real when this machine can run a
// kubelet (installing its packages if needed) and kwok otherwise, saying
// which and why.
func (c *Cluster) resolveNodeMode() (string, error) {
	mode := c.Settings.Node
	if mode == NodeKwok {
		return mode, nil
	}
	deps := exec.Command(filepath.Join(c.Root, "hack", "real-node-deps.sh"))
	deps.Stdout, deps.Stderr = c.Log, c.Log
	_ = deps.Run() // what is still missing is reported below
	if why := realNodeUnavailable(); why != "" {
		if mode != NodeAuto {
			return "", fmt.Errorf("LOCAL_CLUSTER_NODE=%s, but this machine cannot run a real node: %s", mode, why)
		}
		c.logf("NOTE: no real node on this machine (%s): falling back to a kwok node, so pods are SIMULATED (no container runs)", why)
		return NodeKwok, nil
	}
	if mode == NodeAuto {
		return NodeReal, nil
	}
	return mode, nil
}

func describeNodes(st State) string {
	switch st.NodeMode {
	case NodeReal:
		return "a real node (" + realNodeName + ": kubelet, containerd, runc)"
	case NodeBoth:
		return "a real node (" + realNodeName + ") and a kwok node (" + kwokNodeName + ")"
	default:
		return "a kwok node (" + kwokNodeName + ": simulated pods)"
	}
}

// Status writes what runs to w; an error when the cluster is not up.
func (c *Cluster) Status(ctx context.Context, w io.Writer) error {
	st, err := ReadState(c.Dir)
	if err != nil {
		return fmt.Errorf("not up (no cluster in %s)", c.Dir)
	}
	row := func(k, format string, args ...any) { fmt.Fprintf(w, "%-24s %s\n", k, fmt.Sprintf(format, args...)) }
	row("node", "%s", describeNodes(st))
	up := true
	for _, name := range componentsFor(st.NodeMode) {
		if pid := c.pidOf(name); pid != 0 {
			row(name, "running (pid %d)", pid)
		} else {
			row(name, "stopped")
			up = false
		}
	}
	row("ports", "etcd %s (peer %s), apiserver %s, controller-manager %s, scheduler %s",
		st.EtcdPort, st.EtcdPeerPort, st.APIServerPort, st.KCMPort, st.SchedulerPort)
	row("settings", "%s", st.Settings)
	a, err := c.adminAPI(st)
	if !up || err != nil || !a.ready(ctx) {
		row("/readyz", "not ready")
		return errors.New("not ready")
	}
	row("/readyz", "ok")
	for _, n := range []string{st.NodeName, st.RealNodeName} {
		if n == "" || (n == st.NodeName && st.NodeMode == NodeReal) {
			continue
		}
		ready, _ := a.node(ctx, n)
		switch ready {
		case "True":
			ready = "Ready"
		case "":
			ready = "missing"
		default:
			ready = "Ready=" + ready
		}
		row("node "+n, "%s", ready)
	}
	row("kubeconfig", "%s", c.path("kubeconfig"))
	return nil
}

// LoadImages imports OCI image archives (make image) into the real node's
// containerd; a kwok node runs no images, so there it does nothing.
func (c *Cluster) LoadImages(archives ...string) error {
	st, err := ReadState(c.Dir)
	if err != nil {
		return fmt.Errorf("no cluster in %s", c.Dir)
	}
	if st.NodeMode == NodeKwok || st.NodeMode == "" {
		c.logf("a kwok node runs no images: nothing to load")
		return nil
	}
	if c.pidOf("containerd") == 0 {
		return errors.New("the real node's containerd is not running")
	}
	return c.importImages(archives...)
}

// StartKubelet starts the real node's kubelet again when it is not running
// (after a crash) and waits for the node to be Ready.
func (c *Cluster) StartKubelet(ctx context.Context) error {
	st, err := ReadState(c.Dir)
	if err != nil {
		return fmt.Errorf("no cluster in %s", c.Dir)
	}
	if st.NodeMode == NodeKwok || st.NodeMode == "" {
		return errNoRealNode
	}
	if c.pidOf("kubelet") != 0 {
		c.logf("the kubelet is running")
		return nil
	}
	a, err := c.adminAPI(st)
	if err != nil {
		return err
	}
	if err := c.startKubelet(st); err != nil {
		return err
	}
	return c.waitFor(ctx, "node "+realNodeName+" Ready", func(ctx context.Context) bool { return a.nodeSchedulable(ctx, realNodeName) })
}
