package gitops

import (
	"testing"

	"github.com/taskops/task-operator/internal/testutil"
)

// A Task the operator has not seen yet is Progressing, not Healthy (what
// Argo CD says of a kind without a check); the e2e suite checks real
// objects in every state (test/e2e/gitops_test.go).
func TestAnUnseenTaskIsProgressing(t *testing.T) {
	for _, script := range []string{"health-task.lua", "health-taskqueue.lua"} {
		h, err := Check(testutil.RepoRoot(), script, map[string]any{"metadata": map[string]any{"name": "x", "generation": 1.0}})
		if err != nil {
			t.Fatal(err)
		}
		if h.Status != "Progressing" {
			t.Errorf("%s: a new object is %s, want Progressing", script, h.Status)
		}
	}
}
