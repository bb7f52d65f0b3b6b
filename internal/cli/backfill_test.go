package cli

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// backfill --wait writes the token and the range in one patch and waits
// for that request to end.
func TestBackfillWaitsForItsRequest(t *testing.T) {
	ns := newNamespace(t)
	task := shellTask(ns, "nightly", 0)
	task.Spec.Schedule = ptr.To("0 2 * * *")
	createTask(t, task)
	key := types.NamespacedName{Namespace: ns, Name: "nightly"}
	inv := start(t, "-n", ns, "backfill", "nightly", "--from", "2026-11-23T00:00:00Z", "--to", "2026-11-30T00:00:00Z", "--token", "outage-1", "--wait", "--timeout", "30s")
	eventually(t, "the backfill annotations", func() bool {
		a := getTask(t, key).Annotations
		return a[v1alpha1.AnnotationBackfill] == "outage-1" && a[v1alpha1.AnnotationBackfillRange] == "2026-11-23T00:00:00Z/2026-11-30T00:00:00Z"
	})
	setStatus(t, key, func(x *v1alpha1.Task) {
		x.Status.Backfill = &v1alpha1.BackfillStatus{Token: "outage-1", State: v1alpha1.BackfillRunning, Total: 7, Started: 2, Finished: 1}
	})
	inv.waitOutput(t, inv.stderr, `Running (backfill "outage-1": 2 started, 1 finished of 7)`)
	setStatus(t, key, func(x *v1alpha1.Task) {
		x.Status.Backfill = &v1alpha1.BackfillStatus{Token: "outage-1", State: v1alpha1.BackfillFinished, Total: 7, Started: 7, Finished: 7}
	})
	inv.exits(t, ExitOK, inv.stdout, `task/nightly: backfill "outage-1" Finished: 7 of 7 slot(s) finished`)

	code, _, stderr := runCLI(t, "-n", ns, "backfill", "nightly", "--from", "yesterday", "--to", "2026-11-30T00:00:00Z")
	if code != ExitError {
		t.Errorf("a bad --from: exit code %d", code)
	}
	assertContains(t, "stderr", stderr, "--from and --to must be RFC 3339 times")
}
