package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// StartEnv starts env's etcd and kube-apiserver and makes sure they do not
// outlive this test process. envtest runs them in process groups of their
// own, so a Ctrl-C (SIGINT to the terminal's group), a `go test -timeout`
// panic or a SIGKILL ends the test binary and leaves them running; a
// ChildGuard kills them once this process is gone, even when it dies while
// envtest is still starting them. stop stops them and then the guard.
func StartEnv(env *envtest.Environment) (cfg *rest.Config, stop func(), err error) {
	guard := GuardChildren()
	cfg, err = env.Start()
	guard.Seal()
	if err != nil {
		_ = env.Stop()
		guard.Stop()
		return nil, nil, fmt.Errorf("starting envtest: %w", err)
	}
	return cfg, func() {
		_ = env.Stop()
		guard.Stop()
	}, nil
}

// ChildGuard kills, once this process has exited however it exited, the
// children it started between GuardChildren and Seal. A watchdog process,
// in a process group of its own so a Ctrl-C does not end it, waits for
// this process to go and then kills (SIGKILL) the pids listed in a file
// that a goroutine keeps up to date while the children start: a test
// killed halfway through starting them leaves none behind either.
type ChildGuard struct {
	file   string
	cmd    *exec.Cmd
	before map[int]bool
	seen   map[int]bool
	mu     sync.Mutex
	done   chan struct{}
	wg     sync.WaitGroup
}

// GuardChildren starts guarding the children this process starts from now
// on (until Seal). Without /bin/sh it guards nothing.
func GuardChildren() *ChildGuard {
	g := &ChildGuard{seen: map[int]bool{}, done: make(chan struct{})}
	f, err := os.CreateTemp("", "testutil-children-")
	if err != nil {
		return g
	}
	g.file = f.Name()
	_ = f.Close()
	script := fmt.Sprintf(`while kill -0 %d 2>/dev/null; do sleep 1; done; kill -9 $(cat %q) 2>/dev/null; rm -f %q; exit 0`,
		os.Getpid(), g.file, g.file)
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = os.Remove(g.file)
		g.file = ""
		return g
	}
	g.cmd = cmd
	go func() { _ = cmd.Wait() }()
	g.before = ChildPIDs() // the watchdog among them: never its own target
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		wait.Until(g.record, 20*time.Millisecond, g.done)
	}()
	return g
}

// record writes the children started since GuardChildren to the file.
func (g *ChildGuard) record() {
	g.mu.Lock()
	defer g.mu.Unlock()
	changed := false
	for pid := range ChildPIDs() {
		if !g.before[pid] && !g.seen[pid] {
			g.seen[pid] = true
			changed = true
		}
	}
	if !changed {
		return
	}
	list := make([]string, 0, len(g.seen))
	for pid := range g.seen {
		list = append(list, strconv.Itoa(pid))
	}
	// Written whole to a new file and renamed: the watchdog never reads a
	// half-written list.
	tmp := g.file + ".new"
	if os.WriteFile(tmp, []byte(strings.Join(list, " ")), 0o600) == nil {
		_ = os.Rename(tmp, g.file)
	}
}

// Seal records the children started so far and stops looking for more.
func (g *ChildGuard) Seal() {
	if g.file == "" {
		return
	}
	select {
	case <-g.done:
	default:
		close(g.done)
	}
	g.wg.Wait()
	g.record()
}

// Pids are the children the guard kills.
func (g *ChildGuard) Pids() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	var pids []int
	for pid := range g.seen {
		pids = append(pids, pid)
	}
	return pids
}

// Stop ends the guard once its children are gone: the watchdog must not
// signal their pids, which the system may give to other processes.
func (g *ChildGuard) Stop() {
	g.Seal()
	if g.cmd != nil {
		_ = g.cmd.Process.Kill()
	}
	if g.file != "" {
		_ = os.Remove(g.file)
	}
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
