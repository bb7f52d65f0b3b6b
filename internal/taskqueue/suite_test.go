package taskqueue_test

import (
	"os"
	"testing"

	"github.com/taskops/task-operator/internal/testutil/opsuite"
)

// The queue controller's envtests run in the operator's suite
// (internal/testutil/opsuite): both controllers, as cmd/manager wires
// them, since what a queue admits is what the Task controller starts.
func TestMain(m *testing.M) {
	os.Exit(opsuite.Run(m, nil))
}
