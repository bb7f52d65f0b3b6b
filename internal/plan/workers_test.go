package plan_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

func TestARemoteAttemptsWorkerIsKeptAndAWorkerItLeftIsRecorded(t *testing.T) {
	lostAt := metav1.NewTime(ago(time.Hour))
	remote := func(worker string, lost ...v1alpha1.LostWorker) runs.Run {
		run := testutil.MakeRun("0").Started(ago(time.Minute)).Obj()
		a := &run.Attempts[0]
		a.Remote, a.Worker, a.LostWorkers = true, worker, lost
		return run
	}
	tests := []struct {
		name string
		run  runs.Run
		seen map[string]string // the Workload's worker this pass, by Job
		want map[string]plan.WorkerNote
	}{
		{"an attempt dispatched to a worker gets it kept on its Job", remote(""), map[string]string{"t-0-1": "worker-1"},
			map[string]plan.WorkerNote{"t-0-1": {Worker: "worker-1"}}},
		{"an attempt on the worker its Job names: nothing to write", remote("worker-1"), map[string]string{"t-0-1": "worker-1"}, nil},
		{"an attempt Kueue looks for a worker for, still: nothing to write", remote(""), map[string]string{"t-0-1": ""}, nil},
		{"an attempt taken from its worker: that worker is lost, now",
			remote("worker-1"), map[string]string{"t-0-1": ""},
			map[string]plan.WorkerNote{"t-0-1": {Lost: []v1alpha1.LostWorker{{Cluster: "worker-1", Time: metav1.NewTime(now)}}, Left: "worker-1"}}},
		{"an attempt already on another worker when the pass looks: both said",
			remote("worker-1", v1alpha1.LostWorker{Cluster: "worker-2", Time: lostAt}), map[string]string{"t-0-1": "worker-2"},
			map[string]plan.WorkerNote{"t-0-1": {Worker: "worker-2", Left: "worker-1",
				Lost: []v1alpha1.LostWorker{{Cluster: "worker-2", Time: lostAt}, {Cluster: "worker-1", Time: metav1.NewTime(now)}}}}},
		{"no Workload read (none there): nothing to write", remote("worker-1"), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := plan.Decide(plan.Input{Task: task(), Runs: []runs.Run{tt.run}, Now: now, Workers: tt.seen})
			if diff := cmp.Diff(tt.want, got.RecordWorker); diff != "" {
				t.Errorf("RecordWorker (-want +got):\n%s", diff)
			}
		})
	}
}
