package cli

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

// run NAME --param writes the token and the values in one patch, waits for
// that run and -o jsonpath prints one of its results.
func TestRunNameWithParamsPrintsAResultOfThatRun(t *testing.T) {
	ns := newNamespace(t)
	key := finishedOneShot(t, ns, "report")
	inv := start(t, "-n", ns, "run", "report", "--param", "date=2026-11-30", "--param", "note=a=b c", "--wait", "--timeout", "30s",
		"-o", "jsonpath={.results.rows}")
	token := waitToken(t, key, v1alpha1.AnnotationRunNow)
	var got map[string]string
	if err := json.Unmarshal([]byte(getTask(t, key).Annotations[v1alpha1.AnnotationRunParams]), &got); err != nil {
		t.Fatalf("run-params annotation: %v", err)
	}
	if d := cmp.Diff(map[string]string{"date": "2026-11-30", "note": "a=b c"}, got); d != "" {
		t.Errorf("run-params (-want +got):\n%s", d)
	}
	id := runs.RunNowID(token)
	acceptRunNow(t, key, token)
	setStatus(t, key, func(task *v1alpha1.Task) { task.Status.History[0].Results = map[string]string{"rows": "1234"} })
	finishRun(t, key, id, v1alpha1.RunResultSucceeded, "succeeded on attempt 1")
	if code := inv.wait(t); code != ExitOK {
		t.Fatalf("exit code %d, want 0\nstderr:\n%s", code, inv.stderr)
	}
	if out := inv.stdout.String(); out != "1234" {
		t.Errorf("stdout %q, want the run's result 1234 alone", out)
	}

	// A trigger without --param removes the values: that run gets the defaults.
	if code, _, stderr := runCLI(t, "-n", ns, "trigger", "report"); code != ExitOK {
		t.Fatalf("trigger: exit code %d\n%s", code, stderr)
	}
	if v, ok := getTask(t, key).Annotations[v1alpha1.AnnotationRunParams]; ok {
		t.Errorf("run-params %q stayed after a trigger without --param", v)
	}
}

func TestParamFlagErrors(t *testing.T) {
	ns := newNamespace(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "x", "--param", "novalue"}, `--param "novalue": want NAME=VALUE`},
		{[]string{"run", "x", "--param", "a=1", "--param", "a=2"}, "--param a given twice"},
		{[]string{"run", "-f", "task.yaml", "--param", "a=1"}, "--param gives values to a run of an existing Task"},
		{[]string{"run", "x", "-f", "task.yaml"}, "give -f FILE (create a Task) or NAME (run an existing one), not both"},
	} {
		code, _, stderr := runCLI(t, append([]string{"-n", ns}, tc.args...)...)
		if code != ExitError {
			t.Errorf("%v: exit code %d, want %d", tc.args, code, ExitError)
		}
		assertContains(t, "stderr", stderr, tc.want)
	}
}

func TestResults(t *testing.T) {
	ns := newNamespace(t)
	key := finishedOneShot(t, ns, "report")
	setStatus(t, key, func(task *v1alpha1.Task) {
		task.Status.Results = map[string]string{"rows": "42", "url": "s3://bucket/a b"}
		task.Status.History[0].Results = task.Status.Results // as the operator writes it
		task.Status.History = append(task.Status.History, v1alpha1.RunRecord{RunID: "m0123456789", Result: v1alpha1.RunResultFailed,
			Results: map[string]string{"rows": "7"}})
	})
	code, stdout, stderr := runCLI(t, "-n", ns, "results", "report")
	if code != ExitOK {
		t.Fatalf("exit code %d\n%s", code, stderr)
	}
	if want := "rows\t42\nurl\t\"s3://bucket/a b\"\n"; stdout != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	code, stdout, _ = runCLI(t, "-n", ns, "results", "report", "--run", "m0123456789", "-o", "jsonpath={.results.rows}")
	if code != ExitOK || stdout != "7" {
		t.Errorf("--run: exit code %d, stdout %q; want 0 and 7", code, stdout)
	}
	code, _, stderr = runCLI(t, "-n", ns, "results", "report", "--run", "m999")
	if code == ExitOK {
		t.Error("an unknown run gave exit code 0")
	}
	assertContains(t, "stderr", stderr, "task/report has no run m999 in its history")
}
