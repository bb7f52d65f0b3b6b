package reconciler_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

// etlResults declares the result rows.
func etlResults(t *v1alpha1.Task) { t.Spec.Results = []v1alpha1.ResultSpec{{Name: "rows"}} }

// runsAfter makes a Task run after the Tasks named, under policy, with
// param rows (no default) taken from the result rows of the first one.
func runsAfter(policy v1alpha1.AfterPolicy, upstream ...string) testutil.TaskOpt {
	return func(t *v1alpha1.Task) {
		t.Spec.AfterPolicy = policy
		t.Spec.Params = []v1alpha1.ParamSpec{{Name: "rows", Default: ptr.To("none")}}
		for i, u := range upstream {
			a := v1alpha1.TaskAfter{Task: u}
			if i == 0 {
				a.Params = []v1alpha1.AfterParam{{Name: "rows", FromResult: "rows"}}
			}
			t.Spec.After = append(t.Spec.After, a)
		}
	}
}

// chainedJobs are the Jobs of the Task's chained runs.
func chainedJobs(t *testing.T, task *v1alpha1.Task) []batchv1.Job {
	t.Helper()
	var out []batchv1.Job
	for _, j := range jobsOf(t, task) {
		if runs.IsChained(j.Labels[v1alpha1.LabelRun]) {
			out = append(out, j)
		}
	}
	return out
}

// finishRun waits for the first Job of a Task's run, ends it with exit
// code 0 and results, and waits for the run's end in its status.
func finishRun(t *testing.T, task *v1alpha1.Task, run string, values map[string]string) {
	t.Helper()
	job := waitJobOf(t, task, run, 1) // a run-now run's Job may not exist yet
	finishWith(t, job, 0, values)
	waitTask(t, task, "run "+run+" recorded as finished", func(x *v1alpha1.Task) bool {
		return len(x.Status.History) > 0 && x.Status.History[0].RunID == run && x.Status.History[0].Result == v1alpha1.RunResultSucceeded
	})
}

func TestAReportRunsAfterTheETLWithItsResultAsAParam(t *testing.T) {
	ns := newNamespace(t)
	etl := createTask(t, ns, "etl", etlResults)
	report := createTask(t, ns, "report", runsAfter(v1alpha1.AfterAll, "etl"))
	waitTask(t, report, "the report waits for the ETL, Ready", func(x *v1alpha1.Task) bool {
		c := condition(x, v1alpha1.ConditionReady)
		return c != nil && c.Status == "True" && strings.Contains(c.Message, "runs after every one of etl")
	})
	if n := len(jobsOf(t, report)); n != 0 {
		t.Fatalf("a Task with spec.after and no schedule ran at creation: %d Jobs", n)
	}

	waitJobs(t, etl, 1)
	finishRun(t, etl, runs.OneShot, map[string]string{"rows": "42"})
	want := []v1alpha1.TriggerRef{{Task: "etl", RunID: runs.OneShot}}
	id := runs.ChainID(want)
	job := waitJobOf(t, report, id, 1)
	if v, _ := envOf(job, "TASK_PARAM_ROWS"); v != "42" {
		t.Fatalf("TASK_PARAM_ROWS=%q, want the ETL's result 42", v)
	}
	finishWith(t, job, 0, nil)
	done := waitTask(t, report, "the chained run recorded", func(x *v1alpha1.Task) bool {
		return x.Status.LastFinishedTrigger != nil && x.Status.LastFinishedTrigger.RunID == id
	})
	got := done.Status.LastFinishedTrigger
	if got.Result != v1alpha1.RunResultSucceeded || len(got.Trigger) != 1 || got.Trigger[0].Task != "etl" || got.Trigger[0].RunID != runs.OneShot {
		t.Errorf("lastFinishedTrigger %+v", got)
	}
	if h := done.Status.History[0]; h.RunID != id || len(h.Trigger) != 1 || h.Params["rows"] != "42" {
		t.Errorf("history[0] %+v", h)
	}
	if a := done.Status.After; len(a) != 1 || a[0].Task != "etl" || a[0].LastConsumedRunID != runs.OneShot {
		t.Errorf("status.after %+v", a)
	}
	// The next ETL run (a run-now) starts the next report run, and only
	// that one: the first ETL run stays consumed.
	setRunNow(t, etl, "again")
	finishRun(t, etl, runs.RunNowID("again"), map[string]string{"rows": "43"})
	next := waitJobOf(t, report, runs.ChainID([]v1alpha1.TriggerRef{{Task: "etl", RunID: runs.RunNowID("again")}}), 1)
	if v, _ := envOf(next, "TASK_PARAM_ROWS"); v != "43" {
		t.Errorf("the second run: TASK_PARAM_ROWS=%q, want 43", v)
	}
	if n := len(jobsOf(t, report)); n != 2 {
		t.Errorf("%d Jobs after two ETL runs, want 2", n)
	}
}

func TestAnyStartsOneRunPerUpstreamRunAndAllWaitsForEach(t *testing.T) {
	ns := newNamespace(t)
	a := createTask(t, ns, "load-a", etlResults)
	b := createTask(t, ns, "load-b", etlResults)
	anyOf := createTask(t, ns, "any", runsAfter(v1alpha1.AfterAny, "load-a", "load-b"), func(t *v1alpha1.Task) {
		t.Spec.ConcurrencyPolicy = v1alpha1.AllowConcurrent
	})
	all := createTask(t, ns, "all", runsAfter(v1alpha1.AfterAll, "load-a", "load-b"))
	waitJobs(t, a, 1)
	waitJobs(t, b, 1)

	finishRun(t, a, runs.OneShot, map[string]string{"rows": "1"})
	waitJobOf(t, anyOf, runs.ChainID([]v1alpha1.TriggerRef{{Task: "load-a", RunID: runs.OneShot}}), 1)
	// All waits for load-b: a run of load-a's alone would be a second Job
	// (checked below).

	finishRun(t, b, runs.OneShot, map[string]string{"rows": "2"})
	waitJobOf(t, anyOf, runs.ChainID([]v1alpha1.TriggerRef{{Task: "load-b", RunID: runs.OneShot}}), 1)
	both := []v1alpha1.TriggerRef{{Task: "load-a", RunID: runs.OneShot}, {Task: "load-b", RunID: runs.OneShot}}
	job := waitJobOf(t, all, runs.ChainID(both), 1)
	if v, _ := envOf(job, "TASK_PARAM_ROWS"); v != "1" {
		t.Errorf("All's run: TASK_PARAM_ROWS=%q, want load-a's result", v)
	}
	if n, m := len(jobsOf(t, anyOf)), len(jobsOf(t, all)); n != 2 || m != 1 {
		t.Errorf("Any has %d Jobs (want 2, one per upstream run), All %d (want 1)", n, m)
	}
}

func TestAFailedUpstreamRunStartsNothingUnlessOnNamesFailed(t *testing.T) {
	ns := newNamespace(t)
	etl := createTask(t, ns, "etl", etlResults)
	onSuccess := createTask(t, ns, "report", runsAfter(v1alpha1.AfterAll, "etl"))
	onFailure := createTask(t, ns, "alert", func(t *v1alpha1.Task) {
		t.Spec.After = []v1alpha1.TaskAfter{{Task: "etl", On: []v1alpha1.AfterOn{v1alpha1.AfterOnFailed}}}
	})
	job := waitJobs(t, etl, 1)[0]
	finishWith(t, &job, 3, nil)
	waitTask(t, etl, "the ETL failed", phaseIs(v1alpha1.PhaseFailed))
	waitJobOf(t, onFailure, runs.ChainID([]v1alpha1.TriggerRef{{Task: "etl", RunID: runs.OneShot}}), 1)
	// The next ETL run succeeds: on: [Succeeded] runs once, after it alone.
	setRunNow(t, etl, "retry")
	finishRun(t, etl, runs.RunNowID("retry"), nil)
	waitJobOf(t, onSuccess, runs.ChainID([]v1alpha1.TriggerRef{{Task: "etl", RunID: runs.RunNowID("retry")}}), 1)
	if n := len(jobsOf(t, onSuccess)); n != 1 {
		t.Errorf("on: [Succeeded] has %d Jobs, want 1: the failed run started one", n)
	}
}

func TestAnUpstreamRunStartsOneRunAcrossARestartAndAWipedStatus(t *testing.T) {
	ns := newNamespace(t)
	etl := createTask(t, ns, "etl", etlResults)
	report := createTask(t, ns, "report", manual, runsAfter(v1alpha1.AfterAll, "etl"))
	waitJobs(t, etl, 1)
	finishRun(t, etl, runs.OneShot, map[string]string{"rows": "7"})
	waitCached(t, report)
	key := client.ObjectKeyFromObject(etl)
	waitManualCache(t, "the ETL's end in the manual cache", key, &v1alpha1.Task{}, func() bool {
		var x v1alpha1.Task
		return manualClient.Get(ctx, key, &x) == nil && len(x.Status.History) > 0 && x.Status.History[0].Result == v1alpha1.RunResultSucceeded
	})

	// The operator dies between creating the run's Job and recording it,
	// three times; then a fresh one takes over.
	crashing := manualReconciler(crashBeforeStatus())
	for range 3 {
		_, _ = crashing.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(report)})
	}
	got := reconcileUntil(t, report, "the chained run recorded", func(x *v1alpha1.Task) bool { return len(x.Status.After) == 1 })
	if n := len(chainedJobs(t, report)); n != 1 {
		t.Fatalf("%d Jobs for one upstream run after a restart, want 1: %s", n, statusSummary(got))
	}

	// The status is lost: status.after is rebuilt from the run's Job.
	wiped := got.DeepCopy()
	wiped.Status = v1alpha1.TaskStatus{}
	must(t, k8s.Status().Update(ctx, wiped))
	after := reconcileUntil(t, report, "status.after rebuilt", func(x *v1alpha1.Task) bool { return len(x.Status.After) == 1 })
	if d := cmp.Diff(got.Status.After[0].LastConsumedRunID, after.Status.After[0].LastConsumedRunID); d != "" {
		t.Errorf("rebuilt status.after (-want +got):\n%s", d)
	}
	if n := len(chainedJobs(t, report)); n != 1 {
		t.Fatalf("%d Jobs after the status was wiped, want 1", n)
	}
}

func TestATwoTaskCycleIsInvalidSpecUntilItIsBroken(t *testing.T) {
	ns := newNamespace(t)
	a := createTask(t, ns, "a", func(t *v1alpha1.Task) { t.Spec.After = []v1alpha1.TaskAfter{{Task: "b"}} })
	b := createTask(t, ns, "b", func(t *v1alpha1.Task) { t.Spec.After = []v1alpha1.TaskAfter{{Task: "a"}} })
	for _, x := range []*v1alpha1.Task{a, b} {
		waitTask(t, x, "InvalidSpec naming the cycle", func(x *v1alpha1.Task) bool {
			c := condition(x, v1alpha1.ConditionReady)
			return c != nil && c.Status == "False" && c.Reason == string(v1alpha1.ReasonInvalidSpec) && strings.Contains(c.Message, "cycle")
		})
	}
	c := condition(getTask(t, a), v1alpha1.ConditionReady)
	if !strings.Contains(c.Message, "a -> b -> a") {
		t.Errorf("the message does not name the cycle: %q", c.Message)
	}
	// b stops naming a: both are waiting again, Ready.
	edit(t, b, func(x *v1alpha1.Task) { x.Spec.After = nil })
	waitTask(t, a, "a Ready once the cycle is broken", func(x *v1alpha1.Task) bool {
		c := condition(x, v1alpha1.ConditionReady)
		return c != nil && c.Status == "True"
	})
}

func TestChainedRunsGoThroughAQueueOfOneAndWaitWhileSuspended(t *testing.T) {
	ns := newNamespace(t)
	createQueue(t, ns, "one", 1)
	etl := createTask(t, ns, "etl", etlResults)
	report := createTask(t, ns, "report", runsAfter(v1alpha1.AfterAll, "etl"), func(t *v1alpha1.Task) {
		t.Spec.QueueName = "one"
		t.Spec.Suspend = ptr.To(true)
	})
	waitJobs(t, etl, 1)
	finishRun(t, etl, runs.OneShot, map[string]string{"rows": "3"})
	waitTask(t, report, "a pass that saw the ETL's run", func(x *v1alpha1.Task) bool { return x.Status.ObservedGeneration == x.Generation })
	if n := len(jobsOf(t, report)); n != 0 || len(getTask(t, report).Status.After) != 0 {
		t.Fatalf("a suspended Task started %d runs or consumed the upstream run", n)
	}

	// A Task of the queue holds its one place; resuming the report queues
	// its run behind it.
	holder := createTask(t, ns, "holder", func(t *v1alpha1.Task) { t.Spec.QueueName = "one" })
	waitJobs(t, holder, 1)
	edit(t, report, func(x *v1alpha1.Task) { x.Spec.Suspend = nil })
	waitTask(t, report, "the chained run queued", queuedAs(v1alpha1.ReasonQueued))
	if q := getTask(t, report).Status.Queued; len(q) != 1 || len(q[0].Trigger) != 1 || q[0].Params["rows"] != "3" {
		t.Fatalf("queued %+v, want the chained run with its trigger and params", q)
	}
	completeTaskJob(t, holder)
	job := waitJobOf(t, report, runs.ChainID([]v1alpha1.TriggerRef{{Task: "etl", RunID: runs.OneShot}}), 1)
	if v, _ := envOf(job, "TASK_PARAM_ROWS"); v != "3" {
		t.Errorf("after the queue: TASK_PARAM_ROWS=%q, want 3", v)
	}
}

func TestAMissingUpstreamIsAMessageNotAFailure(t *testing.T) {
	ns := newNamespace(t)
	report := createTask(t, ns, "report", runsAfter(v1alpha1.AfterAny, "gone"))
	waitTask(t, report, "Ready, naming the missing Task", func(x *v1alpha1.Task) bool {
		c := condition(x, v1alpha1.ConditionReady)
		return c != nil && c.Status == "True" && strings.Contains(c.Message, "missing: gone")
	})
	// It appears and runs: the report runs after it.
	gone := createTask(t, ns, "gone", etlResults)
	waitJobs(t, gone, 1)
	finishRun(t, gone, runs.OneShot, map[string]string{"rows": "5"})
	waitJobOf(t, report, runs.ChainID([]v1alpha1.TriggerRef{{Task: "gone", RunID: runs.OneShot}}), 1)
}
