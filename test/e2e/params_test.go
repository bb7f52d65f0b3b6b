//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

// pluginStdout runs the plugin and returns its stdout alone (the -o
// output) and its exit code; stderr goes to the test log.
func pluginStdout(t *testing.T, timeout time.Duration, args ...string) (string, int) {
	t.Helper()
	code, stdout, stderr := plugin(t, timeout, args...)
	t.Logf("kubectl task %s:\n%s", strings.Join(args, " "), stderr)
	return stdout, code
}

// A shell Task with a param and results, re-run through the plugin with
// different values: each run gets its own values in the pod's environment
// (never as shell text), hands back what its script wrote, and keeps it in
// its history entry; a failing attempt's results are kept; an unknown
// param fails the run without a Job.
func TestParamsInResultsOutOnARealPod(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-params")
	task := testutil.NewTask(ns, "report", testutil.Retries(1, 1, 1, 1))
	task.Spec.Params = []v1alpha1.ParamSpec{{Name: "date", Default: ptr.To("yesterday")}, {Name: "fail", Default: ptr.To("no")}}
	task.Spec.Results = []v1alpha1.ResultSpec{{Name: "rows"}, {Name: "echo"}}
	// The script counts the characters of the date as its "rows", echoes
	// the value back byte for byte, and fails (exit 3) when asked to,
	// after writing its results.
	task.Spec.Shell = `printf '%s' "$TASK_PARAM_DATE" >"$TASK_RESULTS_DIR/echo"
printf '%s' "${#TASK_PARAM_DATE}" >"$TASK_RESULTS_DIR/rows"
[ "$TASK_PARAM_FAIL" = yes ] && exit 3
exit 0`
	create(t, task)
	kubectlWait(t, ns, "condition=Ready", "task/report", 90*time.Second)
	if got := mustGetTask(t, ns, "report").Status.Results["echo"]; got != "yesterday" {
		t.Fatalf("run 0's echo result %q, want the default", got)
	}

	out, code := pluginStdout(t, 2*time.Minute, "run", "report", "-n", ns, "--param", "date=2026-11-30", "--wait", "-o", "jsonpath={.results.rows}")
	if code != 0 || out != "10" {
		t.Fatalf("run --param date=2026-11-30 --wait -o jsonpath: exit %d, stdout %q; want 0 and 10", code, out)
	}
	hostile := "$(touch /tmp/pwned) \"q\" 'q' `id`; echo x\nsecond line " + strings.Repeat("ø", 300)
	out, code = pluginStdout(t, 2*time.Minute, "run", "report", "-n", ns, "--param", "date="+hostile, "--wait", "-o", "jsonpath={.results.echo}")
	if code != 0 || out != hostile {
		t.Fatalf("the hostile value came back as %q (exit %d), want it verbatim", out, code)
	}

	got := mustGetTask(t, ns, "report")
	if len(got.Status.History) < 3 {
		t.Fatalf("history %+v, want three runs", got.Status.History)
	}
	for i, want := range []string{hostile, "2026-11-30", "yesterday"} {
		h := got.Status.History[i]
		if h.Params["date"] != want || h.Results["echo"] != want {
			t.Errorf("history[%d] (run %s): params %v results %v; want date and echo %q", i, h.RunID, h.Params, h.Results, want)
		}
	}

	// A failing run keeps what its attempts wrote, the retry included.
	_, code = pluginStdout(t, 2*time.Minute, "run", "report", "-n", ns, "--param", "fail=yes", "--param", "date=half", "--wait")
	if code != 1 {
		t.Fatalf("a failing run: exit code %d, want 1", code)
	}
	failed := mustGetTask(t, ns, "report")
	if h := failed.Status.History[0]; h.Result != v1alpha1.RunResultFailed || h.Results["echo"] != "half" {
		t.Errorf("the failed run's entry %+v, want its results kept", h)
	}
	for _, a := range failed.Status.AttemptRecords {
		if a.Results["rows"] != "4" {
			t.Errorf("attempt %d's record has results %v, want rows=4", a.Attempt, a.Results)
		}
	}

	// An unknown param: the run fails at once, without a Job.
	jobsBefore := len(jobsOfTask(t, ns, "report"))
	_, code = pluginStdout(t, time.Minute, "trigger", "report", "-n", ns, "--param", "dat=typo", "--run-now-token", "typo-1", "--wait")
	if code != 1 {
		t.Fatalf("a run with an unknown param: exit code %d, want 1", code)
	}
	typo := mustGetTask(t, ns, "report")
	if h := typo.Status.History[0]; h.RunID != runs.RunNowID("typo-1") || h.Reason != v1alpha1.ReasonInvalidParams {
		t.Errorf("history[0] %+v, want run %s failed InvalidParams", h, runs.RunNowID("typo-1"))
	}
	if n := len(jobsOfTask(t, ns, "report")); n != jobsBefore {
		t.Errorf("%d Jobs after the invalid run, %d before: it made one", n, jobsBefore)
	}
	res := kubectlTask(t, 30*time.Second, "results", "report", "-n", ns, "--run", failed.Status.History[0].RunID)
	if !strings.Contains(res, "echo\thalf") {
		t.Errorf("kubectl task results --run: %q", res)
	}
}

// An http Task's param lands percent-encoded in its URL; its results come
// from a field of the JSON response and a header.
func TestHTTPParamsAndResultsOnARealPod(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-http-params")
	l := listenOnBridge(t)
	var mu sync.Mutex
	var gotPath, gotQuery string
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		gotPath, gotQuery = r.URL.EscapedPath(), r.URL.RawQuery
		mu.Unlock()
		w.Header().Set("ETag", `"rev-7"`)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"report":{"id":"r-%s"},"rows":12}`, r.URL.Query().Get("region"))
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	task := testutil.NewTask(ns, "call")
	task.Spec.Type, task.Spec.Shell = v1alpha1.TaskTypeHTTP, ""
	task.Spec.URL = "http://" + l.Addr().String() + "/reports/$(params.region)?region=$(params.region)"
	task.Spec.Params = []v1alpha1.ParamSpec{{Name: "region", Default: ptr.To("eu")}}
	task.Spec.Results = []v1alpha1.ResultSpec{{Name: "id"}, {Name: "etag"}, {Name: "code"}}
	task.Spec.HTTP = &v1alpha1.HTTPSpec{Results: []v1alpha1.HTTPResult{
		{Name: "id", From: "jsonPath:{.report.id}"}, {Name: "etag", From: "header:ETag"}, {Name: "code", From: "statusCode"}}}
	create(t, task)
	kubectlWait(t, ns, "condition=Ready", "task/call", 90*time.Second)

	out, code := pluginStdout(t, 2*time.Minute, "run", "call", "-n", ns, "--param", "region=us west/2&x=1", "--wait", "-o", "json")
	if code != 0 {
		t.Fatalf("exit code %d:\n%s", code, out)
	}
	got := mustGetTask(t, ns, "call")
	want := map[string]string{"id": "r-us west/2&x=1", "etag": `"rev-7"`, "code": "200"}
	if d := cmp.Diff(want, got.Status.Results); d != "" {
		t.Errorf("status.results (-want +got):\n%s", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if gotPath != "/reports/us%20west%2F2%26x%3D1" || gotQuery != "region=us%20west%2F2%26x%3D1" {
		t.Errorf("the server got path %q query %q; want the value percent-encoded in both", gotPath, gotQuery)
	}
	if !strings.Contains(out, `"id": "r-us west/2\u0026x=1"`) && !strings.Contains(out, `"id": "r-us west/2&x=1"`) {
		t.Errorf("-o json of the run does not hold its results:\n%s", out)
	}
}

// jobsOfTask are the attempt Jobs of a Task (notification Jobs apart).
func jobsOfTask(t *testing.T, ns, name string) []batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	must(t, env.c.List(ctxFor(t, 20*time.Second), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelTask: name}, client.HasLabels{v1alpha1.LabelAttempt}))
	return list.Items
}
