//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/internal/testutil"
)

// env is what every test uses: the cluster, a client and the operator.
var env *environment

type environment struct {
	root       string // repository root
	dir        string // the cluster's state folder
	kubeconfig string
	kubectl    string // the project's kubectl (same version as the cluster)
	cfg        *rest.Config
	c          client.WithWatch
	op         *operator
	keep       bool
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
}

func runMain(m *testing.M) (code int) {
	root := testutil.RepoRoot()
	if abs, err := filepath.Abs(root); err == nil {
		root = abs
	}
	e := &environment{
		root: root,
		dir:  os.Getenv("E2E_CLUSTER_DIR"),
		keep: os.Getenv("E2E_KEEP_CLUSTER") == "1",
	}
	if e.dir == "" {
		e.dir = filepath.Join(root, "tmp", "e2e-cluster")
	}
	if abs, err := filepath.Abs(e.dir); err == nil {
		e.dir = abs
	}
	tmp, err := os.MkdirTemp("", "task-operator-e2e-")
	if err != nil {
		logf("%v", err)
		return 1
	}

	var once sync.Once
	teardown := func() {
		once.Do(func() {
			if e.op != nil {
				if err := e.op.stop(); err != nil {
					logf("stopping the operator: %v", err)
				}
			}
			if e.keep {
				logf("E2E_KEEP_CLUSTER=1: the cluster keeps running; KUBECONFIG=%s; stop it with: hack/local-cluster.sh down --dir %s", e.kubeconfig, e.dir)
			} else if err := e.cluster("down"); err != nil {
				logf("bringing the cluster down: %v", err)
				code = 1
			}
			_ = os.RemoveAll(tmp)
		})
	}
	defer teardown()
	// Ctrl-C or a kill of the test binary still stops what we started. (A
	// `go test -timeout` panic does not run this; the operator dies with the
	// test process on Linux, and the next run restarts the cluster.)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-sigs
		logf("got %v: cleaning up", s)
		teardown()
		os.Exit(130)
	}()

	// The parallel tests mostly wait on the cluster: run them all at once
	// unless -parallel says otherwise (its default is GOMAXPROCS).
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", "8")
	}

	t0 := time.Now()
	if err := e.setup(tmp); err != nil {
		logf("setup failed: %v", err)
		return 1
	}
	logf("setup took %s (cluster in %s, operator log %s)", time.Since(t0).Round(time.Millisecond), e.dir, e.op.logPath)
	env = e

	code = m.Run()

	if !e.op.alive() {
		logf("FAIL: the operator is not running at the end of the suite (it exited: %v); see %s", e.op.exitErr(), e.op.logPath)
		code = 1
	}
	if bad := e.op.logProblems(); bad != "" {
		logf("FAIL: the operator log %s has: %s", e.op.logPath, bad)
		code = 1
	}
	return code
}

func (e *environment) setup(tmp string) error {
	out, err := exec.Command(filepath.Join(e.root, "hack", "k8s-binaries.sh"), "kubectl").Output()
	if err != nil {
		return fmt.Errorf("hack/k8s-binaries.sh kubectl: %w", err)
	}
	e.kubectl = filepath.Join(strings.TrimSpace(string(out)), "kubectl")

	// A fresh cluster: `up` would reuse one left running by an earlier,
	// aborted run, with its objects in it.
	t := time.Now()
	if err := e.cluster("down"); err != nil {
		return err
	}
	if err := e.cluster("up"); err != nil {
		return err
	}
	out, err = exec.Command(filepath.Join(e.root, "hack", "local-cluster.sh"), "kubeconfig", "--dir", e.dir).Output()
	if err != nil {
		return fmt.Errorf("hack/local-cluster.sh kubeconfig: %w", err)
	}
	e.kubeconfig = strings.TrimSpace(string(out))
	logf("cluster up in %s", time.Since(t).Round(time.Millisecond))

	if out, err := e.runKubectl(context.Background(), "apply", "--server-side", "-f", filepath.Join(e.root, "config", "crd", "bases")); err != nil {
		return fmt.Errorf("installing the CRD: %w\n%s", err, out)
	}
	// `kubectl wait` fails, rather than waits, while the new CRD has no
	// conditions yet: poll its Established condition instead.
	established := func() bool {
		out, err := e.runKubectl(context.Background(), "get", "crd", "tasks.batch.taskops.io",
			"-o", `jsonpath={.status.conditions[?(@.type=="Established")].status}`)
		return err == nil && strings.TrimSpace(string(out)) == "True"
	}
	for deadline := time.Now().Add(60 * time.Second); !established(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the Task CRD was not Established within 60s")
		}
	}

	e.cfg, err = clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		return err
	}
	e.cfg.QPS, e.cfg.Burst = 200, 400
	e.c, err = client.NewWithWatch(e.cfg, client.Options{Scheme: testutil.Scheme()})
	if err != nil {
		return err
	}

	bin := os.Getenv("E2E_MANAGER_BINARY")
	if bin == "" {
		bin = filepath.Join(tmp, "manager")
		t := time.Now()
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/manager")
		cmd.Dir = e.root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./cmd/manager: %w\n%s", err, out)
		}
		logf("built the manager in %s", time.Since(t).Round(time.Millisecond))
	}
	e.op = &operator{bin: bin, kubeconfig: e.kubeconfig, logPath: filepath.Join(e.dir, "operator.log")}
	if err := os.WriteFile(e.op.logPath, nil, 0o644); err != nil {
		return err
	}
	ready, err := e.op.start()
	if err != nil {
		return err
	}
	logf("operator ready in %s", ready.Round(time.Millisecond))
	return nil
}

// cluster runs hack/local-cluster.sh CMD --dir DIR, its progress on stderr.
func (e *environment) cluster(cmd string) error {
	c := exec.Command(filepath.Join(e.root, "hack", "local-cluster.sh"), cmd, "--dir", e.dir)
	c.Stdout, c.Stderr = io.Discard, os.Stderr
	if err := c.Run(); err != nil {
		return fmt.Errorf("hack/local-cluster.sh %s --dir %s: %w", cmd, e.dir, err)
	}
	return nil
}

// runKubectl runs the project's kubectl against the cluster.
func (e *environment) runKubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, e.kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// operator is the manager process.
type operator struct {
	bin, kubeconfig, logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // of the last exit
	starts int
}

// start runs the manager and waits for its /readyz; it returns how long that took.
func (o *operator) start() (time.Duration, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd != nil {
		select {
		case <-o.exited:
		default:
			return 0, errors.New("the operator is already running")
		}
	}
	probe, err := freeAddr()
	if err != nil {
		return 0, err
	}
	logFile, err := os.OpenFile(o.logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return 0, err
	}
	o.starts++
	fmt.Fprintf(logFile, "\n===== e2e: operator start #%d at %s =====\n", o.starts, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(o.bin,
		"--log-format=console",
		"--metrics-bind-address=0",
		"--health-probe-bind-address="+probe,
	)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+o.kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	dieWithParent(cmd)
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return 0, err
	}
	exited := make(chan struct{})
	go func() {
		err := cmd.Wait()
		logFile.Close()
		o.mu.Lock()
		o.err = err
		o.mu.Unlock()
		close(exited)
	}()
	o.cmd, o.exited = cmd, exited

	deadline := time.Now().Add(60 * time.Second)
	hc := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-exited:
			return 0, fmt.Errorf("the operator exited at start; see %s", o.logPath)
		default:
		}
		if resp, err := hc.Get("http://" + probe + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(t0), nil
			}
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the operator's /readyz did not answer within 60s; see %s", o.logPath)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (o *operator) kill() error { return o.signal(syscall.SIGKILL, 10*time.Second) }

// stop sends SIGTERM, and SIGKILL after 20 s.
func (o *operator) stop() error {
	if err := o.signal(syscall.SIGTERM, 20*time.Second); err != nil {
		return o.kill()
	}
	return nil
}

func (o *operator) signal(sig syscall.Signal, wait time.Duration) error {
	o.mu.Lock()
	cmd, exited := o.cmd, o.exited
	o.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-exited:
		return nil
	default:
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case <-exited:
		return nil
	case <-time.After(wait):
		return fmt.Errorf("the operator did not exit within %s of %v", wait, sig)
	}
}

func (o *operator) alive() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd == nil {
		return false
	}
	select {
	case <-o.exited:
		return false
	default:
		return true
	}
}

func (o *operator) exitErr() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// logProblems names signs of trouble in the operator's log: panics and
// data races.
func (o *operator) logProblems() string {
	data, err := os.ReadFile(o.logPath)
	if err != nil {
		return err.Error()
	}
	var found []string
	for _, s := range []string{"panic:", "Observed a panic", "WARNING: DATA RACE"} {
		if bytes.Contains(data, []byte(s)) {
			found = append(found, fmt.Sprintf("%q", s))
		}
	}
	return strings.Join(found, ", ")
}

// freeAddr is a loopback address with a port nothing listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
