package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// StartEnv starts env's etcd and kube-apiserver and makes sure they do not
// outlive this test process. envtest runs them in process groups of their
// own, so a Ctrl-C (SIGINT to the terminal's group), a `go test -timeout`
// panic or a SIGKILL ends the test binary and leaves them running; a
// watchdog (Watchdog) kills them once this process is gone. stop stops
// them and then the watchdog.
func StartEnv(env *envtest.Environment) (cfg *rest.Config, stop func(), err error) {
	before := ChildPIDs()
	cfg, err = env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("starting envtest: %w", err)
	}
	var children []int
	for pid := range ChildPIDs() {
		if !before[pid] {
			children = append(children, pid)
		}
	}
	wd := Watchdog(children)
	return cfg, func() {
		_ = env.Stop()
		// The children are gone: the watchdog must not signal their pids,
		// which the system may give to other processes.
		if wd != nil {
			_ = wd.Process.Kill()
		}
	}, nil
}

// Watchdog starts a process, in a process group of its own so a Ctrl-C
// does not end it, that kills pids (SIGKILL) once this process has exited,
// however it exited. nil when pids is empty or it cannot start.
func Watchdog(pids []int) *exec.Cmd {
	if len(pids) == 0 {
		return nil
	}
	list := make([]string, len(pids))
	for i, p := range pids {
		list[i] = strconv.Itoa(p)
	}
	script := fmt.Sprintf("while kill -0 %d 2>/dev/null; do sleep 1; done; kill -9 %s 2>/dev/null; exit 0",
		os.Getpid(), strings.Join(list, " "))
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil
	}
	go func() { _ = cmd.Wait() }()
	return cmd
}

// ChildPIDs lists this process' children (Linux /proc; empty elsewhere).
func ChildPIDs() map[int]bool {
	out := map[int]bool{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	me := os.Getpid()
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may contain spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(b[i+1:]))
		if len(fields) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == me {
			pid, _ := strconv.Atoi(strings.Fields(string(b))[0])
			out[pid] = true
		}
	}
	return out
}
