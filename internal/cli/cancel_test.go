package cli

import (
	"testing"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"k8s.io/apimachinery/pkg/types"
)

func TestCancelSetsANewCancelTokenAndWaitsUntilNoRunIsUnfinished(t *testing.T) {
	ns := newNamespace(t)
	key := finishedOneShot(t, ns, "long")
	acceptRunNow(t, key, "r1")
	inv := start(t, "-n", ns, "cancel", "long", "--wait", "--timeout", "30s")
	token := waitToken(t, key, v1alpha1.AnnotationCancel)
	inv.waitOutput(t, inv.stdout, `task/long: cancel requested (cancel token "`+token+`")`)
	inv.waitOutput(t, inv.stderr, "waiting for the operator to take the cancel token")
	// The operator takes the token and stops the run.
	setStatus(t, key, func(task *v1alpha1.Task) { task.Status.LastCancelToken = runs.TokenHash(token) })
	finishRun(t, key, runs.RunNowID("r1"), v1alpha1.RunResultCancelled, "attempt 1 cancelled")
	inv.exits(t, ExitOK, inv.stdout, "no run is unfinished; cancelled: run "+runs.RunNowID("r1"))
}

func TestTriggerWaitInterruptedCancelsTheRunAndExitsCancelled(t *testing.T) {
	key, inv := triggered(t, "deploy", "p1")
	inv.waitOutput(t, inv.stderr, "Running")
	inv.interrupt()
	if code := inv.wait(t); code != ExitCancelled {
		t.Fatalf("exit code %d, want %d (cancelled)\nstderr:\n%s", code, ExitCancelled, inv.stderr)
	}
	if getTask(t, key).Annotations[v1alpha1.AnnotationCancel] == "" {
		t.Fatal("the interrupted trigger --wait set no cancel token")
	}
	assertContains(t, "stderr", inv.stderr.String(), "interrupted; cancelled its runs")
}

func TestTriggerWaitDetachedLeavesTheRunRunningWhenInterrupted(t *testing.T) {
	key, inv := triggered(t, "keep", "p2", "--detach")
	inv.waitOutput(t, inv.stderr, "Running")
	inv.interrupt()
	if code := inv.wait(t); code != ExitError {
		t.Fatalf("exit code %d, want %d\nstderr:\n%s", code, ExitError, inv.stderr)
	}
	if c := getTask(t, key).Annotations[v1alpha1.AnnotationCancel]; c != "" {
		t.Fatalf("--detach set a cancel token %q", c)
	}
}

func TestWaitReportsACancelledRunWithItsOwnExitCode(t *testing.T) {
	key, inv := triggered(t, "nightly", "p3", "--detach")
	finishRun(t, key, runs.RunNowID("p3"), v1alpha1.RunResultCancelled, "attempt 1 cancelled")
	inv.exits(t, ExitCancelled, inv.stderr, "was cancelled after 1 attempt")
}

func TestHistoryAttemptsPrintsTheNewestRunsAttempts(t *testing.T) {
	ns := newNamespace(t)
	key := finishedOneShot(t, ns, "flaky")
	code := int32(3)
	setStatus(t, key, func(task *v1alpha1.Task) {
		task.Status.AttemptRecords = []v1alpha1.AttemptRecord{
			{Attempt: 2, JobName: "flaky-abcde-0-2", Result: v1alpha1.AttemptResultSucceeded},
			{Attempt: 1, JobName: "flaky-abcde-0-1", Result: v1alpha1.AttemptResultFailed, Reason: v1alpha1.AttemptPodFailed,
				ExitCode: &code, Message: "pod flaky-abcde-0-1-0 exited with code 3: db down"},
		}
	})
	rc, stdout, _ := runCLI(t, "-n", ns, "history", "flaky", "--attempts")
	if rc != ExitOK {
		t.Fatalf("exit code %d", rc)
	}
	assertContains(t, "stdout", stdout, "ATTEMPT", "flaky-abcde-0-2", "Succeeded", "flaky-abcde-0-1", "PodFailed", "3", "db down")
}

// triggered runs `trigger NAME --wait --run-now-token TOKEN` (and more
// flags) on a finished one-shot Task in a new namespace, and plays the
// operator taking the token.
func triggered(t *testing.T, name, token string, more ...string) (types.NamespacedName, *invocation) {
	t.Helper()
	ns := newNamespace(t)
	key := finishedOneShot(t, ns, name)
	inv := start(t, append([]string{"-n", ns, "trigger", name, "--wait", "--run-now-token", token}, more...)...)
	inv.waitOutput(t, inv.stdout, "task/"+name+" triggered")
	acceptRunNow(t, key, token)
	return key, inv
}
