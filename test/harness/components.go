package harness

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Stopping and starting one component of a running local cluster, for the
// suites that take a control plane away (an API server restart, a worker
// cluster that disappears).

// ProcessGone reports whether pid has exited (a zombie counts as gone: its
// parent, init after the cluster's setsid, reaps it when it gets to it).
func ProcessGone(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] == 'Z'
	}
	return false
}

// StopComponent stops a running component (SIGTERM, SIGKILL after
// killAfter; an API server stops listening at once but can take 30 s to
// drain) and returns its command line, to start it again the same way.
func (c *Cluster) StopComponent(component string, killAfter time.Duration) ([]string, error) {
	pid, args, err := c.ComponentPID(component)
	if err != nil {
		return nil, err
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(killAfter)
	killed := false
	for !ProcessGone(pid) {
		if time.Now().After(deadline) && !killed {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed = true
		}
		if time.Now().After(deadline.Add(20 * time.Second)) {
			return nil, fmt.Errorf("%s (pid %d) does not exit", component, pid)
		}
		time.Sleep(100 * time.Millisecond) // polling interval, not a condition
	}
	return args, nil
}

// StartComponent starts a component with args the way the local cluster
// does: its own session, appending to its log (after a line saying why),
// its pid in the pid file (so `hack/local-cluster.sh down` stops it).
func (c *Cluster) StartComponent(component string, args []string, why string) error {
	logFile, err := os.OpenFile(c.LogFile(component), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "\n===== %s restarted (%s) at %s =====\n", component, why, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }() // reap it if it exits while the suite runs
	return os.WriteFile(c.PIDFile(component), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644)
}

// APIServerReady reports whether the cluster's API server says /readyz ok,
// and what it said.
func (c *Cluster) APIServerReady(ctx context.Context) (bool, string) {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return false, err.Error()
	}
	b, err := cs.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil && strings.TrimSpace(string(b)) == "ok", fmt.Sprintf("%s %v", b, err)
}
