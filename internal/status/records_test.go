package status_test

import (
	"testing"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/status"
	"github.com/taskops/task-operator/internal/testutil"
)

func TestOnlyAStatusThatRecordsStartedAttemptsMayWait(t *testing.T) {
	task := cron(testutil.Retries(0, 10, 60, 2))
	task.Status.ObservedGeneration = 1
	done := compute(t, task, []runs.Run{okRun("s1", ago(2*time.Hour))}, nil)

	started := compute(t, done, []runs.Run{okRun("s1", ago(2*time.Hour)), testutil.MakeRun("s2").Active(ago(time.Second)).Obj()}, nil)
	if !status.RecordsOnlyStarts(&done.Status, &started.Status) {
		t.Error("a new run's running attempt: not a record-only write")
	}
	ended := compute(t, started, []runs.Run{okRun("s1", ago(2*time.Hour)), failedRun("s2", ago(time.Second))}, nil)
	if status.RecordsOnlyStarts(&started.Status, &ended.Status) {
		t.Error("a run that ended counted as record-only")
	}
	fresh := oneShot()
	first := compute(t, fresh, []runs.Run{testutil.MakeRun("0").Active(ago(time.Second)).Obj()}, nil)
	if !status.RecordsOnlyStarts(&fresh.Status, &first.Status) {
		t.Error("a new Task's first attempt: not a record-only write")
	}
	bad := compute(t, fresh, nil, &status.Problem{Reason: v1alpha1.ReasonInvalidSpec, Message: "x"})
	if status.RecordsOnlyStarts(&fresh.Status, &bad.Status) {
		t.Error("a spec problem counted as record-only")
	}
}
