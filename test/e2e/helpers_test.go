//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// missingImage is an image no node has and none can pull: its registry is
// a loopback port where nothing listens, so the pull fails at once and on
// this machine.
const missingImage = "127.0.0.1:9/task-operator-e2e/missing:v1"

// runsUntilStopped is a shell command that runs until its pod is stopped.
// It needs no trap: the task's process is not PID 1 in its container (the
// pod shares its process namespace), so SIGTERM ends it.
const runsUntilStopped = `sleep 3600`

// requireRealNode skips a test whose pods must really run (their outcome
// comes from the shell), on a cluster whose pods are simulated. That can
// only happen off CI: on CI the suite refuses to start without the real
// node (requireRealNodeOnCI), and the skipped tests are listed at the end.
func requireRealNode(t testing.TB) {
	t.Helper()
	if !env.cluster.RealNode() {
		skippedMu.Lock()
		skipped = append(skipped, t.Name())
		skippedMu.Unlock()
		t.Skipf("needs a real node (pods that run); this cluster's node is %q: see hack/local-cluster.sh (LOCAL_CLUSTER_NODE)", env.cluster.Node)
	}
}

var (
	skippedMu sync.Mutex
	skipped   []string
)

// skippedForNode names the tests requireRealNode skipped, sorted.
func skippedForNode() []string {
	skippedMu.Lock()
	defer skippedMu.Unlock()
	out := slices.Clone(skipped)
	slices.Sort(out)
	return out
}

// requireRealNodeOnCI reports whether the suite must run on the real node:
// on CI (CI=true), where a run that skipped the real containers must not
// pass.
// restartOperatorAfter starts the operator again when the test ends, if
// the test killed it: whatever happens in a test that kills it, the tests
// after it need one.
func restartOperatorAfter(t *testing.T) {
	t.Cleanup(func() {
		if !env.op.Alive() {
			if _, err := env.op.Start(); err != nil {
				t.Errorf("restarting the operator: %v", err)
			}
		}
	})
}

func requireRealNodeOnCI() bool { return os.Getenv("CI") == "true" }

// eventually polls cond until it reports done, and fails the test at the
// deadline with what cond last said. It returns how long it took.
func eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (done bool, detail string)) time.Duration {
	t.Helper()
	return harness.Eventually(t, timeout, what, operatorNote, cond)
}

// operatorNote adds, to a failure, that the operator is not running.
func operatorNote() string {
	if env.op.Alive() {
		return ""
	}
	return fmt.Sprintf(" (the operator is NOT running: %v; see %s)", env.op.ExitErr(), env.op.LogPath)
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(d))
	t.Cleanup(cancel)
	return ctx
}

// kubectlTask runs the kubectl plugin (bin of ./cmd/kubectl-task) against
// the cluster and fails the test when it fails.
func kubectlTask(t testing.TB, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(timeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, env.plugin, append(args, "--kubeconfig", env.cluster.Kubeconfig)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl task %s: %v\n%s%s", strings.Join(args, " "), err, out, operatorNote())
	}
	return string(out)
}

// plugin runs the kubectl plugin against the cluster and returns its exit
// code, stdout and stderr; only a plugin that cannot run fails the test.
func plugin(t testing.TB, timeout time.Duration, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(timeout))
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, env.plugin, append(args, "--kubeconfig", env.cluster.Kubeconfig)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("kubectl task %s: %v", strings.Join(args, " "), err)
	}
	return code, out.String(), errOut.String()
}

func keysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// kubectl runs the project's kubectl and fails the test when it fails.
func kubectl(t testing.TB, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(timeout))
	defer cancel()
	out, err := env.runKubectl(ctx, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, operatorNote())
	}
	return out
}

// kubectlWait runs `kubectl wait --for=FOR OBJ -n NS --timeout=T` and
// returns how long it blocked.
func kubectlWait(t testing.TB, ns, forArg, obj string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	kubectl(t, timeout+15*time.Second, "wait", "-n", ns, "--for="+forArg, obj, fmt.Sprintf("--timeout=%ds", int(timeout.Seconds())))
	return time.Since(start)
}

// newNamespace creates a namespace that enforces (and warns about) the
// restricted Pod Security Standard, so every Job pod of the suite must pass
// it. It is deleted at the end of the test unless the test failed (then it
// is described in the log and kept for a post-mortem with E2E_KEEP_CLUSTER=1).
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	if !env.op.Alive() {
		t.Fatalf("the operator is not running (it exited: %v); see %s", env.op.ExitErr(), env.op.LogPath)
	}
	return makeNamespace(t, prefix)
}

// makeNamespace is newNamespace without the check that the operator
// process runs (a test that runs the operator otherwise).
func makeNamespace(t *testing.T, prefix string) string {
	t.Helper()
	return harness.CreateNamespace(t, env.c, prefix, harness.RestrictedLabels, false, describeNamespace)
}

// describeNamespace logs the Tasks, Jobs, pods and events of a namespace.
func describeNamespace(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{"get", "tasks,jobs,pods", "-o", "wide"},
		{"get", "tasks", "-o", "jsonpath={range .items[*]}{.metadata.name}: {.status.phase} attempts={.status.attempts} lastError={.status.lastError} conditions={.status.conditions}{\"\\n\"}{end}"},
		{"get", "events", "--sort-by=.lastTimestamp"},
	} {
		out, err := env.runKubectl(ctx, append([]string{"-n", ns}, args...)...)
		t.Logf("kubectl -n %s %s (err=%v):\n%s", ns, strings.Join(args, " "), err, out)
	}
	t.Logf("operator log: %s", env.op.LogPath)
}

func create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := env.c.Create(ctxFor(t, 10*time.Second), obj); err != nil {
		t.Fatalf("creating %s %s/%s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), err)
	}
}

// waitPhase waits until Task ns/name is in phase.
func waitPhase(t testing.TB, ns, name string, phase v1alpha1.TaskPhase, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, fmt.Sprintf("%s/%s to be %s", ns, name, phase), func(ctx context.Context) (bool, string) {
		task, err := harness.GetTask(ctx, env.c, ns, name)
		if err != nil {
			return false, err.Error()
		}
		return task.Status.Phase == phase, fmt.Sprintf("%s, %d attempts", task.Status.Phase, task.Status.Attempts)
	})
}

func mustGetTask(t testing.TB, ns, name string) *v1alpha1.Task {
	t.Helper()
	task, err := harness.GetTask(ctxFor(t, 10*time.Second), env.c, ns, name)
	if err != nil {
		t.Fatalf("getting Task %s/%s: %v", ns, name, err)
	}
	return task
}

// expectCondition checks a condition's status and, when reason is not
// empty, its reason.
func expectCondition(t testing.TB, task *v1alpha1.Task, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := harness.Cond(task, typ)
	if c.Status != status || (reason != "" && c.Reason != reason) {
		t.Errorf("Task %s: condition %s = %s/%s (%q), want %s/%s", task.Name, typ, c.Status, c.Reason, c.Message, status, reason)
	}
	if c.Status != "<missing>" && c.ObservedGeneration != task.Generation {
		t.Errorf("Task %s: condition %s has observedGeneration %d, want %d", task.Name, typ, c.ObservedGeneration, task.Generation)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
