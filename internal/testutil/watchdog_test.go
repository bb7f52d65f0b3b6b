package testutil

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAKilledTestProcessLeavesNoAPIServer: a test binary killed while its
// envtest runs (SIGKILL: no handler, no deferred stop) leaves no etcd or
// kube-apiserver behind.
func TestAKilledTestProcessLeavesNoAPIServer(t *testing.T) {
	if os.Getenv("TESTUTIL_WATCHDOG_CHILD") == "1" {
		env, err := NewEnv()
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		if _, _, err := StartEnv(env); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		var pids []string
		for pid := range ChildPIDs() {
			pids = append(pids, strconv.Itoa(pid))
		}
		fmt.Println("pids:", strings.Join(pids, " "))
		select {} // until killed
	}
	cmd, line := startChild(t, "TestAKilledTestProcessLeavesNoAPIServer", "TESTUTIL_WATCHDOG_CHILD")
	if !strings.HasPrefix(line, "pids: ") {
		t.Fatalf("the child did not start its envtest: %q", line)
	}
	var pids []int
	for _, f := range strings.Fields(strings.TrimPrefix(line, "pids: ")) {
		pid, _ := strconv.Atoi(f)
		pids = append(pids, pid)
	}
	alive := func() []int {
		var left []int
		for _, pid := range pids {
			// Signal 0: does the process exist (a zombie of the dead child
			// is reparented and reaped by init).
			if syscall.Kill(pid, 0) == nil {
				left = append(left, pid)
			}
		}
		return left
	}
	if len(alive()) < 2 {
		t.Fatalf("want etcd and kube-apiserver among the child's children, got pids %v", pids)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	Eventually(t, 10*time.Second, 100*time.Millisecond, "the killed test process's etcd and kube-apiserver to be gone", func(context.Context) (bool, string) {
		left := alive()
		return len(left) == 0, fmt.Sprintf("still running: %v", left)
	})
}

// TestAProcessKilledWhileItsChildrenStartLeavesNoneBehind: the guard
// kills a child started after GuardChildren even when the test process
// dies before Seal (envtest still starting its processes).
func TestAProcessKilledWhileItsChildrenStartLeavesNoneBehind(t *testing.T) {
	if os.Getenv("TESTUTIL_GUARD_CHILD") == "1" {
		GuardChildren()
		// A process group of its own, as envtest gives etcd.
		sleeper := exec.Command("sleep", "600")
		sleeper.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := sleeper.Start(); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("pid:", sleeper.Process.Pid)
		select {} // killed before Seal
	}
	cmd, line := startChild(t, "TestAProcessKilledWhileItsChildrenStartLeavesNoneBehind", "TESTUTIL_GUARD_CHILD")
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid: ")))
	if pid == 0 {
		t.Fatalf("the child did not start its sleeper: %q", line)
	}
	// The guard records children every 20 ms; give it a few rounds.
	Eventually(t, 5*time.Second, 20*time.Millisecond, "the guard to record the sleeper", func(context.Context) (bool, string) {
		return guardFileHolds(pid), "not yet in any guard's file"
	})
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	Eventually(t, 10*time.Second, 100*time.Millisecond, "the sleeper to be killed", func(context.Context) (bool, string) {
		return syscall.Kill(pid, 0) != nil, fmt.Sprintf("pid %d still running", pid)
	})
}

// guardFileHolds says whether a guard's file lists pid.
func guardFileHolds(pid int) bool {
	files, _ := filepath.Glob(filepath.Join(os.TempDir(), "testutil-children-*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && slices.Contains(strings.Fields(string(b)), strconv.Itoa(pid)) {
			return true
		}
	}
	return false
}

// startChild runs test again in a child process with env=1, and returns it
// with the first line it printed; the child is killed when t ends, so a
// failing test leaves it running neither.
func startChild(t *testing.T, test, env string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the child's first line: %v (%q)", err, line)
	}
	return cmd, line
}
