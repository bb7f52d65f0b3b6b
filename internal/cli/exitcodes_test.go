package cli

import (
	"testing"
)

// TestEveryVerbExits3OnAMissingObjectOrAUsageError: the exit codes the
// plugin documents (3: usage or any other error) hold for every verb that
// takes a name: a name that does not exist, and no name at all.
func TestEveryVerbExits3OnAMissingObjectOrAUsageError(t *testing.T) {
	ns := newNamespace(t)
	for _, verb := range [][]string{
		{"wait"}, {"trigger"}, {"run"}, {"cancel"}, {"logs"}, {"history"}, {"results"},
		{"backfill", "--from", "2026-11-23T00:00:00Z", "--to", "2026-11-24T00:00:00Z"},
		{"queue"}, {"suspend"}, {"resume"},
	} {
		args := append([]string{"-n", ns, verb[0], "missing"}, verb[1:]...)
		code, _, stderr := runCLI(t, args...)
		if code != ExitError {
			t.Errorf("kubectl task %v: exit %d, want %d\nstderr: %s", args[2:], code, ExitError, stderr)
		}
		assertContains(t, "stderr of "+verb[0], stderr, `"missing" not found in namespace "`+ns+`"`)

		if verb[0] == "run" || verb[0] == "queue" {
			continue // run without a name wants -f; queue lists the queues
		}
		code, _, stderr = runCLI(t, "-n", ns, verb[0])
		if code != ExitError {
			t.Errorf("kubectl task %s without a name: exit %d, want %d\nstderr: %s", verb[0], code, ExitError, stderr)
		}
		name := verb[0]
		if name == "trigger" {
			name = "run" // trigger is run's other name
		}
		assertContains(t, "stderr of "+verb[0]+" without a name", stderr, "See 'kubectl task "+name+" --help' for usage.")
	}
}
