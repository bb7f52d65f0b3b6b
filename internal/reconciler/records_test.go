package reconciler_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

// A cron slot shared by more Tasks than the workers take at once: the
// records of the Jobs created queue behind the starts (internal/fastpath), and
// none is lost: every Task shows its run Running soon after, with one Job
// each.
func TestEveryTaskOfAFireShowsItsRunningRunSoonAfter(t *testing.T) {
	ns := newNamespace(t)
	const n = 48
	var tasks []*v1alpha1.Task
	fakeClock.SetTime(time.Now())
	for i := range n {
		task := createTask(t, ns, fmt.Sprintf("fire-%02d", i), testutil.Schedule("*/5 * * * *"))
		tasks = append(tasks, task)
	}
	var next time.Time
	for _, task := range tasks {
		got := waitTask(t, task, "nextScheduleTime", func(x *v1alpha1.Task) bool { return x.Status.NextScheduleTime != nil })
		next = got.Status.NextScheduleTime.Time
	}
	fakeClock.SetTime(next.Add(time.Second))
	for _, task := range tasks {
		poke(t, task)
	}
	id := runs.ScheduledID(next)
	start := time.Now()
	for _, task := range tasks {
		waitTask(t, task, "run "+id+" recorded", func(x *v1alpha1.Task) bool {
			return len(x.Status.History) > 0 && x.Status.History[0].RunID == id && x.Status.Phase == v1alpha1.PhaseRunning
		})
		if js := jobsOf(t, task); len(js) != 1 {
			t.Fatalf("%s: %d Jobs for one slot", task.Name, len(js))
		}
	}
	t.Logf("%d Tasks showed their run Running %.1f s after the pokes", n, time.Since(start).Seconds())
}
