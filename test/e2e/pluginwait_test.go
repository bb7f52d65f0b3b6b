//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

// `kubectl task wait` on a real node, for the two failures a CI log shows
// most: retries used up by a script's `exit 3`, and an attempt whose pod
// never started (a missing Secret: StartTimeout). Each prints the reason
// once, the cause (the exit code, the Secret) and what to run next, and
// exits 1. The test logs both outputs whole, as a user sees them.
func TestPluginWaitNamesTheCauseAndTheNextStep(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-plugin-wait")
	missingSecret := func(task *v1alpha1.Task) {
		task.Spec.Env = []v1alpha1.EnvVar{{Name: "PASSWORD", ValueFrom: &v1alpha1.EnvVarSource{SecretKeyRef: &v1alpha1.KeySelector{Name: "no-such-secret", Key: "password"}}}}
	}
	cases := []struct {
		name   string
		opts   []testutil.TaskOpt
		reason v1alpha1.Reason
		want   []string
	}{
		{"exits-3", []testutil.TaskOpt{testutil.Shell("echo checking; exit 3"), testutil.Retries(1, 1, 1, 2)},
			v1alpha1.ReasonRetriesExhausted, []string{"exit code 3", "kubectl task logs exits-3 -n " + ns}},
		{"no-secret", []testutil.TaskOpt{missingSecret, testutil.StartTimeout(startTimeoutOnABusyNode)},
			v1alpha1.Reason(v1alpha1.AttemptStartTimeout), []string{"no-such-secret", "kubectl task history no-secret -n " + ns + " --attempts"}},
	}
	for _, c := range cases {
		create(t, testutil.NewTask(ns, c.name, c.opts...))
	}
	for _, c := range cases {
		code, _, stderr := plugin(t, 3*time.Minute, "wait", c.name, "-n", ns, "--timeout", "2m")
		t.Logf("$ kubectl task wait %s -n %s --timeout 2m   # exit %d\n%s", c.name, ns, code, stderr)
		if code != 1 {
			t.Errorf("wait %s: exit %d, want 1", c.name, code)
		}
		for _, s := range append([]string{string(c.reason)}, c.want...) {
			if !strings.Contains(stderr, s) {
				t.Errorf("wait %s: the output does not name %q", c.name, s)
			}
		}
		if last := strings.TrimRight(stderr, "\n"); strings.HasSuffix(last, ":") {
			t.Errorf("wait %s: the output ends in a heading over nothing: %q", c.name, last[strings.LastIndex(last, "\n")+1:])
		}
		for _, line := range strings.Split(stderr, "\n") {
			if strings.Count(line, string(c.reason)+":") > 1 {
				t.Errorf("wait %s: the reason twice in one line: %q", c.name, line)
			}
		}
	}
}
