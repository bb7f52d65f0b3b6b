package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	cliv1alpha1 "github.com/taskops/task-operator/api/cli/v1alpha1"
	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/docgen"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

// The output contract (docs/kubectl-task.md, "Output") held to files: every
// verb that prints an object, in each format, against one fixed scene,
// with what went to stdout, what went to stderr and the exit code. A plain
// `go test` fails when a verb prints something else; `make docs`
// (UPDATE_DOCS=1) rewrites testdata/golden/ for a change that is meant.

// goldenNamespace is the scene's namespace: fixed, so the files name it.
const goldenNamespace = "golden"

// goldenToken is the token every verb that sets one gets.
const goldenToken = "golden-token"

// goldenNow is when the scene's runs ended.
var goldenNow = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// goldenFormats are the formats every verb is printed in; "" is the
// default (the table or the messages).
var goldenFormats = []string{"", "json", "yaml", "name", "wide"}

// goldenVerbs are the verbs that print an object, with the arguments that
// make each end at once against the scene (-n is added).
var goldenVerbs = []struct {
	name string
	args []string
}{
	{"run-file", []string{"run", "-f", "FILE"}},
	{"run-file-wait", []string{"run", "-f", "FILE", "--wait"}},
	{"run-name", []string{"run", "nightly", "--run-now-token", goldenToken}},
	{"run-name-wait", []string{"run", "nightly", "--run-now-token", goldenToken, "--wait"}},
	{"trigger-wait", []string{"trigger", "nightly", "--run-now-token", goldenToken, "--wait"}},
	{"wait", []string{"wait", "report"}},
	{"cancel", []string{"cancel", "nightly"}},
	{"cancel-wait", []string{"cancel", "nightly", "--wait"}},
	{"history", []string{"history", "nightly"}},
	{"results", []string{"results", "report"}},
	{"backfill-wait", []string{"backfill", "nightly", "--from", "2026-11-29T00:00:00Z", "--to", "2026-11-30T00:00:00Z", "--token", goldenToken, "--wait"}},
	{"suspend", []string{"suspend", "paused"}},
	{"resume", []string{"resume", "resumed"}},
	{"queue", []string{"queue"}},
	{"queue-name", []string{"queue", "team"}},
}

func TestOutputGolden(t *testing.T) {
	scene := newGoldenScene(t)
	for _, v := range goldenVerbs {
		for _, format := range goldenFormats {
			args := append([]string{"-n", goldenNamespace}, v.args...)
			name := v.name
			if format != "" {
				args = append(args, "-o", format)
				name += "." + format
			}
			for i, a := range args {
				if a == "FILE" {
					args[i] = scene.file(t, name)
				}
			}
			t.Run(name, func(t *testing.T) {
				code, stdout, stderr := runGolden(t, args)
				got := fmt.Sprintf("$ kubectl task %s\n--- exit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), code, stdout, stderr)
				got = strings.ReplaceAll(got, scene.dir, "DIR")
				docgen.Golden(t, filepath.Join("testdata", "golden", name+".txt"), normalize(got))
			})
		}
	}
}

// TestEveryRunVerbDecodesIntoTheDocumentedTypes: what the verbs about a run
// print with -o json decodes, strictly, into a TaskRunView (history: a List
// of them), and what the verbs about Tasks print into a Task.
func TestEveryRunVerbDecodesIntoTheDocumentedTypes(t *testing.T) {
	for _, v := range goldenVerbs {
		path := filepath.Join("testdata", "golden", v.name+".json.txt")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out := between(string(b), "--- stdout\n", "--- stderr\n")
		var kind metav1.TypeMeta
		if err := json.Unmarshal([]byte(out), &kind); err != nil {
			t.Errorf("%s: stdout is not one JSON object: %v", v.name, err)
			continue
		}
		var into any
		switch kind.GroupVersionKind() {
		case cliv1alpha1.GroupVersion.WithKind(cliv1alpha1.Kind):
			into = &cliv1alpha1.TaskRunView{}
		case v1alpha1.GroupVersion.WithKind("Task"):
			into = &v1alpha1.Task{}
		case v1alpha1.GroupVersion.WithKind("TaskQueue"):
			into = &v1alpha1.TaskQueue{}
		case cliv1alpha1.ListKind.GroupVersionKind():
			into = &cliv1alpha1.TaskRunViewList{}
			if v.name == "queue" {
				into = &v1alpha1.TaskQueueList{}
			}
		default:
			t.Errorf("%s prints a %s", v.name, kind.GroupVersionKind())
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(out), into); err != nil {
			t.Errorf("%s: does not decode into %T: %v", v.name, into, err)
		}
		runVerb := !strings.HasPrefix(v.name, "suspend") && !strings.HasPrefix(v.name, "resume") &&
			!strings.HasPrefix(v.name, "queue") && !strings.HasPrefix(v.name, "backfill") &&
			(strings.HasSuffix(v.name, "-wait") || v.name == "wait" || v.name == "results" || v.name == "history")
		_, isView := into.(*cliv1alpha1.TaskRunView)
		_, isViews := into.(*cliv1alpha1.TaskRunViewList)
		if runVerb != (isView || isViews) {
			t.Errorf("%s prints a %T: a verb about a run prints a TaskRunView (or a List), a verb about Tasks a Task", v.name, into)
		}
	}
}

// between is the part of s after from and before to.
func between(s, from, to string) string {
	_, s, _ = strings.Cut(s, from)
	s, _, _ = strings.Cut(s, to)
	return s
}

// runGolden runs the plugin with the scene's tokens. Its clock is the real
// one (--timeout counts from it); nothing it prints depends on it, since
// every run of the scene has finished.
func runGolden(t *testing.T, args []string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut syncBuffer
	a := &app{
		streams:     genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut},
		configFlags: genericclioptions.NewConfigFlags(true),
		now:         time.Now,
		newToken:    func() string { return goldenToken },
	}
	ctx, cancel := context.WithTimeout(suiteCtx, testutil.Timeout(testWait))
	defer cancel()
	code = a.run(ctx, append([]string{"--kubeconfig", kubeconfig}, args...))
	return code, out.String(), errOut.String()
}

// Server-set fields differ on every run; the files hold placeholders that
// still decode.
var (
	volatileIDs  = regexp.MustCompile(`("?(?:uid|resourceVersion)"?: )"?[^",\n]+"?`)
	volatileTime = regexp.MustCompile(`("?creationTimestamp"?: )"?[^",\n]+"?`)
)

// age is the AGE cell ending a row of the CRD's columns.
var age = regexp.MustCompile(`(?m)^(\S.*\s)\d+[smhd](?:\d+[smh])?$`)

// pickedUp is the progress line run -f --wait prints when it looks before
// the test, playing the operator, wrote the new Task's status: whether it
// does is a race the files do not hold.
var pickedUp = regexp.MustCompile(`(?m)^task/\S+: Pending \(waiting for the operator to pick up the Task\)\n`)

func normalize(s string) string {
	s = volatileIDs.ReplaceAllString(s, `${1}"X"`)
	s = volatileTime.ReplaceAllString(s, `${1}"2026-01-01T00:00:00Z"`)
	if head, rows, ok := strings.Cut(s, "AGE\n"); ok { // the CRD's columns end with the Task's age
		s = head + "AGE\n" + age.ReplaceAllString(rows, "${1}AGE")
	}
	return pickedUp.ReplaceAllString(s, "")
}

// goldenScene is the fixed state the verbs print: a one-shot Task report
// that succeeded, a cron Task nightly whose run-now run with goldenToken
// failed and whose cancel and backfill with it are done, Tasks paused and
// resumed for suspend and resume, and a TaskQueue team.
type goldenScene struct {
	dir string
}

func newGoldenScene(t *testing.T) *goldenScene {
	t.Helper()
	if err := k8s.Create(suiteCtx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: goldenNamespace}}); err != nil {
		t.Fatal(err)
	}
	at := func(m int) *metav1.Time { return &metav1.Time{Time: goldenNow.Add(time.Duration(m) * time.Minute)} }
	finished := func(task *v1alpha1.Task, ready metav1.ConditionStatus, reason v1alpha1.Reason, msg string) {
		failed := metav1.ConditionFalse
		if ready == metav1.ConditionFalse {
			failed = metav1.ConditionTrue
		}
		task.Status.Conditions = nil
		for _, c := range []metav1.Condition{
			{Type: v1alpha1.ConditionReady, Status: ready, Reason: string(reason), Message: msg},
			{Type: v1alpha1.ConditionFailed, Status: failed, Reason: string(reason), Message: msg},
		} {
			c.ObservedGeneration, c.LastTransitionTime = task.Generation, *at(-50)
			task.Status.Conditions = append(task.Status.Conditions, c)
		}
	}

	report := testutil.NewTask(goldenNamespace, "report")
	report.Spec.Params = []v1alpha1.ParamSpec{{Name: "date", Default: ptr.To("2026-11-30")}}
	createTask(t, report)
	setStatus(t, types.NamespacedName{Namespace: goldenNamespace, Name: "report"}, func(task *v1alpha1.Task) {
		task.Status.Phase, task.Status.Attempts, task.Status.CurrentRun = v1alpha1.PhaseSucceeded, 1, "0"
		task.Status.Results = map[string]string{"rows": "42"}
		task.Status.History = []v1alpha1.RunRecord{{RunID: "0", Attempts: 1, Result: v1alpha1.RunResultSucceeded, Reason: v1alpha1.ReasonSucceeded,
			StartTime: at(-60), CompletionTime: at(-59), Message: "succeeded on attempt 1",
			Params: map[string]string{"date": "2026-11-30"}, Results: task.Status.Results}}
		finished(task, metav1.ConditionTrue, v1alpha1.ReasonSucceeded, "run 0 succeeded")
	})

	nightly := testutil.NewTask(goldenNamespace, "nightly", testutil.MaxRetry(1))
	nightly.Spec.Schedule = ptr.To("0 2 * * *")
	createTask(t, nightly)
	failedID := runs.RunNowID(goldenToken)
	setStatus(t, types.NamespacedName{Namespace: goldenNamespace, Name: "nightly"}, func(task *v1alpha1.Task) {
		task.Status.Phase, task.Status.Attempts, task.Status.CurrentRun = v1alpha1.PhaseFailed, 2, failedID
		task.Status.LastCancelToken = runs.TokenHash(goldenToken)
		task.Status.LastRunNowToken = runs.TokenHash(goldenToken)
		msg := "RetriesExhausted: attempt 2/2 failed: exit code 3"
		task.Status.History = []v1alpha1.RunRecord{
			{RunID: failedID, Attempts: 2, Result: v1alpha1.RunResultFailed, Reason: v1alpha1.ReasonRetriesExhausted,
				StartTime: at(-30), CompletionTime: at(-25), Message: msg},
			{RunID: "s1764468000", ScheduledTime: at(-420), Attempts: 1, Result: v1alpha1.RunResultSucceeded, Reason: v1alpha1.ReasonSucceeded,
				StartTime: at(-420), CompletionTime: at(-419), Message: "succeeded on attempt 1"},
		}
		task.Status.Backfill = &v1alpha1.BackfillStatus{Token: goldenToken, State: v1alpha1.BackfillFinished, Total: 1, Started: 1, Finished: 1}
		finished(task, metav1.ConditionFalse, v1alpha1.ReasonRetriesExhausted, msg)
	})

	for _, name := range []string{"paused", "resumed"} {
		task := testutil.NewTask(goldenNamespace, name)
		task.Spec.Schedule = ptr.To("0 2 * * *")
		task.Spec.Suspend = ptr.To(name == "resumed")
		createTask(t, task)
	}

	q := &v1alpha1.TaskQueue{ObjectMeta: metav1.ObjectMeta{Namespace: goldenNamespace, Name: "team"}, Spec: v1alpha1.TaskQueueSpec{MaxRunning: 2}}
	if err := k8s.Create(suiteCtx, q); err != nil {
		t.Fatal(err)
	}
	return &goldenScene{dir: t.TempDir()}
}

// file writes a Task manifest for run -f, a new name for each format.
func (s *goldenScene) file(t *testing.T, name string) string {
	t.Helper()
	taskName := "ci-" + strings.NewReplacer(".", "-", "run-file-", "").Replace(name)
	p := filepath.Join(s.dir, taskName+".yaml")
	manifest := fmt.Sprintf("apiVersion: batch.taskops.io/v1alpha1\nkind: Task\nmetadata:\n  name: %s\nspec:\n  type: shell\n  shell: echo rows=42\n", taskName)
	if err := os.WriteFile(p, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(name, "run-file-wait") {
		// Play the operator: the Task, once created, succeeds.
		go s.succeedWhenCreated(taskName)
	}
	return p
}

// succeedWhenCreated writes a succeeded run 0 into the Task once it exists.
func (s *goldenScene) succeedWhenCreated(name string) {
	key := types.NamespacedName{Namespace: goldenNamespace, Name: name}
	deadline := time.Now().Add(testWait)
	for time.Now().Before(deadline) {
		task := &v1alpha1.Task{}
		if err := k8s.Get(suiteCtx, key, task); err == nil {
			start, end := metav1.NewTime(goldenNow.Add(-time.Minute)), metav1.NewTime(goldenNow)
			task.Status.ObservedGeneration = task.Generation
			task.Status.Phase, task.Status.Attempts, task.Status.CurrentRun = v1alpha1.PhaseSucceeded, 1, "0"
			task.Status.History = []v1alpha1.RunRecord{{RunID: "0", Attempts: 1, Result: v1alpha1.RunResultSucceeded, Reason: v1alpha1.ReasonSucceeded,
				StartTime: &start, CompletionTime: &end, Message: "succeeded on attempt 1"}}
			for _, c := range []metav1.Condition{
				{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: string(v1alpha1.ReasonSucceeded), Message: "run 0 succeeded"},
				{Type: v1alpha1.ConditionFailed, Status: metav1.ConditionFalse, Reason: string(v1alpha1.ReasonNotFailed)},
			} {
				c.ObservedGeneration, c.LastTransitionTime = task.Generation, end
				task.Status.Conditions = append(task.Status.Conditions, c)
			}
			if k8s.Status().Update(suiteCtx, task) == nil {
				return
			}
		}
		time.Sleep(20 * time.Millisecond) // a poll interval: the loop ends on the condition or the deadline
	}
}

// TestVerbsThatPrintTextTakeNoOutputFlag: logs (the pods' output), version
// and completion print text, as kubectl logs and kubectl completion do;
// -o is a usage error there, not silently ignored.
func TestVerbsThatPrintTextTakeNoOutputFlag(t *testing.T) {
	for _, args := range [][]string{{"logs", "report"}, {"version", "--client"}, {"completion", "bash"}} {
		code, _, stderr := runCLI(t, append(args, "-o", "json")...)
		if code != ExitError || !strings.Contains(stderr, "unknown shorthand flag: 'o'") {
			t.Errorf("%v -o json: exit %d, stderr %q; want 3 and the unknown flag", args, code, stderr)
		}
	}
}
