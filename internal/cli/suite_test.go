package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

// The suite runs one real kube-apiserver + etcd (envtest) and no operator:
// the tests play the operator by writing Task status themselves, and call
// the plugin through Run with a kubeconfig for that API server.
var (
	suiteCtx   context.Context
	k8s        client.Client
	kube       kubernetes.Interface
	restCfg    *rest.Config
	kubeconfig string
)

// testWait bounds every wait of the tests for a condition.
const testWait = 30 * time.Second

func TestMain(m *testing.M) {
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) int {
	env, err := testutil.NewEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg, stop, err := testutil.StartEnv(env)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer stop()
	restCfg = cfg

	var cancel context.CancelFunc
	suiteCtx, cancel = context.WithCancel(context.Background())
	defer cancel()
	if k8s, err = client.New(cfg, client.Options{Scheme: testutil.Scheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if kube, err = kubernetes.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "kubectl-task-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, env.KubeConfig, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// syncBuffer is a bytes.Buffer the command writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// invocation is one run of the plugin in the background.
type invocation struct {
	args           []string
	stdout, stderr *syncBuffer
	done           chan struct{}
	code           int
	// interrupt ends the command's context, as SIGINT/SIGTERM do in
	// cmd/kubectl-task.
	interrupt context.CancelFunc
}

// start runs `kubectl task <args>` against the envtest API server in the
// background.
func start(t *testing.T, args ...string) *invocation {
	t.Helper()
	ctx, cancel := context.WithCancel(suiteCtx)
	inv := &invocation{args: args, stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{}), interrupt: cancel}
	full := append([]string{"--kubeconfig", kubeconfig}, args...)
	go func() {
		defer close(inv.done)
		inv.code = Run(ctx, full, genericiooptions.IOStreams{In: strings.NewReader(""), Out: inv.stdout, ErrOut: inv.stderr})
	}()
	t.Cleanup(func() {
		cancel()
		<-inv.done
		// CLI_TEST_SHOW_OUTPUT=1 go test -v ./internal/cli/ shows what each
		// command printed.
		if os.Getenv("CLI_TEST_SHOW_OUTPUT") != "" {
			t.Logf("kubectl task %s\nstdout:\n%sstderr:\n%s", strings.Join(args, " "), inv.stdout, inv.stderr)
		}
	})
	return inv
}

// wait returns the exit code once the command ended.
func (i *invocation) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-i.done:
		return i.code
	case <-time.After(testutil.Timeout(testWait)):
		t.Fatalf("kubectl task %v did not end within %s\nstdout:\n%s\nstderr:\n%s", i.args, testWait, i.stdout, i.stderr)
		return -1
	}
}

// exits waits for the command to end with code, then checks that w (its
// stdout or stderr) holds each of want.
func (i *invocation) exits(t *testing.T, code int, w *syncBuffer, want ...string) {
	t.Helper()
	if got := i.wait(t); got != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", got, code, i.stdout, i.stderr)
	}
	name := "stdout"
	if w == i.stderr {
		name = "stderr"
	}
	assertContains(t, name, w.String(), want...)
}

// running fails the test if the command already ended.
func (i *invocation) running(t *testing.T) {
	t.Helper()
	select {
	case <-i.done:
		t.Fatalf("kubectl task %v ended early with %d\nstdout:\n%s\nstderr:\n%s", i.args, i.code, i.stdout, i.stderr)
	default:
	}
}

// waitOutput waits until the command wrote want to w (stdout or stderr).
func (i *invocation) waitOutput(t *testing.T, w *syncBuffer, want string) {
	t.Helper()
	eventually(t, fmt.Sprintf("output %q", want), func() bool { return strings.Contains(w.String(), want) })
	i.running(t)
}

// runCLI runs `kubectl task <args>` to its end.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	inv := start(t, args...)
	code = inv.wait(t)
	return code, inv.stdout.String(), inv.stderr.String()
}

// eventually polls cond (testutil.Eventually) until it holds or testWait
// elapsed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, testWait, 20*time.Millisecond, what, func(context.Context) (bool, string) { return cond(), "not yet" })
}

// newNamespace creates a namespace of the test's own.
func newNamespace(t *testing.T) string {
	t.Helper()
	return testutil.NewNamespace(t, k8s, "cli-")
}

// shellTask is a one-shot shell Task with maxRetry retries.
func shellTask(ns, name string, maxRetry int32) *v1alpha1.Task {
	return testutil.NewTask(ns, name, testutil.MaxRetry(maxRetry))
}

// newShellTask creates a shell Task of maxRetry (changed by opts) in a new
// namespace.
func newShellTask(t *testing.T, name string, maxRetry int32, opts ...testutil.TaskOpt) (string, types.NamespacedName, *v1alpha1.Task) {
	t.Helper()
	ns := newNamespace(t)
	task := testutil.NewTask(ns, name, append([]testutil.TaskOpt{testutil.MaxRetry(maxRetry)}, opts...)...)
	return ns, types.NamespacedName{Namespace: ns, Name: name}, createTask(t, task)
}

func createTask(t *testing.T, task *v1alpha1.Task) *v1alpha1.Task {
	t.Helper()
	if err := k8s.Create(suiteCtx, task); err != nil {
		t.Fatal(err)
	}
	return task
}

func getTask(t *testing.T, key types.NamespacedName) *v1alpha1.Task {
	t.Helper()
	task := &v1alpha1.Task{}
	if err := k8s.Get(suiteCtx, key, task); err != nil {
		t.Fatal(err)
	}
	return task
}

// setStatus plays the operator: it changes the Task's status (retrying on
// conflicts) with observedGeneration set to the Task's generation unless
// mutate sets it.
func setStatus(t *testing.T, key types.NamespacedName, mutate func(task *v1alpha1.Task)) {
	t.Helper()
	for range 10 {
		task := getTask(t, key)
		task.Status.ObservedGeneration = task.Generation
		mutate(task)
		err := k8s.Status().Update(suiteCtx, task)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("updating the status of %s: %v", key, err)
		}
	}
	t.Fatalf("updating the status of %s: too many conflicts", key)
}

// setCondition sets a condition observed at the Task's generation.
func setCondition(task *v1alpha1.Task, typ string, status metav1.ConditionStatus, reason v1alpha1.Reason, msg string) {
	meta.SetStatusCondition(&task.Status.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: string(reason), Message: msg,
		ObservedGeneration: task.Generation,
	})
}

// inProgress sets the status of a one-shot run in progress.
func inProgress(task *v1alpha1.Task, phase v1alpha1.TaskPhase, attempts int32) {
	task.Status.Phase = phase
	task.Status.Attempts = attempts
	task.Status.CurrentRun = "0"
	setCondition(task, v1alpha1.ConditionReady, metav1.ConditionUnknown, v1alpha1.ReasonRunning, "run 0 in progress")
	setCondition(task, v1alpha1.ConditionFailed, metav1.ConditionFalse, v1alpha1.ReasonNotFailed, "")
	setCondition(task, v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonRunning, "run 0 in progress")
	setCondition(task, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonNotFailed, "")
}

// succeeded sets the status of a one-shot Task whose run succeeded.
func succeeded(task *v1alpha1.Task, attempts int32) {
	now := metav1.Now()
	task.Status.Phase = v1alpha1.PhaseSucceeded
	task.Status.Attempts = attempts
	task.Status.CurrentRun = "0"
	task.Status.History = []v1alpha1.RunRecord{{
		RunID: "0", Attempts: attempts, Result: v1alpha1.RunResultSucceeded,
		StartTime: &metav1.Time{Time: now.Add(-12 * time.Second)}, CompletionTime: &now,
		Message: fmt.Sprintf("succeeded on attempt %d", attempts),
	}}
	setCondition(task, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, "run 0 succeeded")
	setCondition(task, v1alpha1.ConditionFailed, metav1.ConditionFalse, v1alpha1.ReasonNotFailed, "")
	setCondition(task, v1alpha1.ConditionReconciling, metav1.ConditionFalse, v1alpha1.ReasonIdle, "")
	setCondition(task, v1alpha1.ConditionStalled, metav1.ConditionFalse, v1alpha1.ReasonNotFailed, "")
}

// writeFile writes content to a file in a temporary folder.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func assertContains(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("%s does not contain %q:\n%s", what, want, got)
		}
	}
}
