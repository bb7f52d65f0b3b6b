package cli

import (
	"regexp"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

// finishedOneShot creates a one-shot Task whose run 0 succeeded.
func finishedOneShot(t *testing.T, ns, name string) types.NamespacedName {
	t.Helper()
	key := types.NamespacedName{Namespace: ns, Name: name}
	createTask(t, shellTask(ns, name, 1))
	setStatus(t, key, func(task *v1alpha1.Task) { succeeded(task, 1) })
	return key
}

// acceptRunNow plays the operator taking a run-now token: it records the
// token and starts its run.
func acceptRunNow(t *testing.T, key types.NamespacedName, token string) {
	t.Helper()
	id := runs.RunNowID(token)
	now := metav1.Now()
	setStatus(t, key, func(task *v1alpha1.Task) {
		task.Status.LastRunNowToken = runs.TokenHash(token)
		task.Status.CurrentRun = id
		task.Status.Phase = v1alpha1.PhaseRunning
		task.Status.Attempts = 1
		task.Status.LastJobName = key.Name + "-abcde-" + id + "-1"
		task.Status.History = append([]v1alpha1.RunRecord{{RunID: id, Attempts: 1,
			Result: v1alpha1.RunResultRunning, StartTime: &now}}, task.Status.History...)
		setCondition(task, v1alpha1.ConditionReady, metav1.ConditionUnknown, v1alpha1.ReasonRunning, "")
	})
}

// finishRun plays the operator ending run id.
func finishRun(t *testing.T, key types.NamespacedName, id string, result v1alpha1.RunResult, msg string) {
	t.Helper()
	now := metav1.Now()
	setStatus(t, key, func(task *v1alpha1.Task) {
		for i := range task.Status.History {
			if task.Status.History[i].RunID == id {
				task.Status.History[i].Result = result
				task.Status.History[i].CompletionTime = &now
				task.Status.History[i].Message = msg
			}
		}
		task.Status.Phase = v1alpha1.PhaseSucceeded
		if result != v1alpha1.RunResultSucceeded {
			task.Status.Phase = v1alpha1.PhaseFailed
			task.Status.LastError = "PodFailed (attempt 2, job j: exit 1"
		}
	})
}

var tokenPattern = regexp.MustCompile(`^\d{8}T\d{6}Z-[0-9a-f]{8}$`)

// waitToken waits for the verb to set the annotation and returns the
// token, which must look like one the plugin makes.
func waitToken(t *testing.T, key client.ObjectKey, annotation string) string {
	t.Helper()
	var token string
	eventually(t, "the "+annotation+" annotation", func() bool {
		token = getTask(t, key).Annotations[annotation]
		return token != ""
	})
	if !tokenPattern.MatchString(token) {
		t.Errorf("token %q does not look like <UTC timestamp>-<random hex>", token)
	}
	return token
}

func TestTriggerWaitSucceeds(t *testing.T) {
	ns := newNamespace(t)
	key := finishedOneShot(t, ns, "report")
	inv := start(t, "-n", ns, "trigger", "report", "--wait", "--timeout", "30s")

	// The token is set with a merge patch and names the run.
	token := waitToken(t, key, v1alpha1.AnnotationRunNow)
	id := runs.RunNowID(token)
	inv.waitOutput(t, inv.stdout, "task/report triggered: run "+id+` (run-now token "`+token+`")`)
	// Ready=True from run 0 does not end the wait for the new run.
	inv.waitOutput(t, inv.stderr, "task/report: waiting for the operator to start run "+id)

	acceptRunNow(t, key, token)
	inv.waitOutput(t, inv.stderr, "task/report: Running (run "+id+", attempt 1/2)")
	finishRun(t, key, id, v1alpha1.RunResultSucceeded, "succeeded on attempt 1")

	inv.exits(t, ExitOK, inv.stdout, "task/report succeeded (run "+id+", 1 attempt")
}

func TestTriggerWaitFails(t *testing.T) {
	ns := newNamespace(t)
	key := finishedOneShot(t, ns, "deploy")
	const token = "pipeline-4711"
	id := runs.RunNowID(token)
	inv := start(t, "-n", ns, "trigger", "deploy", "--run-now-token", token, "--wait", "--timeout", "30s")
	inv.waitOutput(t, inv.stderr, "waiting for the operator to start run "+id)
	if got := getTask(t, key).Annotations[v1alpha1.AnnotationRunNow]; got != token {
		t.Fatalf("annotation %q, want %q", got, token)
	}
	acceptRunNow(t, key, token)
	finishRun(t, key, id, v1alpha1.RunResultFailed, "RetriesExhausted: PodFailed: exit code 1")
	inv.exits(t, ExitFailed, inv.stderr,
		"task/deploy: run "+id+" failed after 1 attempt: RetriesExhausted: PodFailed: exit code 1",
		"last error: PodFailed (attempt 2, job j: exit 1")

	// The same token again starts no new run: wait reports that run.
	code, stdout, stderr := runCLI(t, "-n", ns, "trigger", "deploy", "--run-now-token", token, "--wait", "--timeout", "10s")
	if code != ExitFailed {
		t.Fatalf("second trigger: exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestTriggerQueuedAndReplaced: with Forbid the run queues behind the
// active one; a token replaced before the operator took it never runs.
func TestTriggerQueuedAndReplaced(t *testing.T) {
	ns, key, _ := newShellTask(t, "busy", 0)
	setStatus(t, key, func(task *v1alpha1.Task) { inProgress(task, v1alpha1.PhaseRunning, 1) })

	inv := start(t, "-n", ns, "trigger", "busy", "--run-now-token", "first", "--wait", "--timeout", "30s")
	inv.waitOutput(t, inv.stderr, "run "+runs.RunNowID("first")+" queued behind run 0 (concurrencyPolicy Forbid), which is Running (attempt 1/1)")

	if code, _, stderr := runCLI(t, "-n", ns, "trigger", "busy", "--run-now-token", "second"); code != ExitOK {
		t.Fatalf("second trigger: exit code %d\n%s", code, stderr)
	}
	inv.exits(t, ExitError, inv.stderr, `run-now token "first" was replaced by "second" before the operator started run `)
}

func TestTriggerNotFound(t *testing.T) {
	ns := newNamespace(t)
	code, stdout, stderr := runCLI(t, "-n", ns, "trigger", "nope")
	if code != ExitError {
		t.Fatalf("exit code %d, want 3\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	assertContains(t, "stderr", stderr, `task "nope" not found`)
}

func TestTriggerWithoutWait(t *testing.T) {
	ns := newNamespace(t)
	key := finishedOneShot(t, ns, "quick")
	code, stdout, stderr := runCLI(t, "-n", ns, "trigger", "quick")
	if code != ExitOK {
		t.Fatalf("exit code %d\n%s", code, stderr)
	}
	token := getTask(t, key).Annotations[v1alpha1.AnnotationRunNow]
	assertContains(t, "stdout", stdout, "task/quick triggered: run "+runs.RunNowID(token))
}

// TestRunTakesARunNowToken: `run NAME` sets the token it is given, as
// trigger does, and `run -f` refuses one (a new Task starts its first run
// by itself).
func TestRunTakesARunNowToken(t *testing.T) {
	ns, key, _ := newShellTask(t, "deploy", 0)
	code, _, stderr := runCLI(t, "-n", ns, "run", "deploy", "--run-now-token", "pipeline-42")
	if got := getTask(t, key).Annotations[v1alpha1.AnnotationRunNow]; code != ExitOK || got != "pipeline-42" {
		t.Fatalf("run NAME --run-now-token: exit %d, run-now %q\nstderr: %s", code, got, stderr)
	}
	file := writeFile(t, "task.yaml", "apiVersion: batch.taskops.io/v1alpha1\nkind: Task\nmetadata: {name: other}\nspec: {type: shell, shell: 'true'}\n")
	code, _, stderr = runCLI(t, "-n", ns, "run", "-f", file, "--run-now-token", "x")
	if code != ExitError {
		t.Errorf("run -f --run-now-token: exit %d, want %d", code, ExitError)
	}
	assertContains(t, "stderr", stderr, "--run-now-token starts a run of an existing Task")
}
