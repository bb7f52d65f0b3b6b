package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
)

func TestHistory(t *testing.T) {
	ns, key, _ := newShellTask(t, "etl", 2)

	code, stdout, stderr := runCLI(t, "-n", ns, "history", "etl")
	if code != ExitOK || stdout != "" {
		t.Fatalf("empty history: exit code %d, stdout %q", code, stdout)
	}
	assertContains(t, "stderr", stderr, "No runs recorded for task/etl yet.")

	at := func(s string) *metav1.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &metav1.Time{Time: tm}
	}
	long := "RetriesExhausted: PodFailed: exit code 1: " + strings.Repeat("x", 100)
	setStatus(t, key, func(task *v1alpha1.Task) {
		task.Status.History = []v1alpha1.RunRecord{
			{RunID: "mabcdef0123", Attempts: 1, Result: v1alpha1.RunResultRunning, StartTime: &metav1.Time{Time: time.Now().Add(-90 * time.Second)},
				Message: ""},
			{RunID: "m0123456789", Attempts: 3, Result: v1alpha1.RunResultFailed,
				StartTime: at("2026-03-01T10:00:00Z"), CompletionTime: at("2026-03-01T10:03:04Z"), Message: long},
			{RunID: "0", Attempts: 1, Result: v1alpha1.RunResultSucceeded,
				StartTime: at("2026-03-01T09:00:00Z"), CompletionTime: at("2026-03-01T09:00:12Z"),
				Message: "succeeded on attempt 1:\nall good"},
		}
	})
	code, stdout, stderr = runCLI(t, "-n", ns, "history", "etl")
	if code != ExitOK {
		t.Fatalf("exit code %d\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimRight(stdout, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header and 3 rows, got:\n%s", stdout)
	}
	fields := func(i int) []string { return strings.Fields(lines[i]) }
	if got := strings.Join(fields(0), " "); got != "RUN RESULT ATTEMPTS STARTED FINISHED DURATION MESSAGE" {
		t.Errorf("header %q", got)
	}
	if f := fields(1); f[0] != "mabcdef0123" || f[1] != "Running" || f[4] != "-" || !strings.HasPrefix(f[5], "1m3") || f[6] != "-" {
		t.Errorf("running row %q", lines[1])
	}
	wantMsg := truncate(long, messageWidth)
	if !strings.HasSuffix(lines[2], wantMsg) || !strings.HasSuffix(wantMsg, "...") {
		t.Errorf("failed row %q: want the message cut to %q", lines[2], wantMsg)
	}
	if f := fields(2); strings.Join(f[:6], " ") != "m0123456789 Failed 3 2026-03-01T10:00:00Z 2026-03-01T10:03:04Z 3m4s" {
		t.Errorf("failed row %q", lines[2])
	}
	if f := fields(3); strings.Join(f, " ") != "0 Succeeded 1 2026-03-01T09:00:00Z 2026-03-01T09:00:12Z 12s succeeded on attempt 1: all good" {
		t.Errorf("succeeded row %q", lines[3])
	}

	code, stdout, _ = runCLI(t, "-n", ns, "history", "etl", "--no-trunc")
	if code != ExitOK || !strings.Contains(stdout, long) {
		t.Errorf("--no-trunc: exit code %d, the full message is missing:\n%s", code, stdout)
	}
}

func TestPrintHistoryColumnsAlign(t *testing.T) {
	var b bytes.Buffer
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	start := metav1.NewTime(now.Add(-2 * time.Hour))
	task := &v1alpha1.Task{}
	task.Status.History = []v1alpha1.RunRecord{
		{RunID: "s1767225600", Result: v1alpha1.RunResultStopped, Attempts: 1, StartTime: &start, Message: "replaced by run s1767229200"},
		{RunID: "0", Result: v1alpha1.RunResultSucceeded, Attempts: 10},
	}
	err := printRunTable(&b, historyViews(task), now, tableOptions{header: true})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	col := strings.Index(lines[0], "RESULT")
	for _, l := range lines[1:3] {
		if len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("RESULT column not aligned at %d:\n%s", col, b.String())
		}
	}
	assertContains(t, "table", b.String(), "2h0m0s", "replaced by run s1767229200")
}

// TestHistoryWatch: --watch prints the runs, then a row for each run that
// starts or changes, until interrupted (exit 0).
func TestHistoryWatch(t *testing.T) {
	ns, key, _ := newShellTask(t, "nightly", 0)
	setStatus(t, key, func(task *v1alpha1.Task) {
		task.Status.History = []v1alpha1.RunRecord{{RunID: "s100", Attempts: 1, Result: v1alpha1.RunResultSucceeded}}
	})
	inv := start(t, "-n", ns, "history", "nightly", "--watch")
	inv.waitOutput(t, inv.stdout, "s100")
	setStatus(t, key, func(task *v1alpha1.Task) {
		task.Status.History = append([]v1alpha1.RunRecord{{RunID: "s200", Attempts: 1, Result: v1alpha1.RunResultRunning}}, task.Status.History...)
	})
	inv.waitOutput(t, inv.stdout, "s200")
	setStatus(t, key, func(task *v1alpha1.Task) {
		task.Status.History[0].Result = v1alpha1.RunResultFailed
		task.Status.History[0].Attempts = 2
	})
	inv.waitOutput(t, inv.stdout, "Failed")
	inv.interrupt()
	if code := inv.wait(t); code != ExitOK {
		t.Errorf("exit code %d after the interrupt, want 0", code)
	}
	out := inv.stdout.String()
	if strings.Count(out, "RUN ") != 1 || strings.Count(out, "s100") != 1 || strings.Count(out, "s200") != 2 {
		t.Errorf("want the header once, s100 once and s200 twice (started, failed):\n%s", out)
	}
}
