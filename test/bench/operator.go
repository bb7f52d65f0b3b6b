package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// operatorSettings are the manager flags a session runs the operator with.
type operatorSettings struct {
	qps   float64 // --kube-api-qps; 0: the default, no client-side limit
	burst int
}

func (s operatorSettings) String() string {
	if s.qps <= 0 {
		return "operator defaults (no client-side limit)"
	}
	return fmt.Sprintf("operator --kube-api-qps=%s --kube-api-burst=%d (one shared limiter)", fmtNum(s.qps), s.burst)
}

// operator is a running manager process.
type operator struct {
	cmd                *exec.Cmd
	done               chan struct{}
	metricsURL, pprofU string
	logPath            string
	http               *http.Client
}

// buildOperator compiles ./cmd/manager once per benchmark run.
func buildOperator(ctx context.Context, o *options) (string, error) {
	bin := filepath.Join(o.workDir, "manager")
	c := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/manager")
	c.Dir = o.root
	c.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := c.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/manager: %w\n%s", err, trimOutput(out))
	}
	return bin, nil
}

// startOperator runs the manager against the cluster with s's flags and
// waits until it is ready.
func startOperator(ctx context.Context, o *options, cl *cluster, s operatorSettings, name string) (*operator, error) {
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	metricsAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	probeAddr := "127.0.0.1:" + strconv.Itoa(ports[1])
	pprofAddr := "127.0.0.1:" + strconv.Itoa(ports[2])
	args := []string{
		"--metrics-bind-address=" + metricsAddr,
		"--health-probe-bind-address=" + probeAddr,
		"--pprof-bind-address=" + pprofAddr,
		"--log-format=json",
	}
	if s.qps > 0 {
		args = append(args, "--kube-api-qps="+strconv.FormatFloat(s.qps, 'f', -1, 64), "--kube-api-burst="+strconv.Itoa(s.burst))
	}
	args = append(args, o.opArgs...)
	logPath := filepath.Join(o.workDir, "logs", "operator-"+name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.managerBin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cl.kubeconfig)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	op := &operator{
		cmd: cmd, done: make(chan struct{}), logPath: logPath,
		metricsURL: "http://" + metricsAddr + "/metrics",
		pprofU:     "http://" + pprofAddr + "/debug/pprof",
		http:       &http.Client{Timeout: 2 * time.Minute},
	}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(op.done)
	}()
	o.logf("operator started (pid %d, %s, log %s)", cmd.Process.Pid, joinNonEmpty(" ", s.String(), strings.Join(o.opArgs, " ")), rel(o.root, logPath))
	err = poll(ctx, 60*time.Second, 200*time.Millisecond, func() (bool, error) {
		select {
		case <-op.done:
			return false, fmt.Errorf("the operator exited; see %s", logPath)
		default:
		}
		resp, err := op.http.Get("http://" + probeAddr + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		op.stop(o)
		return nil, fmt.Errorf("waiting for the operator to be ready: %w", err)
	}
	return op, nil
}

// stop sends SIGTERM and waits up to 15 s, then kills the process.
func (op *operator) stop(o *options) {
	if op == nil {
		return
	}
	_ = op.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-op.done:
	case <-time.After(15 * time.Second):
		o.logf("operator ignored SIGTERM for 15 s; killing it")
		_ = op.cmd.Process.Kill()
		<-op.done
	}
}

func (op *operator) get(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := op.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return body, nil
}

func (op *operator) metrics(ctx context.Context) (metrics, error) {
	body, err := op.get(ctx, op.metricsURL)
	if err != nil {
		return nil, fmt.Errorf("scraping the operator's metrics: %w", err)
	}
	return parseMetrics(bytes.NewReader(body))
}

// memory is the operator's RSS and live Go heap in bytes. The heap profile
// endpoint with gc=1 runs a garbage collection first, so the heap figure is
// (nearly) live objects rather than wherever the GC cycle happens to be;
// the profile is kept in save (unless empty).
func (op *operator) memory(ctx context.Context, save string) (rss, heap float64, err error) {
	prof, err := op.get(ctx, op.pprofU+"/heap?gc=1")
	if err != nil {
		return 0, 0, err
	}
	if save != "" {
		_ = os.WriteFile(save, prof, 0o644)
	}
	m, err := op.metrics(ctx)
	if err != nil {
		return 0, 0, err
	}
	return m.value("process_resident_memory_bytes"), m.value("go_memstats_heap_alloc_bytes"), nil
}

// cpuProfile records a CPU profile of the operator for d into path, in the
// background; wait for the returned channel.
func (op *operator) cpuProfile(ctx context.Context, d time.Duration, path string) <-chan error {
	ch := make(chan error, 1)
	go func() {
		secs := max(int(d.Seconds()+0.5), 1)
		prof, err := op.get(ctx, op.pprofU+"/profile?seconds="+strconv.Itoa(secs))
		if err == nil {
			err = os.WriteFile(path, prof, 0o644)
		}
		ch <- err
	}()
	return ch
}

// freePorts picks n free loopback ports.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func rel(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil {
		return r
	}
	return p
}
