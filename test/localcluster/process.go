package localcluster

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// start runs a component in the background, logging to logs/NAME.log, and
// records its pid in pids/NAME.pid. It runs in a session of its own
// (setsid), so a Ctrl-C meant for the caller (say `make run`) does not kill
// it halfway; Down stops it.
func (c *Cluster) start(name string, env []string, argv ...string) error {
	pidFile := c.path("pids", name+".pid")
	_ = os.Remove(pidFile)
	logFile, err := os.OpenFile(c.path("logs", name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	// Reaped when it exits while this process lives, so pidOf never takes
	// a zombie for a running component.
	go func() { _ = cmd.Wait() }()
	// Start returns as soon as the kernel began the exec, and for a moment
	// after that /proc/<pid>/cmdline is still empty: pidOf, which checks
	// the arguments, would take the component for gone.
	pid := cmd.Process.Pid
	liveCmdline(pid, 5*time.Second)
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return err
	}
	c.started = append(c.started, name)
	c.logf("started %s (pid %d)", name, pid)
	return nil
}

// pidOf is the pid of our running component; 0 when it is not running.
func (c *Cluster) pidOf(name string) int {
	b, err := os.ReadFile(c.path("pids", name+".pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || !alive(pid) {
		return 0
	}
	// Every component's arguments name a file under DIR: this guards
	// against a recycled pid belonging to some unrelated process. A
	// component that execs on its way (the kubelet: unshare, then sh, then
	// the kubelet) shows an empty command line for a moment at each exec,
	// which is not an exit: taken for one, it failed `make test`'s e2e
	// setup now and then ("kubelet exited while waiting for node ...",
	// with nothing in the kubelet's log).
	if !strings.Contains(strings.Join(liveCmdline(pid, time.Second), " "), c.Dir+"/") {
		return 0
	}
	return pid
}

// stop sends SIGTERM to the named components, gives them 15 s, then
// SIGKILLs what is left.
func (c *Cluster) stop(names ...string) {
	live := map[string]int{}
	var order []string
	for _, name := range names {
		if pid := c.pidOf(name); pid != 0 {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			live[name] = pid
			order = append(order, name)
		}
		_ = os.Remove(c.path("pids", name+".pid"))
	}
	if len(live) == 0 {
		return
	}
	t0 := time.Now()
	if waitGone(15*time.Second, func() []int { return slices.Collect(maps.Values(live)) }) {
		c.logf("stopped %s (%d s)", strings.Join(order, " "), int(time.Since(t0).Seconds()))
		return
	}
	for _, name := range order {
		if pid := live[name]; alive(pid) {
			c.logf("%s (pid %d) ignored SIGTERM for 15 s; killing it", name, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// waitGone polls until none of pids() is alive; false at the deadline.
func waitGone(within time.Duration, pids func() []int) bool {
	for deadline := time.Now().Add(within); ; time.Sleep(200 * time.Millisecond) {
		left := false
		for _, pid := range pids() {
			left = left || alive(pid)
		}
		if !left {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// stopStrays stops our components still running without a pid file (DIR
// wiped while they ran, or an Up killed at the wrong moment): a process is
// ours when it is one of the components and its arguments point into DIR.
func (c *Cluster) stopStrays() {
	strays := c.strays()
	for _, p := range strays {
		c.logf("stopping leftover process %d: %.100s", p, strings.Join(cmdline(p), " "))
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	if !waitGone(10*time.Second, c.strays) {
		for _, p := range c.strays() {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

func (c *Cluster) strays() []int {
	var out []int
	for pid, args := range processes() {
		if !strings.Contains(strings.Join(args, " "), c.Dir+"/") {
			continue
		}
		for _, name := range allComponents {
			if filepath.Base(args[0]) == name {
				out = append(out, pid)
			}
		}
	}
	return out
}

// running is the names of our live components.
func (c *Cluster) running() []string {
	var out []string
	for _, name := range allComponents {
		if c.pidOf(name) != 0 {
			out = append(out, name)
		}
	}
	return out
}

// alive: running, and not a zombie waiting for its parent to reap it.
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		// No /proc (not Linux): ask ps.
		out, err := exec.Command("ps", "-o", "stat=", "-p", strconv.Itoa(pid)).Output()
		return err == nil && !strings.HasPrefix(strings.TrimSpace(string(out)), "Z")
	}
	// The state follows the command name, which is in parentheses and may
	// itself hold ") ".
	s := string(b)
	if i := strings.LastIndex(s, ") "); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// liveCmdline is pid's command line, read again for up to within while it
// is empty and the process alive (in the middle of an exec).
func liveCmdline(pid int, within time.Duration) []string {
	args := cmdline(pid)
	for deadline := time.Now().Add(within); len(args) == 0 && alive(pid) && time.Now().Before(deadline); args = cmdline(pid) {
		time.Sleep(5 * time.Millisecond)
	}
	return args
}

// cmdline is a process' arguments; nil when it is gone.
func cmdline(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		out, err := exec.Command("ps", "-o", "args=", "-p", strconv.Itoa(pid)).Output()
		if err != nil {
			return nil
		}
		return strings.Fields(string(out))
	}
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// processes is every process' arguments by pid (Linux only: empty
// elsewhere, where strays are not looked for).
func processes() map[int][]string {
	out := map[int][]string{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if args := cmdline(pid); len(args) > 0 {
			out[pid] = args
		}
	}
	return out
}
