//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cliv1alpha1 "github.com/taskops/task-operator/api/cli/v1alpha1"
	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// CI pipelines on the real node: plain `kubectl wait` on either outcome,
// and the plugin against the real operator (run, wait, trigger, cancel,
// logs, history), including a CI job that is cancelled.

// kubectl wait --for=condition=Finished returns within seconds for a Task
// that succeeds and for one that fails, and Ready tells them apart.
func TestKubectlWaitForFinishedReturnsOnEitherOutcome(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-finished")
	create(t, testutil.NewTask(ns, "passes", testutil.Shell("echo fine")))
	create(t, testutil.NewTask(ns, "fails", testutil.Shell("echo broken >&2; exit 3")))
	for name, ready := range map[string]metav1.ConditionStatus{"passes": metav1.ConditionTrue, "fails": metav1.ConditionFalse} {
		waited := kubectlWait(t, ns, "condition=Finished", "task/"+name, 60*time.Second)
		task := mustGetTask(t, ns, name)
		expectCondition(t, task, v1alpha1.ConditionReady, ready, "")
		t.Logf("kubectl wait --for=condition=Finished task/%s returned after %s; Ready=%s (%s)", name, harness.Secs(waited),
			harness.Cond(task, v1alpha1.ConditionReady).Status, harness.Cond(task, v1alpha1.ConditionFinished).Reason)
	}
	fails := mustGetTask(t, ns, "fails")
	expectCondition(t, fails, v1alpha1.ConditionFinished, metav1.ConditionTrue, string(v1alpha1.ReasonRetriesExhausted))
	if r := fails.Status.AttemptRecords; len(r) != 1 || r[0].ExitCode == nil || *r[0].ExitCode != 3 || !strings.Contains(r[0].Message, "broken") {
		t.Errorf("attemptRecords %+v, want the attempt with exit code 3 and its output", r)
	}
}

// A CI job that is cancelled while `kubectl task run --wait` waits: the
// plugin gets SIGINT, cancels the run and exits 4; the pod of its plain
// `sleep` ends within stopBound of the stop and the Task says Cancelled.
func TestAnInterruptedRunWaitCancelsTheRun(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-cancel")
	file := filepath.Join(t.TempDir(), "task.yaml")
	manifest := fmt.Sprintf(`apiVersion: batch.taskops.io/v1alpha1
kind: Task
metadata:
  generateName: ci-build-
  namespace: %s
spec:
  type: shell
  shell: %q
  maxRetry: 2
`, ns, plainSleep)
	must(t, os.WriteFile(file, []byte(manifest), 0o644))
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(2*time.Minute))
	defer cancel()
	var out strings.Builder
	cmd := exec.CommandContext(ctx, env.plugin, "run", "-f", file, "--wait", "--timeout", "5m", "--kubeconfig", env.cluster.Kubeconfig)
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var name, job string
	var running []corev1.Pod
	eventually(t, 60*time.Second, "the generated Task's pod to run", func(ctx context.Context) (bool, string) {
		if name == "" {
			first, _, _ := strings.Cut(out.String(), "\n")
			if n, ok := strings.CutPrefix(first, "task/"); ok && strings.Contains(n, " created") {
				name, _, _ = strings.Cut(n, " ")
			}
			if name == "" {
				return false, "output so far: " + out.String()
			}
		}
		pods, err := harness.PodsOf(ctx, env.c, ns, name)
		if err != nil {
			return false, err.Error()
		}
		if len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning {
			job, running = pods[0].Labels[batchv1.JobNameLabel], pods
			return true, ""
		}
		return false, fmt.Sprintf("pods %v", harness.PodPhases(pods))
	})
	if !strings.HasPrefix(name, "ci-build-") {
		t.Fatalf("the plugin did not print the generated name: %q", out.String())
	}
	procs := watchProcesses(t, running)
	interrupted := time.Now()
	must(t, cmd.Process.Signal(syscall.SIGINT))
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 4 {
			t.Fatalf("the plugin exited with %v, want exit code 4 (cancelled); output:\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the plugin did not exit within 20 s of SIGINT; output:\n%s", out.String())
	}
	ended := stoppedPodEnds(t, ns, job, v1alpha1.AttemptCancelled, procs)
	task := mustGetTask(t, ns, name)
	if len(task.Status.History) == 0 || task.Status.History[0].Result != v1alpha1.RunResultCancelled || task.Status.Attempts != 1 {
		t.Fatalf("status after the cancel: phase %s, history %+v", task.Status.Phase, task.Status.History)
	}
	expectCondition(t, task, v1alpha1.ConditionReady, metav1.ConditionFalse, string(v1alpha1.ReasonCancelled))
	expectCondition(t, task, v1alpha1.ConditionFinished, metav1.ConditionTrue, string(v1alpha1.ReasonCancelled))
	t.Logf("SIGINT to kubectl task run --wait: the pod of %q ended %s after the stop decision, %s after the signal, Task %s; plugin said:\n%s",
		plainSleep, harness.Secs(ended), harness.Secs(time.Since(interrupted)), task.Status.Phase, out.String())
}

// The plugin against the real operator: trigger --wait on a failing Task,
// history --attempts, logs of an earlier attempt, cancel --wait.
func TestThePluginTriggersCancelsAndExplainsAttempts(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-plugin")
	create(t, testutil.NewTask(ns, "flaky", testutil.Retries(1, 1, 1, 1),
		testutil.Shell(`echo "attempt on $(hostname)"; exit 7`)))
	kubectlWait(t, ns, "condition=Finished", "task/flaky", 90*time.Second)

	attempts := kubectlTask(t, 30*time.Second, "history", "flaky", "-n", ns, "--attempts")
	for _, s := range []string{"ATTEMPT", "PodFailed", "7"} {
		if !strings.Contains(attempts, s) {
			t.Errorf("history --attempts lacks %q:\n%s", s, attempts)
		}
	}
	if logs := kubectlTask(t, 30*time.Second, "logs", "flaky", "-n", ns, "--attempt", "1"); !strings.Contains(logs, "flaky-") {
		t.Errorf("logs --attempt 1: %q", logs)
	}

	// trigger --wait on a run that fails: exit 1 and where to look.
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(2*time.Minute))
	defer cancel()
	trigger := exec.CommandContext(ctx, env.plugin, "trigger", "flaky", "-n", ns, "--wait", "--timeout", "90s", "--kubeconfig", env.cluster.Kubeconfig)
	out, err := trigger.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("trigger --wait of a failing run: %v\n%s", err, out)
	}
	// Where to look: the attempts, the commands, the end of the log.
	for _, s := range []string{"attempts of run m", "exit code 7", "more: kubectl task history flaky", "log lines of job flaky-", "attempt on flaky-"} {
		if !strings.Contains(string(out), s) {
			t.Errorf("trigger --wait of a failing run does not say %q:\n%s", s, out)
		}
	}

	// cancel --wait stops a run that would run for an hour.
	create(t, testutil.NewTask(ns, "long", testutil.Shell(runsUntilStopped)))
	waitPhase(t, ns, "long", v1alpha1.PhaseRunning, 60*time.Second)
	res := kubectlTask(t, 60*time.Second, "cancel", "long", "-n", ns, "--wait", "--timeout", "45s")
	if !strings.Contains(res, "cancelled: run 0") {
		t.Errorf("cancel --wait said %q", res)
	}
	if task := mustGetTask(t, ns, "long"); task.Status.Phase != v1alpha1.PhaseFailed || len(task.Status.Active) != 0 {
		t.Errorf("after cancel: phase %s, %d active Jobs", task.Status.Phase, len(task.Status.Active))
	}
}

// The README's re-run recipe with plain kubectl: annotate run-now=T, wait
// for status.lastFinishedRunNowToken=T, read Ready. Each re-run's outcome
// is the opposite of the previous one (the script fails for run ids whose
// first hex digit is 0-7), so a wait that returned on the previous run's
// status would read the wrong outcome. 20 re-runs in a row.
func TestThePlainKubectlReRunRecipeReportsEachNewOutcome(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-rerun")
	create(t, testutil.NewTask(ns, "nightly", testutil.Shell(`case "$TASK_RUN_ID" in m[0-7]*) echo "run $TASK_RUN_ID fails" >&2; exit 3;; *) echo "run $TASK_RUN_ID passes";; esac`)))
	kubectlWait(t, ns, "condition=Finished", "task/nightly", 90*time.Second)
	expectCondition(t, mustGetTask(t, ns, "nightly"), v1alpha1.ConditionReady, metav1.ConditionTrue, "")

	const reruns = 20
	var took []string
	n := 0
	for i := range reruns {
		wantFail := i%2 == 0 // fail after the first run's success, then alternate
		// A token whose run the script fails (or passes), as this re-run wants.
		var token string
		for {
			n++
			token = fmt.Sprintf("ci-%d", n)
			if fails := runs.RunNowID(token)[1] <= '7'; fails == wantFail {
				break
			}
		}
		start := time.Now()
		kubectl(t, 30*time.Second, "annotate", "-n", ns, "task/nightly", v1alpha1.AnnotationRunNow+"="+token, "--overwrite")
		kubectl(t, 105*time.Second, "wait", "-n", ns, "task/nightly", "--timeout=90s",
			"--for=jsonpath={.status.lastFinishedRunNowToken}="+token)
		ready := kubectl(t, 30*time.Second, "get", "-n", ns, "task/nightly", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		want := "True"
		if wantFail {
			want = "False"
		}
		if ready != want {
			task := mustGetTask(t, ns, "nightly")
			t.Fatalf("re-run %d (token %s, run %s): Ready=%s after the wait, want %s; history %+v", i+1, token, runs.RunNowID(token), ready, want, task.Status.History)
		}
		took = append(took, harness.Secs(time.Since(start)))
	}
	t.Logf("%d re-runs with plain kubectl, each reported its own outcome; annotate to outcome: %s", reruns, strings.Join(took, " "))
}

// `kubectl task run -f task.yaml --wait -o json | jq .phase`: with -o json
// the plugin's stdout is the finished run alone (a TaskRunView), on a real
// node, and the exit code still says how the run ended (a shell `exit 3`).
func TestRunWaitOutputJSONPipesTheFinishedRun(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-ci-json")
	for _, c := range []struct {
		shell, phase string
		code         int
	}{{"echo built", "Succeeded", 0}, {"echo broken; exit 3", "Failed", 1}} {
		file := filepath.Join(t.TempDir(), "task.yaml")
		must(t, os.WriteFile(file, []byte(fmt.Sprintf("apiVersion: batch.taskops.io/v1alpha1\nkind: Task\nmetadata:\n  generateName: ci-json-\n  namespace: %s\nspec:\n  type: shell\n  shell: %q\n", ns, c.shell)), 0o644))
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(3*time.Minute))
		var stdout, stderr strings.Builder
		cmd := exec.CommandContext(ctx, env.plugin, "run", "-f", file, "--wait", "--timeout", "2m", "-o", "json", "--kubeconfig", env.cluster.Kubeconfig)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		var run cliv1alpha1.TaskRunView
		if jerr := json.Unmarshal([]byte(stdout.String()), &run); jerr != nil || run.Kind != cliv1alpha1.Kind || run.Phase != c.phase || code != c.code {
			t.Errorf("%q: exit %d (want %d), kind %q, .phase %q (want %s), %v\nstdout:\n%s\nstderr:\n%s", c.shell, code, c.code, run.Kind, run.Phase, c.phase, jerr, stdout.String(), stderr.String())
		}
	}
}
