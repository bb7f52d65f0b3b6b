package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

// completions are the candidates of cobra's __complete output (its last
// line is the directive), without their descriptions.
func completions(out string) []string {
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" || strings.HasPrefix(l, ":") {
			continue
		}
		name, _, _ := strings.Cut(l, "\t")
		got = append(got, name)
	}
	return got
}

func TestCompletionOfTaskNamesQueuesAndRuns(t *testing.T) {
	ns := newNamespace(t)
	createTask(t, shellTask(ns, "build", 0))
	createTask(t, shellTask(ns, "backup", 0))
	createTask(t, shellTask(ns, "etl", 0))
	for _, q := range []string{"team", "other"} {
		if err := k8s.Create(suiteCtx, testutil.NewTaskQueue(ns, q, 1)); err != nil {
			t.Fatal(err)
		}
	}
	setStatus(t, types.NamespacedName{Namespace: ns, Name: "etl"}, func(task *v1alpha1.Task) {
		task.Status.History = []v1alpha1.RunRecord{
			{RunID: "m0123456789", Attempts: 1, Result: v1alpha1.RunResultFailed},
			{RunID: "0", Attempts: 1, Result: v1alpha1.RunResultSucceeded},
		}
	})

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"wait", ""}, []string{"backup", "build", "etl"}},
		{[]string{"cancel", "b"}, []string{"backup", "build"}},
		{[]string{"logs", "etl", "--run", ""}, []string{"m0123456789", "0"}},
		{[]string{"results", "etl", "--run", "m"}, []string{"m0123456789"}},
		{[]string{"queue", "t"}, []string{"team"}},
		{[]string{"wait", "etl", ""}, nil}, // one name only
	} {
		code, stdout, stderr := runCLI(t, append([]string{"__complete", "-n", ns}, tc.args...)...)
		if got := completions(stdout); code != ExitOK || !slices.Equal(got, tc.want) {
			t.Errorf("kubectl task __complete %v: exit %d, completions %q, want %q\nstderr: %s", tc.args, code, got, tc.want, stderr)
		}
	}
}

// TestKubectlCompletesThePlugin drives kubectl's own completion, as a
// shell does for `kubectl task <TAB>`: kubectl finds kubectl_complete-task
// on PATH (the script the release ships beside the plugin) and runs it,
// which runs the plugin's __complete.
func TestKubectlCompletesThePlugin(t *testing.T) {
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "kubectl-task"), "../../cmd/kubectl-task")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}
	script, err := os.ReadFile("../../cmd/kubectl-task/kubectl_complete-task")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kubectl_complete-task"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	assets, err := exec.Command("../../hack/k8s-binaries.sh", "kubectl").Output()
	if err != nil {
		t.Fatalf("hack/k8s-binaries.sh kubectl: %v", err)
	}
	kubectl := filepath.Join(strings.TrimSpace(string(assets)), "kubectl")

	ns := newNamespace(t)
	createTask(t, shellTask(ns, "nightly", 0))
	createTask(t, shellTask(ns, "nightly-report", 0))
	complete := func(args ...string) []string {
		t.Helper()
		cmd := exec.Command(kubectl, append([]string{"__complete", "task"}, args...)...)
		cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kubectl __complete task %v: %v", args, err)
		}
		return completions(string(out))
	}
	verbs := complete("")
	for _, v := range []string{"run", "wait", "cancel", "logs", "history", "results", "backfill", "queue", "suspend", "resume", "version", "completion"} {
		if !slices.Contains(verbs, v) {
			t.Errorf("kubectl __complete task '': %q missing from %q", v, verbs)
		}
	}
	if got := complete("history", "-n", ns, "night"); !slices.Equal(got, []string{"nightly", "nightly-report"}) {
		t.Errorf("kubectl __complete task history -n NS night: %q, want the two Tasks", got)
	}
}
