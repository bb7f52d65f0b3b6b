package harness

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Operator is one manager process (the binary of ./cmd/manager). It can be
// started again after it exited; every start appends to the same log.
type Operator struct {
	Bin        string
	Kubeconfig string
	LogPath    string
	// Name appears in the log's start banners ("e2e", "replica-1", ...).
	Name string
	// Args are flags beyond the ones Start always sets
	// (--log-format=console, --health-probe-bind-address, and
	// --metrics-bind-address: a free loopback port when Metrics is set,
	// else 0).
	Args []string
	// Metrics serves the manager's metrics on a free loopback port
	// (MetricsURL), plain HTTP (--metrics-secure=false) unless SecureMetrics.
	Metrics bool
	// SecureMetrics serves them as the shipped Deployment does: HTTPS, to
	// bearer tokens the API server authorizes for GET /metrics.
	SecureMetrics bool
	// Pprof serves the manager's profiles on a free loopback port
	// (PprofURL).
	Pprof bool
	// ReadyTimeout bounds how long Start waits for /readyz (default 60 s).
	ReadyTimeout time.Duration

	mu          sync.Mutex
	cmd         *exec.Cmd
	exited      chan struct{}
	err         error // of the last exit
	starts      int
	metricsAddr string
	probeAddr   string
	pprofAddr   string
}

// Start runs the manager and waits for its /readyz; it returns how long
// that took.
func (o *Operator) Start() (time.Duration, error) {
	o.mu.Lock()
	if o.cmd != nil {
		select {
		case <-o.exited:
		default:
			o.mu.Unlock()
			return 0, errors.New("the operator is already running")
		}
	}
	// Three distinct ports, taken at once: two picks one after the other
	// can get the same port back, and a manager whose metrics server then
	// cannot bind exits after /readyz already answered (a benchmark once
	// waited on it until CI's deadline).
	addrs, err := FreeAddrs(3)
	if err != nil {
		o.mu.Unlock()
		return 0, err
	}
	probe := addrs[0]
	o.probeAddr = probe
	metrics := "0"
	if o.Metrics {
		metrics = addrs[1]
		o.metricsAddr = metrics
	}
	if o.Pprof {
		o.pprofAddr = addrs[2]
	}
	logFile, err := os.OpenFile(o.LogPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		o.mu.Unlock()
		return 0, err
	}
	o.starts++
	name := o.Name
	if name == "" {
		name = "operator"
	}
	fmt.Fprintf(logFile, "\n===== %s: start #%d at %s =====\n", name, o.starts, time.Now().Format(time.RFC3339Nano))
	args := append([]string{
		"--log-format=console",
		"--metrics-bind-address=" + metrics,
		"--health-probe-bind-address=" + probe,
	}, o.Args...)
	if o.Metrics && !o.SecureMetrics {
		args = append(args, "--metrics-secure=false")
	}
	if o.Pprof {
		args = append(args, "--pprof-bind-address="+o.pprofAddr)
	}
	cmd := exec.Command(o.Bin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+o.Kubeconfig)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	DieWithParent(cmd)
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		o.mu.Unlock()
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
	o.mu.Unlock()

	timeout := o.ReadyTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-exited:
			return 0, fmt.Errorf("the operator exited at start (%v); see %s", o.ExitErr(), o.LogPath)
		default:
		}
		if o.serves(hc) {
			return time.Since(t0), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the operator's /readyz did not answer within %s; see %s", timeout, o.LogPath)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// serves reports whether the manager answers on every address Start gave
// it: /readyz, and the plain metrics and the profiles when asked for (the
// manager starts those servers apart from the probe's, and exits when one
// cannot bind).
func (o *Operator) serves(hc *http.Client) bool {
	urls := []string{"http://" + o.probeAddr + "/readyz"}
	if o.Metrics && !o.SecureMetrics {
		urls = append(urls, "http://"+o.metricsAddr+"/metrics")
	}
	if o.Pprof {
		urls = append(urls, "http://"+o.pprofAddr+"/debug/pprof/")
	}
	for _, u := range urls {
		resp, err := hc.Get(u)
		if err != nil {
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false
		}
	}
	return true
}

// Kill sends SIGKILL and waits for the process to be gone.
func (o *Operator) Kill() error { return o.Signal(syscall.SIGKILL, 10*time.Second) }

// Stop sends SIGTERM, and SIGKILL after 20 s. A stopped (SIGSTOP) process
// is continued first so it can act on the SIGTERM.
func (o *Operator) Stop() error {
	_ = o.Send(syscall.SIGCONT)
	if err := o.Signal(syscall.SIGTERM, 20*time.Second); err != nil {
		return o.Kill()
	}
	return nil
}

// Signal sends sig and waits up to wait for the process to exit.
func (o *Operator) Signal(sig syscall.Signal, wait time.Duration) error {
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

// Send sends sig (SIGSTOP, SIGCONT, ...) without waiting for anything.
func (o *Operator) Send(sig syscall.Signal) error {
	o.mu.Lock()
	cmd, exited := o.cmd, o.exited
	o.mu.Unlock()
	if cmd == nil {
		return errors.New("the operator was never started")
	}
	select {
	case <-exited:
		return errors.New("the operator is not running")
	default:
	}
	return cmd.Process.Signal(sig)
}

// WaitExit waits up to d for the process to exit and returns its exit
// error (nil: exit code 0); ok is false when it is still running.
func (o *Operator) WaitExit(d time.Duration) (err error, ok bool) {
	o.mu.Lock()
	exited := o.exited
	o.mu.Unlock()
	if exited == nil {
		return nil, true
	}
	select {
	case <-exited:
		return o.ExitErr(), true
	case <-time.After(d):
		return nil, false
	}
}

// Alive reports whether the process runs (a stopped process counts).
func (o *Operator) Alive() bool {
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

// ExitErr is how the process last exited (nil: code 0, or never exited).
func (o *Operator) ExitErr() error {
	return locked(&o.mu, func() error { return o.err })
}

// PID is the process id of the current (or last) process, 0 before Start.
func (o *Operator) PID() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd == nil || o.cmd.Process == nil {
		return 0
	}
	return o.cmd.Process.Pid
}

// Starts counts the starts so far.
func (o *Operator) Starts() int {
	return locked(&o.mu, func() int { return o.starts })
}

// MetricsURL is the current process's /metrics URL ("" without Metrics).
func (o *Operator) MetricsURL() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.metricsAddr == "" {
		return ""
	}
	if o.SecureMetrics {
		return "https://" + o.metricsAddr + "/metrics"
	}
	return "http://" + o.metricsAddr + "/metrics"
}

// PprofURL is the current process's /debug/pprof URL ("" without Pprof).
func (o *Operator) PprofURL() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.pprofAddr == "" {
		return ""
	}
	return "http://" + o.pprofAddr + "/debug/pprof"
}

// ProbeURL is the current process's health probe URL for path ("healthz"
// or "readyz").
func (o *Operator) ProbeURL(path string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return "http://" + o.probeAddr + "/" + path
}

// Log is the whole log so far.
func (o *Operator) Log() []byte {
	b, _ := os.ReadFile(o.LogPath)
	return b
}

// LogProblems names signs of trouble in the operator's log: panics and
// data races.
func (o *Operator) LogProblems() string {
	data, err := os.ReadFile(o.LogPath)
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

// FreeAddr is a loopback address with a port nothing listens on now.
func FreeAddr() (string, error) {
	addrs, err := FreeAddrs(1)
	if err != nil {
		return "", err
	}
	return addrs[0], nil
}

// FreeAddrs are n distinct loopback addresses (host:port), free as it
// returns: each port is held until all are picked.
func FreeAddrs(n int) ([]string, error) {
	ports, err := FreePorts(n)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ports))
	for i, p := range ports {
		out[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return out, nil
}
