//go:build multikueue

package multikueue

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

// A real container on a worker: a shell Task with a param and a result,
// run on worker-1's real node through MultiKueue (worker-1 has the
// operator's reader) and on the manager's own real node, has the same
// record: one whose shell prints and exits 3, one that writes its result
// and succeeds. Exit codes, output and results come from the shell, not
// from annotations.
func TestAShellTaskOnAWorkersRealNodeHasTheRecordOfTheSameTaskRunLocally(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "mk-real")
	local := newNamespace(t, "mk-real-local")
	queues(t, ns, 4, 2, 0) // worker-2 has no room (nor a real node): worker-1
	bindReader(t, workerNamed(t, "worker-1"), ns)
	shellTask := func(ns, name string, code int, opts ...testutil.TaskOpt) *v1alpha1.Task {
		task := testutil.NewTask(ns, name, append([]testutil.TaskOpt{onNode(realNode), testutil.StartTimeout(120), testutil.Requests("cpu", "100m")}, opts...)...)
		task.Spec.Params = []v1alpha1.ParamSpec{{Name: "rows", Default: ptr.To("1234")}}
		task.Spec.Results = []v1alpha1.ResultSpec{{Name: "rows"}}
		task.Spec.Shell = fmt.Sprintf(`echo "loading $TASK_PARAM_ROWS rows"; printf '%%s' "$TASK_PARAM_ROWS" >"$TASK_RESULTS_DIR/rows"; exit %d`, code)
		return task
	}
	cases := []struct {
		name string
		code int
		want v1alpha1.TaskPhase
	}{{"fails", 3, v1alpha1.PhaseFailed}, {"succeeds", 0, v1alpha1.PhaseSucceeded}}
	for _, tc := range cases {
		create(t, env.c, shellTask(ns, tc.name, tc.code, remote))
		create(t, env.c, shellTask(local, tc.name, tc.code))
	}
	for _, tc := range cases {
		r := waitTask(t, ns, tc.name, string(tc.want)+" on worker-1's real node", 3*time.Minute, phase(tc.want))
		l := waitTask(t, local, tc.name, string(tc.want)+" on the manager's real node", 3*time.Minute, phase(tc.want))
		rr, lr := r.Status.AttemptRecords[0], l.Status.AttemptRecords[0]
		t.Logf("%s: on %s: exitCode %d results %v message %q lastError %q; locally: exitCode %d results %v message %q lastError %q",
			tc.name, rr.Cluster, ptr.Deref(rr.ExitCode, -1), rr.Results, rr.Message, r.Status.LastError,
			ptr.Deref(lr.ExitCode, -1), lr.Results, lr.Message, l.Status.LastError)
		if rr.Cluster != "worker-1" {
			t.Fatalf("%s ran on %q; want worker-1", tc.name, rr.Cluster)
		}
		if ptr.Deref(rr.ExitCode, -1) != int32(tc.code) || ptr.Deref(lr.ExitCode, -1) != int32(tc.code) {
			t.Errorf("%s: exit code %d on the worker, %d locally; want %d", tc.name, ptr.Deref(rr.ExitCode, -1), ptr.Deref(lr.ExitCode, -1), tc.code)
		}
		if rr.Results["rows"] != "1234" || fmt.Sprint(rr.Results) != fmt.Sprint(lr.Results) {
			t.Errorf("%s: results %v on the worker, %v locally; want rows=1234 in both", tc.name, rr.Results, lr.Results)
		}
		if same(withoutWorker(rr.Message)) != same(lr.Message) || !strings.HasSuffix(rr.Message, "ran on worker cluster worker-1") {
			t.Errorf("%s: message %q on the worker, %q locally; want the same, and the worker named", tc.name, rr.Message, lr.Message)
		}
		if same(withoutWorker(r.Status.LastError)) != same(l.Status.LastError) {
			t.Errorf("%s: lastError %q on the worker, %q locally; want the same", tc.name, r.Status.LastError, l.Status.LastError)
		}
		if tc.code != 0 && !strings.Contains(rr.Message, "exited with code 3") {
			t.Errorf("%s: message %q; want the pod's exit code", tc.name, rr.Message)
		}
		if tc.code == 0 && (r.Status.Results["rows"] != "1234" || fmt.Sprint(r.Status.Results) != fmt.Sprint(l.Status.Results)) {
			t.Errorf("status.results %v on the worker, %v locally", r.Status.Results, l.Status.Results)
		}
	}
}

// withoutWorker is a remote record's message without the worker's name at
// its end.
func withoutWorker(msg string) string {
	return strings.TrimSuffix(strings.TrimSuffix(msg, "ran on worker cluster worker-1"), "; ")
}
