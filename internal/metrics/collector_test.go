package metrics

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// untouchable fails the test when anything reads it: a standby must not
// start an informer by being scraped.
type untouchable struct {
	client.Reader
	t *testing.T
}

func (u untouchable) List(context.Context, client.ObjectList, ...client.ListOption) error {
	u.t.Error("a standby's scrape read the cache")
	return nil
}

func TestOnlyTheLeaderExportsTheGaugesReadFromTheCache(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	task := &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "nightly"},
		Status: v1alpha1.TaskStatus{Phase: v1alpha1.PhaseFailed, ConsecutiveFailures: 2}}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(task).Build()

	standby := &cacheCollector{reader: untouchable{t: t}, elected: make(chan struct{})}
	if err := testutil.CollectAndCompare(standby, strings.NewReader(`
# HELP taskoperator_leader 1 on the replica that leads and exports the per-Task and per-queue gauges, 0 on a standby.
# TYPE taskoperator_leader gauge
taskoperator_leader 0
`)); err != nil {
		t.Errorf("a standby exports: %v", err)
	}

	elected := make(chan struct{})
	close(elected)
	leader := &cacheCollector{reader: reader, elected: elected}
	if err := testutil.CollectAndCompare(leader, strings.NewReader(`
# HELP taskoperator_leader 1 on the replica that leads and exports the per-Task and per-queue gauges, 0 on a standby.
# TYPE taskoperator_leader gauge
taskoperator_leader 1
# HELP taskoperator_task_consecutive_failures Runs of the Task that failed in a row since its last success or spec change (status.consecutiveFailures).
# TYPE taskoperator_task_consecutive_failures gauge
taskoperator_task_consecutive_failures{namespace="team-a",task="nightly"} 2
`), "taskoperator_leader", "taskoperator_task_consecutive_failures"); err != nil {
		t.Errorf("the leader exports: %v", err)
	}
	if n := testutil.CollectAndCount(leader, "taskoperator_tasks"); n != 8 {
		t.Errorf("the leader exports %d taskoperator_tasks series, want one per phase (8)", n)
	}
}

// --task-metrics: every Task's series, only labelled Tasks', or none; the
// counts by phase stay in every case.
func TestPerTaskSeriesFollowTheTaskMetricsSetting(t *testing.T) {
	scheme := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(scheme)
	plain := &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "plain"}}
	labelled := &v1alpha1.Task{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "watched", Labels: map[string]string{v1alpha1.LabelMetrics: "true"}}}
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(plain, labelled).Build()
	elected := make(chan struct{})
	close(elected)
	for _, row := range []struct {
		setting string
		want    int // taskoperator_task_consecutive_failures series
	}{{"all", 2}, {"labelled", 1}, {"none", 0}} {
		p, err := ParsePerTask(row.setting)
		if err != nil {
			t.Fatal(err)
		}
		c := &cacheCollector{reader: reader, elected: elected, perTask: p}
		if n := testutil.CollectAndCount(c, "taskoperator_task_consecutive_failures"); n != row.want {
			t.Errorf("--task-metrics=%s: %d per-Task series, want %d", row.setting, n, row.want)
		}
		if n := testutil.CollectAndCount(c, "taskoperator_tasks"); n != 8 {
			t.Errorf("--task-metrics=%s: %d taskoperator_tasks series, want 8", row.setting, n)
		}
	}
	if _, err := ParsePerTask("some"); err == nil {
		t.Error("--task-metrics=some was accepted")
	}
}
