//go:build e2e

package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/test/harness"
)

// env is what every test uses: the cluster, a client and the operator.
var env *environment

type environment struct {
	ws      *harness.Workspace // E2E_CLUSTER_DIR, E2E_KEEP_CLUSTER, E2E_MANAGER_BINARY
	cluster *harness.Cluster
	c       client.WithWatch
	op      *harness.Operator
	plugin  string // the kubectl plugin, built from ./cmd/kubectl-task
	// imageArchive is the release image the real node has (make image).
	imageArchive string
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
}

func runMain(m *testing.M) (code int) {
	ws, err := harness.NewWorkspace("E2E", "e2e")
	if err != nil {
		logf("%v", err)
		return 1
	}
	e := &environment{ws: ws}
	teardown := func() {
		if e.op != nil {
			if err := e.op.Stop(); err != nil {
				logf("stopping the operator: %v", err)
			}
		}
		if err := ws.Close(e.cluster, logf); err != nil {
			code = 1
		}
	}
	defer teardown()
	harness.CleanupOnSignal(logf, teardown)

	// The parallel tests mostly wait on the cluster: run them all at once
	// unless -parallel says otherwise (its default is GOMAXPROCS).
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", "8")
	}

	t0 := time.Now()
	if err := e.setup(); err != nil {
		logf("setup failed: %v", err)
		return 1
	}
	logf("setup took %s (cluster in %s, operator log %s)", time.Since(t0).Round(time.Millisecond), ws.Dir, e.op.LogPath)
	env = e

	code = m.Run()

	if skipped := skippedForNode(); len(skipped) > 0 {
		logf("WARNING: %d tests were SKIPPED because pods are simulated on node %q: %s", len(skipped), e.cluster.Node, strings.Join(skipped, ", "))
	}

	if !e.op.Alive() {
		logf("FAIL: the operator is not running at the end of the suite (it exited: %v); see %s", e.op.ExitErr(), e.op.LogPath)
		code = 1
	}
	if bad := e.op.LogProblems(); bad != "" {
		logf("FAIL: the operator log %s has: %s", e.op.LogPath, bad)
		code = 1
	}
	return code
}

func (e *environment) setup() error {
	// A fresh cluster: `up` would reuse one left running by an earlier,
	// aborted run, with its objects in it.
	// A real node unless E2E_NODE (LOCAL_CLUSTER_NODE) says otherwise or
	// the machine cannot run one: hack/local-cluster.sh then says why, and
	// the tests whose pods must really run are skipped.
	// On CI (CI=true) the real node is required: a green run must mean
	// real containers ran, so a machine that cannot run it fails here,
	// with hack/local-cluster.sh's reason, instead of skipping.
	node := os.Getenv("E2E_NODE")
	if node == "" && requireRealNodeOnCI() {
		node = "real"
	}
	cluster, err := harness.StartCluster(harness.ClusterOptions{Dir: e.ws.Dir, Logf: logf, Node: node})
	if err != nil {
		return err
	}
	e.cluster, e.c = cluster, cluster.Client
	if requireRealNodeOnCI() && !cluster.RealNode() {
		return fmt.Errorf("CI=true but the local cluster's node is %q: the end-to-end tests need the real node (hack/real-node-deps.sh installs its packages)", cluster.Node)
	}
	if cluster.RealNode() {
		// The release image (make image): http Tasks run its /task-runner,
		// and the deployment test runs its /manager.
		archive := os.Getenv("E2E_IMAGE_ARCHIVE")
		if archive == "" {
			archive = filepath.Join(e.ws.Root, "bin", "image", "task-operator.tar")
			t := time.Now()
			if out, err := exec.Command("make", "-C", e.ws.Root, "-s", "image").CombinedOutput(); err != nil {
				return fmt.Errorf("make image: %w\n%s", err, out)
			}
			logf("built the release image in %s", time.Since(t).Round(time.Millisecond))
		}
		if err := cluster.LoadImages(archive); err != nil {
			return err
		}
		e.imageArchive = archive
	} else {
		logf("WARNING: node %q: pods are simulated, so every test whose pods must really run is SKIPPED", cluster.Node)
	}
	e.plugin = filepath.Join(e.ws.Tmp, "kubectl-task")
	if err := harness.Build(e.ws.Root, "./cmd/kubectl-task", e.plugin); err != nil {
		return err
	}
	bin, err := e.ws.ManagerBinary(logf)
	if err != nil {
		return err
	}
	e.op = &harness.Operator{Bin: bin, Kubeconfig: cluster.Kubeconfig, LogPath: filepath.Join(e.ws.Dir, "operator.log"), Name: "e2e"}
	if err := os.WriteFile(e.op.LogPath, nil, 0o644); err != nil {
		return err
	}
	ready, err := e.op.Start()
	if err != nil {
		return err
	}
	logf("operator ready in %s", ready.Round(time.Millisecond))
	return nil
}

// runKubectl runs the project's kubectl against the cluster.
func (e *environment) runKubectl(ctx context.Context, args ...string) (string, error) {
	return e.cluster.RunKubectl(ctx, args...)
}
