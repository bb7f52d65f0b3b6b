package harness

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/internal/testutil"
)

// Workspace is what an end-to-end suite keeps on disk, set by environment
// variables named for the suite (PREFIX = E2E, RELIABILITY):
//
//   - Dir: the cluster's folder, PREFIX_CLUSTER_DIR or tmp/<name>-cluster;
//   - Keep: PREFIX_KEEP_CLUSTER=1 leaves the cluster running at the end;
//   - Tmp: a temporary folder for the binaries the suite builds;
//   - PREFIX_MANAGER_BINARY: a manager binary to test instead of building
//     ./cmd/manager (ManagerBinary).
type Workspace struct {
	Root, Dir, Tmp string
	Keep           bool
	prefix         string
	once           sync.Once
}

// NewWorkspace reads the suite's settings and makes its temporary folder.
func NewWorkspace(prefix, name string) (*Workspace, error) {
	w := &Workspace{
		Root:   testutil.RepoRoot(),
		Dir:    os.Getenv(prefix + "_CLUSTER_DIR"),
		Keep:   os.Getenv(prefix+"_KEEP_CLUSTER") == "1",
		prefix: prefix,
	}
	if w.Dir == "" {
		w.Dir = filepath.Join(w.Root, "tmp", name+"-cluster")
	}
	if abs, err := filepath.Abs(w.Dir); err == nil {
		w.Dir = abs
	}
	tmp, err := os.MkdirTemp("", "task-operator-"+name+"-")
	if err != nil {
		return nil, err
	}
	w.Tmp = tmp
	return w, nil
}

// ManagerBinary is PREFIX_MANAGER_BINARY, or ./cmd/manager built into Tmp.
func (w *Workspace) ManagerBinary(logf func(string, ...any)) (string, error) {
	if bin := os.Getenv(w.prefix + "_MANAGER_BINARY"); bin != "" {
		return bin, nil
	}
	bin := filepath.Join(w.Tmp, "manager")
	t := time.Now()
	if err := BuildManager(w.Root, bin); err != nil {
		return "", err
	}
	logf("built the manager in %s", time.Since(t).Round(time.Millisecond))
	return bin, nil
}

// Close brings the cluster down (unless Keep: then it says how to reach
// and stop it) and removes Tmp. It runs once, however often it is called
// (the end of the suite, a signal).
func (w *Workspace) Close(cluster *Cluster, logf func(string, ...any)) (err error) {
	w.once.Do(func() {
		if w.Keep {
			if cluster != nil {
				logf("%s_KEEP_CLUSTER=1: the cluster keeps running; KUBECONFIG=%s; stop it with: hack/local-cluster.sh down --dir %s",
					w.prefix, cluster.Kubeconfig, w.Dir)
			}
		} else if err = DownCluster(w.Root, w.Dir, nil); err != nil {
			logf("bringing the cluster down: %v", err)
		}
		_ = os.RemoveAll(w.Tmp)
	})
	return err
}

// CreateNamespace creates a namespace with labels for one test. At the end
// of the test it is deleted, unless the test failed: then describe logs
// what is in it, and it is kept for a post-mortem (PREFIX_KEEP_CLUSTER=1
// keeps the cluster too); keep leaves it in any case.
func CreateNamespace(t *testing.T, c client.Client, prefix string, labels map[string]string, keep bool, describe func(t *testing.T, ns string)) string {
	t.Helper()
	name := strings.TrimSuffix(prefix, "-") + "-" + RandSuffix()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if describe != nil {
				describe(t, name)
			}
			return
		}
		if keep {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting namespace %s: %v", name, err)
		}
	})
	return name
}

// Cleanups is what a suite's setup started, to stop newest first.
type Cleanups []func()

// Add registers f to run at Run.
func (c *Cleanups) Add(f func()) { *c = append(*c, f) }

// Run runs what was added, newest first, and forgets it (a second Run, from
// a signal handler, does nothing).
func (c *Cleanups) Run() {
	for i := len(*c) - 1; i >= 0; i-- {
		(*c)[i]()
	}
	*c = nil
}
