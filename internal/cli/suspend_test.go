package cli

import (
	"testing"

	"k8s.io/utils/ptr"
)

func TestSuspendAndResume(t *testing.T) {
	ns, key, _ := newShellTask(t, "nightly", 0)

	steps := []struct {
		verb, out string
		want      bool
	}{
		{"suspend", "task/nightly suspended\n", true},
		{"suspend", "task/nightly already suspended\n", true},
		{"resume", "task/nightly resumed\n", false},
		{"resume", "task/nightly already resumed\n", false},
	}
	for _, s := range steps {
		before := getTask(t, key).ResourceVersion
		code, stdout, stderr := runCLI(t, "-n", ns, s.verb, "nightly")
		task := getTask(t, key)
		if code != ExitOK || stdout != s.out || ptr.Deref(task.Spec.Suspend, false) != s.want {
			t.Fatalf("%s: exit %d, stdout %q (want %q), spec.suspend %t (want %t)\nstderr: %s", s.verb, code, stdout, s.out, ptr.Deref(task.Spec.Suspend, false), s.want, stderr)
		}
		if wrote := task.ResourceVersion != before; wrote != (s.out != "task/nightly already suspended\n" && s.out != "task/nightly already resumed\n") {
			t.Errorf("%s: wrote the Task: %t", s.verb, wrote)
		}
	}

	code, _, stderr := runCLI(t, "-n", ns, "suspend", "missing")
	if code != ExitError {
		t.Errorf("suspend of a missing Task: exit %d, want %d", code, ExitError)
	}
	assertContains(t, "stderr", stderr, `task "missing" not found in namespace "`+ns+`"`)
}
