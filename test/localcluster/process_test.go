package localcluster

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// A component that execs on its way (the kubelet: unshare, sh, then the
// kubelet) is running all along: each exec shows an empty command line
// for a moment, and pidOf must not take that for an exit.
func TestAComponentThatExecsOnItsWayIsNotTakenForGone(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"logs", "pids"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := &Cluster{Dir: dir, Log: io.Discard}
	// 100 execs in a row, each naming a file under the cluster's folder,
	// then a second's sleep; the test watches the whole chain.
	script := `n=$1; if [ "$n" -gt 0 ]; then exec sh -c "$0" "$0" $((n-1)) "$2"; fi; exec sh -c 'sleep 1; :' "$2"`
	if err := c.start("execs", nil, "sh", "-c", script, script, "100", filepath.Join(dir, "marker")); err != nil {
		t.Fatal(err)
	}
	pid := c.pidOf("execs")
	if pid == 0 {
		t.Fatal("the component is not running right after its start")
	}
	t.Cleanup(func() { c.stop("execs") })
	for alive(pid) {
		if got := c.pidOf("execs"); got == 0 && alive(pid) {
			t.Fatalf("pid %d taken for gone while it was exec'ing (command line %q)", pid, cmdline(pid))
		}
	}
	if got := c.pidOf("execs"); got != 0 {
		t.Fatalf("pidOf is %d after the component exited", got)
	}
}
