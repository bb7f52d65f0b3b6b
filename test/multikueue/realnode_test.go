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
	for _, tc := range outcomes {
		create(t, env.c, shellTask(ns, tc.name, tc.code, remote))
		create(t, env.c, shellTask(local, tc.name, tc.code))
	}
	for _, tc := range outcomes {
		r := waitTask(t, ns, tc.name, string(tc.want)+" on worker-1's real node", 3*time.Minute, phase(tc.want))
		sameRecords(t, tc, r, waitTask(t, local, tc.name, string(tc.want)+" on the manager's real node", 3*time.Minute, phase(tc.want)))
		if rec := r.Status.AttemptRecords[0]; tc.code != 0 && !strings.Contains(rec.Message, "exited with code 3") {
			t.Errorf("%s: message %q; want the pod's exit code", tc.name, rec.Message)
		}
	}
}
