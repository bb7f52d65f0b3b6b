package cli

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

// TestAFailureNamesItsReasonOnce: the Failed condition's message of a run
// that failed for good starts with its reason (the run's history message),
// and the line the plugin prints names the reason once.
func TestAFailureNamesItsReasonOnce(t *testing.T) {
	for _, tc := range []struct{ reason, message, want string }{
		{"RetriesExhausted", "RetriesExhausted: all 3 attempts failed; attempt 3: PodFailed: exit code 1",
			"task/build failed: RetriesExhausted: all 3 attempts failed; attempt 3: PodFailed: exit code 1"},
		{"InvalidSchedule", "unknown time zone Mars/Olympus",
			"task/build failed: InvalidSchedule: unknown time zone Mars/Olympus"},
		{"Cancelled", "", "task/build failed: Cancelled"},
	} {
		task := testutil.NewTask("ns", "build")
		setCondition(task, v1alpha1.ConditionFailed, metav1.ConditionTrue, v1alpha1.Reason(tc.reason), tc.message)
		got := failureLines(task)[0]
		if got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
		if strings.Count(got, tc.reason) != 1 {
			t.Errorf("%q names %s more than once", got, tc.reason)
		}
	}
}
