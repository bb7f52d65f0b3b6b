//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

// "Run the report after the ETL" on the real node: the ETL's shell writes
// its result rows; the report, which names the ETL in spec.after, starts
// when the ETL's run succeeds, gets rows as its param and prints it; CI
// waits for that run with kubectl wait on status.lastFinishedTrigger, as
// docs/chains.md shows.
func TestTheReportRunsAfterTheETLWithItsResultOnARealPod(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-chain")
	etl := testutil.NewTask(ns, "etl")
	etl.Spec.Results = []v1alpha1.ResultSpec{{Name: "rows"}}
	etl.Spec.Shell = `echo "loading"; printf '%s' 1234 >"$TASK_RESULTS_DIR/rows"`
	report := testutil.NewTask(ns, "report")
	report.Spec.Params = []v1alpha1.ParamSpec{{Name: "rows"}}
	report.Spec.After = []v1alpha1.TaskAfter{{Task: "etl", Params: []v1alpha1.AfterParam{{Name: "rows", FromResult: "rows"}}}}
	report.Spec.Shell = `echo "report over $TASK_PARAM_ROWS rows"`
	create(t, report) // first: it waits, and runs only after the ETL
	create(t, etl)

	kubectlWait(t, ns, "jsonpath={.status.lastFinishedTrigger.trigger[0].runID}="+runs.OneShot, "task/report", 2*time.Minute)
	got := mustGetTask(t, ns, "report")
	want := runs.ChainID([]v1alpha1.TriggerRef{{Task: "etl", RunID: runs.OneShot}})
	if f := got.Status.LastFinishedTrigger; f == nil || f.RunID != want || f.Result != v1alpha1.RunResultSucceeded {
		t.Fatalf("lastFinishedTrigger %+v, want run %s Succeeded", f, want)
	}
	if h := got.Status.History[0]; h.Params["rows"] != "1234" {
		t.Errorf("the report's run has params %v, want rows=1234", h.Params)
	}
	logs := kubectlTask(t, time.Minute, "logs", "report", "-n", ns)
	if !strings.Contains(logs, "report over 1234 rows") {
		t.Errorf("the report's pod printed %q, want the ETL's result in it", logs)
	}
	chain := kubectlTask(t, 30*time.Second, "chain", "report", "-n", ns)
	if !strings.Contains(chain, "etl") || !strings.Contains(chain, "(after etl run 0)") {
		t.Errorf("kubectl task chain report:\n%s", chain)
	}
	if n := len(jobsOfTask(t, ns, "report")); n != 1 {
		t.Errorf("the report has %d Jobs after one ETL run, want 1", n)
	}
}
