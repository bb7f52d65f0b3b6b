package cli

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

func TestChainPrintsWhatATaskRunsAfterAndWhatRunsAfterIt(t *testing.T) {
	after := func(names ...string) testutil.TaskOpt {
		return func(t *v1alpha1.Task) {
			for _, n := range names {
				t.Spec.After = append(t.Spec.After, v1alpha1.TaskAfter{Task: n})
			}
		}
	}
	ns, etl, _ := newShellTask(t, "etl", 0)
	createTask(t, testutil.NewTask(ns, "report", after("etl", "gone")))
	createTask(t, testutil.NewTask(ns, "publish", after("report")))
	done := &metav1.Time{Time: time.Now().Add(-2 * time.Hour)}
	setStatus(t, etl, func(task *v1alpha1.Task) {
		task.Status.History = []v1alpha1.RunRecord{{RunID: "0", Attempts: 1, Result: v1alpha1.RunResultSucceeded, StartTime: done, CompletionTime: done}}
	})
	setStatus(t, types.NamespacedName{Namespace: ns, Name: "report"}, func(task *v1alpha1.Task) {
		task.Status.History = []v1alpha1.RunRecord{{RunID: "a0123456789", Attempts: 1, Result: v1alpha1.RunResultRunning, StartTime: done,
			Trigger: []v1alpha1.TriggerRef{{Task: "etl", RunID: "0"}}}}
	})

	code, stdout, stderr := runCLI(t, "-n", ns, "chain", "report")
	if code != ExitOK {
		t.Fatalf("exit code %d\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	want := []string{
		"runs after:",
		"  etl run 0: Succeeded, finished 2h0m0s ago",
		"  gone missing: no such Task in this namespace",
		"report run a0123456789: Running (after etl run 0)",
		"runs before:",
		"  publish no run yet",
	}
	if len(lines) != len(want) {
		t.Fatalf("got:\n%s\nwant %d lines", stdout, len(want))
	}
	for i, w := range want {
		// tabwriter pads the columns: compare words.
		if got := strings.Join(strings.Fields(lines[i]), " "); got != strings.Join(strings.Fields(w), " ") || !strings.HasPrefix(lines[i], w[:strings.Index(w, strings.TrimSpace(w))]) {
			t.Errorf("line %d: %q, want %q", i, lines[i], w)
		}
	}
	// history shows which upstream runs started the chained runs.
	code, stdout, _ = runCLI(t, "-n", ns, "history", "report")
	if code != ExitOK || !strings.Contains(strings.Split(stdout, "\n")[0], "TRIGGER") || !strings.Contains(stdout, "etl/0") {
		t.Errorf("history of a chained Task, exit code %d:\n%s", code, stdout)
	}
}
