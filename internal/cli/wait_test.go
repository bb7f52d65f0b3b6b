package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	cliv1alpha1 "github.com/taskops/task-operator/api/cli/v1alpha1"
	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

const taskYAML = `apiVersion: batch.taskops.io/v1alpha1
kind: Task
metadata:
  name: build
spec:
  type: shell
  shell: make test
  maxRetry: 2
`

func TestRunWaitSucceeds(t *testing.T) {
	ns := newNamespace(t)
	file := writeFile(t, "task.yaml", taskYAML)
	inv := start(t, "-n", ns, "run", "-f", file, "--wait", "--timeout", "30s")
	key := types.NamespacedName{Namespace: ns, Name: "build"}

	inv.waitOutput(t, inv.stdout, "task/build created in namespace "+ns)
	inv.waitOutput(t, inv.stderr, "task/build: Pending (waiting for the operator")
	setStatus(t, key, func(task *v1alpha1.Task) { inProgress(task, v1alpha1.PhaseRunning, 1) })
	inv.waitOutput(t, inv.stderr, "task/build: Running (attempt 1/3)")

	next := metav1.NewTime(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	setStatus(t, key, func(task *v1alpha1.Task) {
		inProgress(task, v1alpha1.PhaseRetrying, 1)
		task.Status.NextRetryTime = &next
		task.Status.LastError = "PodFailed (attempt 1, job build-abcde-0-1: exit code 1\nmake: *** [test] Error 1"
	})
	inv.waitOutput(t, inv.stderr, "task/build: Retrying (attempt 1/3 failed), next attempt at 2030-01-02T03:04:05Z: PodFailed (attempt 1")
	setStatus(t, key, func(task *v1alpha1.Task) { inProgress(task, v1alpha1.PhaseRunning, 2) })
	inv.waitOutput(t, inv.stderr, "task/build: Running (attempt 2/3)")
	setStatus(t, key, func(task *v1alpha1.Task) { succeeded(task, 2) })

	inv.exits(t, ExitOK, inv.stdout, "task/build succeeded (run 0, 2 attempts, 12s)")
}

func TestRunWaitFails(t *testing.T) {
	ns := newNamespace(t)
	file := writeFile(t, "task.yaml", taskYAML)
	inv := start(t, "-n", ns, "run", "-f", file, "--wait", "--timeout", "30s")
	key := types.NamespacedName{Namespace: ns, Name: "build"}
	inv.waitOutput(t, inv.stdout, "task/build created")

	setStatus(t, key, func(task *v1alpha1.Task) {
		task.Status.Phase = v1alpha1.PhaseFailed
		task.Status.Attempts = 3
		task.Status.CurrentRun = "0"
		task.Status.LastError = "PodFailed (attempt 3, job build-abcde-0-3: exit code 2\nFAIL: TestThing"
		setCondition(task, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonRetriesExhausted, "run 0 failed")
		setCondition(task, v1alpha1.ConditionFailed, metav1.ConditionTrue, v1alpha1.ReasonRetriesExhausted,
			"run 0 failed after 3 attempts; last: PodFailed")
	})
	inv.exits(t, ExitFailed, inv.stderr,
		"task/build failed: RetriesExhausted: run 0 failed after 3 attempts; last: PodFailed",
		"last error: PodFailed (attempt 3, job build-abcde-0-3: exit code 2\n  FAIL: TestThing")
}

// TestWaitTrustsOnlyCurrentStatus: a status computed from an older
// generation is not trusted; the wait times out with exit code 2.
func TestWaitTrustsOnlyCurrentStatus(t *testing.T) {
	ns, key, _ := newShellTask(t, "stale", 0)
	setStatus(t, key, func(task *v1alpha1.Task) { succeeded(task, 1) })

	// A spec edit: generation 2, status still from generation 1.
	task := getTask(t, key)
	task.Spec.Shell = "echo changed"
	if err := k8s.Update(suiteCtx, task); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	code, _, stderr := runCLI(t, "-n", ns, "wait", "stale", "--timeout", "1s")
	if code != ExitTimeout {
		t.Fatalf("exit code %d, want 2\nstderr:\n%s", code, stderr)
	}
	if d := time.Since(begin); d > 10*time.Second {
		t.Errorf("a 1s timeout took %s", d)
	}
	assertContains(t, "stderr", stderr,
		"waiting for the operator to observe generation 2",
		"error: timed out after 1s waiting for task/stale in namespace "+ns)

	// Once the operator observed generation 2, the same status counts.
	setStatus(t, key, func(task *v1alpha1.Task) { succeeded(task, 1) })
	code, stdout, stderr := runCLI(t, "-n", ns, "wait", "stale", "--timeout", "10s")
	if code != ExitOK {
		t.Fatalf("exit code %d, want 0\nstderr:\n%s", code, stderr)
	}
	assertContains(t, "stdout", stdout, "task/stale succeeded")
}

func TestWaitNotFound(t *testing.T) {
	ns := newNamespace(t)
	code, _, stderr := runCLI(t, "-n", ns, "wait", "missing", "--timeout", "5s")
	if code != ExitError {
		t.Fatalf("exit code %d, want 3\nstderr:\n%s", code, stderr)
	}
	assertContains(t, "stderr", stderr, `task "missing" not found in namespace "`+ns+`"`)
}

func TestWaitTaskDeleted(t *testing.T) {
	ns, key, task := newShellTask(t, "doomed", 0)
	setStatus(t, key, func(task *v1alpha1.Task) { inProgress(task, v1alpha1.PhaseRunning, 1) })
	inv := start(t, "-n", ns, "wait", "doomed", "--timeout", "30s")
	inv.waitOutput(t, inv.stderr, "task/doomed: Running (attempt 1/1)")
	if err := k8s.Delete(suiteCtx, task); err != nil {
		t.Fatal(err)
	}
	inv.exits(t, ExitError, inv.stderr, "task/doomed was deleted before it finished")
}

// TestWaitCron: for a cron Task, wait skips the finished runs and reports
// the result of the next one.
func TestWaitCron(t *testing.T) {
	ns, key, _ := newShellTask(t, "nightly", 1, testutil.Schedule("@hourly"))
	past := metav1.NewTime(time.Now().Add(-time.Hour))
	nextSlot := metav1.NewTime(time.Date(2030, 1, 1, 1, 0, 0, 0, time.UTC))
	setStatus(t, key, func(task *v1alpha1.Task) {
		task.Status.Phase = v1alpha1.PhaseScheduled
		task.Status.CurrentRun = "s100"
		task.Status.Attempts = 1
		task.Status.NextScheduleTime = &nextSlot
		task.Status.History = []v1alpha1.RunRecord{{RunID: "s100", Attempts: 1, Result: v1alpha1.RunResultSucceeded,
			StartTime: &past, CompletionTime: &past}}
		setCondition(task, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, "")
		setCondition(task, v1alpha1.ConditionFailed, metav1.ConditionFalse, v1alpha1.ReasonNotFailed, "")
	})

	inv := start(t, "-n", ns, "wait", "nightly", "--timeout", "30s")
	inv.waitOutput(t, inv.stderr, "task/nightly: waiting for the next run at 2030-01-01T01:00:00Z")

	now := metav1.Now()
	setStatus(t, key, func(task *v1alpha1.Task) {
		task.Status.Phase = v1alpha1.PhaseRunning
		task.Status.CurrentRun = "s200"
		task.Status.Attempts = 1
		task.Status.History = append([]v1alpha1.RunRecord{{RunID: "s200", Attempts: 1,
			Result: v1alpha1.RunResultRunning, StartTime: &now}}, task.Status.History...)
	})
	inv.waitOutput(t, inv.stderr, "task/nightly: Running (run s200, attempt 1/2)")
	setStatus(t, key, func(task *v1alpha1.Task) {
		task.Status.Phase = v1alpha1.PhaseScheduled
		task.Status.Attempts = 2
		task.Status.LastError = "PodFailed (attempt 2, job x: boom"
		task.Status.History[0].Attempts = 2
		task.Status.History[0].Result = v1alpha1.RunResultFailed
		task.Status.History[0].CompletionTime = &now
		task.Status.History[0].Message = "RetriesExhausted: 2 attempts failed"
	})
	inv.exits(t, ExitFailed, inv.stderr,
		"task/nightly: run s200 failed after 2 attempts: RetriesExhausted: 2 attempts failed",
		"last error: PodFailed (attempt 2, job x: boom")
}

// TestWaitCronRunning: a cron run in progress is the one waited for.
func TestWaitCronRunning(t *testing.T) {
	ns, key, _ := newShellTask(t, "hourly", 0, testutil.Schedule("0 * * * *"))
	now := metav1.Now()
	setStatus(t, key, func(task *v1alpha1.Task) {
		task.Status.Phase = v1alpha1.PhaseRunning
		task.Status.CurrentRun = "s300"
		task.Status.Attempts = 1
		task.Status.History = []v1alpha1.RunRecord{{RunID: "s300", Attempts: 1, Result: v1alpha1.RunResultRunning, StartTime: &now}}
	})
	inv := start(t, "-n", ns, "wait", "hourly", "--timeout", "30s")
	inv.waitOutput(t, inv.stderr, "task/hourly: Running (run s300, attempt 1/1)")
	setStatus(t, key, func(task *v1alpha1.Task) {
		task.Status.Phase = v1alpha1.PhaseScheduled
		task.Status.History[0].Result = v1alpha1.RunResultSucceeded
		task.Status.History[0].CompletionTime = &now
	})
	inv.exits(t, ExitOK, inv.stdout, "task/hourly succeeded (run s300, 1 attempt")
}

func TestRunFromJSONWithGenerateName(t *testing.T) {
	ns := newNamespace(t)
	file := writeFile(t, "task.json", `{"apiVersion":"batch.taskops.io/v1alpha1","kind":"Task",
		"metadata":{"generateName":"ci-","namespace":"`+ns+`"},
		"spec":{"type":"http","url":"https://example.com/hook"}}`)
	code, stdout, stderr := runCLI(t, "run", "-f", file)
	if code != ExitOK {
		t.Fatalf("exit code %d, want 0\nstderr:\n%s", code, stderr)
	}
	if !strings.HasPrefix(stdout, "task/ci-") || !strings.Contains(stdout, "created in namespace "+ns) {
		t.Fatalf("stdout: %q", stdout)
	}
	name := strings.TrimPrefix(strings.Fields(stdout)[0], "task/")
	got := getTask(t, types.NamespacedName{Namespace: ns, Name: name})
	if got.Spec.URL != "https://example.com/hook" {
		t.Errorf("spec.url = %q", got.Spec.URL)
	}
}

func TestRunErrors(t *testing.T) {
	ns := newNamespace(t)
	withNS := writeFile(t, "task.yaml", strings.Replace(taskYAML, "name: build", "name: build\n  namespace: elsewhere", 1))
	cm := writeFile(t, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n")
	two := writeFile(t, "two.yaml", taskYAML+"---\n"+taskYAML)
	typo := writeFile(t, "typo.yaml", strings.Replace(taskYAML, "shell: make test", "shel: make test", 1))
	invalid := writeFile(t, "invalid.yaml", strings.Replace(taskYAML, "type: shell", "type: http", 1))

	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no file", []string{"run"}, "-f/--filename or a Task NAME is required"},
		{"missing file", []string{"run", "-f", "/nonexistent/task.yaml"}, "reading /nonexistent/task.yaml"},
		{"namespace mismatch", []string{"-n", ns, "run", "-f", withNS}, `does not match --namespace "` + ns + `"`},
		{"not a Task", []string{"-n", ns, "run", "-f", cm}, "holds a ConfigMap (v1), not a Task (batch.taskops.io/v1alpha1)"},
		{"two objects", []string{"-n", ns, "run", "-f", two}, "holds 2 objects; run takes exactly one Task"},
		{"unknown field", []string{"-n", ns, "run", "-f", typo}, `unknown field "spec.shel"`},
		{"refused by the API server", []string{"-n", ns, "run", "-f", invalid}, "spec.url is required when type is http"},
		{"negative timeout", []string{"-n", ns, "run", "-f", invalid, "--timeout", "-1s"}, "--timeout must not be negative"},
		{"unknown flag", []string{"run", "--bogus"}, "unknown flag: --bogus"},
		{"missing name", []string{"wait"}, "accepts 1 arg(s), received 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != ExitError {
				t.Fatalf("exit code %d, want 3\nstderr:\n%s", code, stderr)
			}
			assertContains(t, "stderr", stderr, tc.want)
		})
	}

	// A second run of the same Task is refused with a hint.
	file := writeFile(t, "task.yaml", taskYAML)
	if code, _, stderr := runCLI(t, "-n", ns, "run", "-f", file); code != ExitOK {
		t.Fatalf("first run: exit code %d\n%s", code, stderr)
	}
	code, _, stderr := runCLI(t, "-n", ns, "run", "-f", file)
	if code != ExitError {
		t.Fatalf("second run: exit code %d, want 3", code)
	}
	assertContains(t, "stderr", stderr, "already exists", "kubectl task run build")
}

// With -o json, stdout holds only the run as it finished (a TaskRunView),
// so CI can pipe it (`kubectl task run -f t.yaml --wait -o json | jq
// .phase`); every message goes to stderr, and the exit code still tells
// the result.
func TestRunWaitOutputJSONIsTheFinishedRunAlone(t *testing.T) {
	ns := newNamespace(t)
	file := writeFile(t, "task.yaml", taskYAML)
	inv := start(t, "-n", ns, "run", "-f", file, "--wait", "--timeout", "30s", "-o", "json")
	key := types.NamespacedName{Namespace: ns, Name: "build"}
	inv.waitOutput(t, inv.stderr, "task/build created in namespace "+ns)
	setStatus(t, key, func(task *v1alpha1.Task) { succeeded(task, 1) })
	if code := inv.wait(t); code != ExitOK {
		t.Fatalf("exit code %d, want 0\nstderr:\n%s", code, inv.stderr)
	}
	var got cliv1alpha1.TaskRunView
	if err := json.Unmarshal([]byte(inv.stdout.String()), &got); err != nil {
		t.Fatalf("stdout is not one JSON TaskRunView: %v\n%s", err, inv.stdout)
	}
	if got.APIVersion != "cli.taskops.io/v1alpha1" || got.Kind != "TaskRunView" || got.Task != "build" || got.Namespace != ns ||
		got.RunID != "0" || got.Phase != "Succeeded" || got.Attempts != 1 {
		t.Errorf("stdout: %+v", got)
	}
	assertContains(t, "stderr", inv.stderr.String(), "task/build succeeded")

	if code, out, _ := runCLI(t, "-n", ns, "wait", "build", "-o", "name"); code != ExitOK || out != "run/0\n" {
		t.Errorf("wait -o name: code %d, stdout %q", code, out)
	}
	if code, out, _ := runCLI(t, "-n", ns, "wait", "build", "-o", "jsonpath={.phase}"); code != ExitOK || out != "Succeeded" {
		t.Errorf("wait -o jsonpath={.phase}: code %d, stdout %q", code, out)
	}
	// -o wide is the run's history row with every column.
	code, out, stderr := runCLI(t, "-n", ns, "wait", "build", "-o", "wide")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != ExitOK || len(lines) != 2 ||
		!strings.HasPrefix(lines[0], "TASK ") || !strings.Contains(lines[0], "REASON") || !strings.HasPrefix(lines[1], "build ") || !strings.Contains(lines[1], "Succeeded") {
		t.Errorf("wait -o wide: code %d, stdout %q, stderr %q", code, out, stderr)
	}
	for _, bad := range []string{"table", "jsonpath={.phase"} {
		if code, _, stderr := runCLI(t, "-n", ns, "wait", "build", "-o", bad); code != ExitError || !strings.Contains(stderr, "--output") {
			t.Errorf("wait -o %s: code %d, stderr %q", bad, code, stderr)
		}
	}
}

// Verbs about a Task print the Task: without --wait, run -f prints it as
// created, and -o wide is the row kubectl get -o wide prints (the CRD's
// columns, the priority-1 ones such as LAST-ERROR included).
func TestRunWithoutWaitPrintsTheTask(t *testing.T) {
	ns := newNamespace(t)
	file := writeFile(t, "task.yaml", taskYAML)
	if code, out, stderr := runCLI(t, "-n", ns, "run", "-f", file, "-o", "name"); code != ExitOK || out != "task.batch.taskops.io/build\n" {
		t.Errorf("run -f -o name: code %d, stdout %q, stderr %q", code, out, stderr)
	}
	code, out, stderr := runCLI(t, "-n", ns, "suspend", "build", "-o", "wide")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != ExitOK || len(lines) != 2 ||
		!strings.Contains(lines[0], "LAST-ERROR") || !strings.HasPrefix(lines[1], "build ") {
		t.Errorf("suspend -o wide: code %d, stdout %q, stderr %q", code, out, stderr)
	}
}

func TestCompletionScriptsAreServed(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		code, out, stderr := runCLI(t, "completion", shell)
		if code != ExitOK || !strings.Contains(out, "kubectl-task") {
			t.Errorf("completion %s: code %d, %d bytes, stderr %q", shell, code, len(out), stderr)
		}
	}
}
