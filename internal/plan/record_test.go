package plan_test

import (
	"testing"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

func TestTheRecordOfAJustStartedAttemptWaitsForItsEndOrTheDelay(t *testing.T) {
	run := testutil.MakeRun
	const delay = 2 * time.Second
	due := func(created time.Time) time.Time { return created.Add(time.Second + delay) }
	cases := []struct {
		name string
		runs []runs.Run
		want time.Time
	}{
		{name: "nothing ran: now", want: time.Time{}},
		{name: "a Job created a second ago: recorded after the delay (its creationTimestamp may be a second early)",
			runs: []runs.Run{run("0").Active(ago(time.Second)).Obj()}, want: due(ago(time.Second))},
		{name: "a Job older than the delay: now",
			runs: []runs.Run{run("0").Active(ago(4 * time.Second)).Obj()}, want: time.Time{}},
		{name: "a run that ended just now: now (its end is what the user waits for)",
			runs: []runs.Run{run("0").Succeeded(ago(time.Second), now).Obj()}, want: time.Time{}},
		{name: "a retry started right after its attempt failed: now",
			runs: []runs.Run{run("0").Failed(ago(2*time.Second), ago(time.Second), v1alpha1.AttemptPodFailed, "exit 3").Active(now).Obj()}, want: time.Time{}},
		{name: "a new cron run long after the last one ended: after the delay",
			runs: []runs.Run{run("a").Succeeded(ago(time.Hour), ago(time.Hour)).Obj(), run("b").Active(now).Obj()}, want: due(now)},
		{name: "two young attempts: the earlier's due time",
			runs: []runs.Run{run("a").Active(ago(time.Second)).Obj(), run("b").Active(now).Obj()}, want: due(ago(time.Second))},
		{name: "a young attempt beside one running for long (recorded): now",
			runs: []runs.Run{run("a").Active(ago(time.Hour)).Obj(), run("b").Active(now).Obj()}, want: time.Time{}},
		{name: "a Job newer than the clock (clock oddity): now",
			runs: []runs.Run{run("0").Active(now.Add(time.Minute)).Obj()}, want: time.Time{}},
	}
	if got := plan.RecordStartAt([]runs.Run{run("0").Active(now).Obj()}, now, 0); !got.IsZero() {
		t.Errorf("a zero delay waits until %v", got)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := plan.RecordStartAt(c.runs, now, delay); !got.Equal(c.want) {
				t.Errorf("record at %v, want %v", got, c.want)
			}
		})
	}
}
