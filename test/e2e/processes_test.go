//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The real node runs its containers on this machine, so the test can see
// a pod's processes the way `ps` does: each one's cgroup path names its
// pod's UID (kubepods/<class>/pod<uid>/<container>). That gives the one
// time the API cannot: when the script itself ended. The kubelet's
// terminated state is often never seen for a deleted pod (it is removed
// right after) and the pod's disappearance adds the kubelet's cleanup.

// processWatch follows the processes of some pods' containers (the pause
// process of each pod's sandbox aside) and records when the last one ended.
type processWatch struct {
	mu    sync.Mutex
	seen  int       // the most processes seen at once
	ended time.Time // when none was left, after some were seen
	done  chan struct{}
}

// processPollInterval is how often /proc is read: a measured end is at
// most this late.
const processPollInterval = 50 * time.Millisecond

// watchProcesses starts following the containers' processes of pods, which
// must be running. It fails the test when this host shows none of them
// (a real node elsewhere): the stop tests measure nothing without them.
func watchProcesses(t testing.TB, pods []corev1.Pod) *processWatch {
	t.Helper()
	var marks [][]byte
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning {
			continue
		}
		uid := string(p.UID)
		// The cgroupfs driver keeps the UID's dashes, systemd's uses '_'.
		marks = append(marks, []byte("pod"+uid), []byte("pod"+strings.ReplaceAll(uid, "-", "_")))
	}
	w := &processWatch{done: make(chan struct{})}
	if n := countProcesses(marks); n == 0 {
		t.Fatalf("no process of the running pods %v is visible on this host: the stop tests need the local cluster's real node", podNames(pods))
	} else {
		w.seen = n
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		_ = wait.PollUntilContextCancel(ctx, processPollInterval, false, func(context.Context) (bool, error) {
			n := countProcesses(marks)
			w.mu.Lock()
			defer w.mu.Unlock()
			w.seen = max(w.seen, n)
			if n == 0 {
				w.ended = time.Now()
				close(w.done)
			}
			return n == 0, nil
		})
	}()
	t.Cleanup(cancel)
	return w
}

// endedBy waits until the last process ended, at most until deadline, and
// returns when it did; ok is false when some still ran at the deadline.
func (w *processWatch) endedBy(deadline time.Duration) (at time.Time, ok bool) {
	select {
	case <-w.done:
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.ended, true
	case <-time.After(deadline):
		return time.Time{}, false
	}
}

// countProcesses counts the processes whose cgroup names one of marks,
// pause processes aside. Processes that end while being read are skipped.
func countProcesses(marks [][]byte) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	n := 0
	for _, dir := range dirs {
		cg, err := os.ReadFile(filepath.Join(dir, "cgroup"))
		if err != nil || !containsAny(cg, marks) {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) == "pause" {
			continue
		}
		n++
	}
	return n
}

func containsAny(b []byte, marks [][]byte) bool {
	for _, m := range marks {
		if bytes.Contains(b, m) {
			return true
		}
	}
	return false
}

func podNames(pods []corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name+" ("+string(p.Status.Phase)+")")
	}
	return out
}
