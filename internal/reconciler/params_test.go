package reconciler_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/results"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

// withParams declares date (required) and region (default eu), and the
// results rows and done.
func withParams(t *v1alpha1.Task) {
	t.Spec.Params = []v1alpha1.ParamSpec{{Name: "date", Default: ptr.To("today")}, {Name: "region", Default: ptr.To("eu")}}
	t.Spec.Results = []v1alpha1.ResultSpec{{Name: "rows"}, {Name: "done"}}
}

// setRunNowWith writes a run-now token and the run's values in one patch,
// as kubectl task run NAME --param does.
func setRunNowWith(t *testing.T, task *v1alpha1.Task, token string, values map[string]string) {
	t.Helper()
	b, err := json.Marshal(values)
	must(t, err)
	fresh := getTask(t, task)
	patch := client.MergeFrom(fresh.DeepCopy()) // no resourceVersion: no conflict with the operator's writes
	if fresh.Annotations == nil {
		fresh.Annotations = map[string]string{}
	}
	fresh.Annotations[v1alpha1.AnnotationRunNow] = token
	fresh.Annotations[v1alpha1.AnnotationRunParams] = string(b)
	must(t, k8s.Patch(ctx, fresh, patch))
}

// envOf is the task container's value of an environment variable.
func envOf(job *batchv1.Job, name string) (string, bool) {
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			return strings.ReplaceAll(e.Value, "$$", "$"), true // as the kubelet gives it to the process
		}
	}
	return "", false
}

// finishWith ends an attempt's Job with its pod's exit code and the results
// block the wrapper writes.
func finishWith(t *testing.T, job *batchv1.Job, code int32, values map[string]string) {
	t.Helper()
	_, err := testutil.PodOf(ctx, k8s, job, 0, testutil.Terminated(code, results.Append("", values, nil)))
	must(t, err)
	// The operator may have just written the Job: read it afresh after a
	// conflict.
	eventually(t, "Job "+job.Name+" finished", func() (bool, string) {
		fresh := getJob(t, job)
		var err error
		if code == 0 {
			err = testutil.CompleteJob(ctx, k8s, fresh, fakeClock.Now())
		} else {
			err = testutil.FailJob(ctx, k8s, fresh, fakeClock.Now(), "BackoffLimitExceeded", "Job has reached the specified backoff limit")
		}
		return err == nil, errString(err)
	})
}

func TestARunNowRunUsesItsValuesOnEveryAttemptAndHandsBackResults(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "report", withParams, testutil.MaxRetry(1))

	// Run 0 runs with the defaults.
	first := waitJobs(t, task, 1)[0]
	if v, _ := envOf(&first, "TASK_PARAM_DATE"); v != "today" {
		t.Fatalf("run 0: TASK_PARAM_DATE=%q, want the default", v)
	}
	finishWith(t, &first, 0, map[string]string{"rows": "1"})
	waitTask(t, task, "run 0 succeeded", phaseIs(ok))

	hostile := "$(rm -rf /) \"quoted\" 'single'\n`id` ; echo pwned " + strings.Repeat("ü", 400)
	setRunNowWith(t, task, "ci-1", map[string]string{"date": hostile})
	id := runs.RunNowID("ci-1")
	job1 := waitJobOf(t, task, id, 1)
	if v, _ := envOf(job1, "TASK_PARAM_DATE"); v != hostile {
		t.Fatalf("TASK_PARAM_DATE=%q, want the value verbatim", v)
	}
	if v, _ := envOf(job1, "TASK_PARAM_REGION"); v != "eu" {
		t.Fatalf("TASK_PARAM_REGION=%q, want the default", v)
	}
	if cmd := job1.Spec.Template.Spec.Containers[0].Command; strings.Contains(strings.Join(cmd, " "), "pwned") {
		t.Fatalf("the value reached the command: %q", cmd)
	}

	// Another caller overwrites the values without a token: the run's
	// retry keeps its own.
	setAnnotation(t, task, v1alpha1.AnnotationRunParams, `{"date":"someone-else"}`)
	finishWith(t, job1, 3, map[string]string{"done": "half"})
	waitTask(t, task, "attempt 1 failed", phaseIs(v1alpha1.PhaseRetrying))
	fakeClock.Step(time.Minute)
	poke(t, task)
	job2 := waitJobOf(t, task, id, 2)
	if v, _ := envOf(job2, "TASK_PARAM_DATE"); v != hostile {
		t.Fatalf("the retry got TASK_PARAM_DATE=%q, want the run's value", v)
	}
	finishWith(t, job2, 0, map[string]string{"rows": "42"})
	done := waitTask(t, task, "the run-now run succeeded", func(x *v1alpha1.Task) bool {
		return x.Status.Phase == ok && x.Status.CurrentRun == id
	})
	want := map[string]string{"date": hostile, "region": "eu"}
	if d := cmp.Diff(want, done.Status.History[0].Params); d != "" {
		t.Errorf("history params (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"rows": "42"}, done.Status.History[0].Results); d != "" {
		t.Errorf("history results (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"rows": "42"}, done.Status.Results); d != "" {
		t.Errorf("status.results (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"rows": "1"}, done.Status.History[1].Results); d != "" {
		t.Errorf("run 0 keeps its own results (-want +got):\n%s", d)
	}
	var failed *v1alpha1.AttemptRecord
	for i := range done.Status.AttemptRecords {
		if done.Status.AttemptRecords[i].Attempt == 1 {
			failed = &done.Status.AttemptRecords[i]
		}
	}
	if failed == nil || failed.Results["done"] != "half" || failed.Params["date"] != hostile {
		t.Errorf("the failed attempt's record lost its results or params: %+v", failed)
	}
	if done.Status.LastFinishedRunNowToken != "ci-1" {
		t.Errorf("lastFinishedRunNowToken %q, want ci-1", done.Status.LastFinishedRunNowToken)
	}
}

func TestInvalidParamsFailTheRunWithoutAJobAndChangeNothingElse(t *testing.T) {
	ns := newNamespace(t)
	task := newTask(ns, "strict", func(t *v1alpha1.Task) {
		t.Spec.Params = []v1alpha1.ParamSpec{{Name: "date", Default: ptr.To("today")}}
	})
	must(t, k8s.Create(ctx, task))
	completeJob(t, task, "0", 1)
	waitTask(t, task, "run 0 succeeded", phaseIs(ok))

	setRunNowWith(t, task, "typo", map[string]string{"dat": "2026-11-30"})
	id := runs.RunNowID("typo")
	failed := waitTask(t, task, "the run failed InvalidParams", func(x *v1alpha1.Task) bool {
		return x.Status.LastFinishedRunNowToken == "typo"
	})
	h := failed.Status.History[0]
	if h.RunID != id || h.Result != v1alpha1.RunResultFailed || h.Reason != v1alpha1.ReasonInvalidParams || !strings.Contains(h.Message, `unknown params "dat"`) {
		t.Fatalf("history[0] = %+v", h)
	}
	if c := condition(failed, v1alpha1.ConditionFailed); c == nil || c.Status != "True" || c.Reason != string(v1alpha1.ReasonInvalidParams) {
		t.Fatalf("Failed condition %+v, want True InvalidParams", c)
	}
	if n := len(jobsOf(t, task)); n != 1 {
		t.Fatalf("%d Jobs: the invalid run made one", n)
	}
	eventually(t, "a Warning event InvalidParams", func() (bool, string) {
		var evs corev1.EventList
		must(t, k8s.List(ctx, &evs))
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == task.Name && e.InvolvedObject.Namespace == ns && e.Reason == string(v1alpha1.ReasonInvalidParams) && e.Type == corev1.EventTypeWarning {
				return true, ""
			}
		}
		return false, "no such event"
	})

	// The next token with good values runs.
	setRunNowWith(t, task, "fixed", map[string]string{"date": "2026-11-30"})
	job := waitJobOf(t, task, runs.RunNowID("fixed"), 1)
	if v, _ := envOf(job, "TASK_PARAM_DATE"); v != "2026-11-30" {
		t.Fatalf("TASK_PARAM_DATE=%q", v)
	}
}

// A queued run-now run's values wait in status.queued: the Job that
// admission finally creates carries them, whatever the annotation says by
// then, and however many operator passes (or restarts: the status is all
// there is) came between.
func TestAQueuedRunKeepsTheValuesOfItsToken(t *testing.T) {
	ns := newNamespace(t)
	createQueue(t, ns, "one", 1)
	blocker := createTask(t, ns, "blocker", testutil.Queue("one"))
	waitJobs(t, blocker, 1)

	task := createTask(t, ns, "waiting", withParams, testutil.Queue("one"), testutil.Suspend(true))
	waitTask(t, task, "phase Suspended", phaseIs(v1alpha1.PhaseSuspended))
	setRunNowWith(t, task, "ci-9", map[string]string{"date": "2026-01-01"})
	queued := waitTask(t, task, "the run queued", func(x *v1alpha1.Task) bool { return len(x.Status.Queued) == 1 })
	if got := queued.Status.Queued[0].Params["date"]; got != "2026-01-01" {
		t.Fatalf("status.queued[0].params = %v", queued.Status.Queued[0].Params)
	}
	setAnnotation(t, task, v1alpha1.AnnotationRunParams, `{"date":"changed-later"}`)
	poke(t, task)
	completeTaskJob(t, blocker)
	job := waitJobOf(t, task, runs.RunNowID("ci-9"), 1)
	if v, _ := envOf(job, "TASK_PARAM_DATE"); v != "2026-01-01" {
		t.Fatalf("the admitted Job has TASK_PARAM_DATE=%q, want the token's value", v)
	}
}

// A fresh reconciler (an operator restarted after the first attempt) gives
// the retry the run's values from the Job of attempt 1.
func TestARetryAfterARestartKeepsTheRunsValues(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "restarted", manual, withParams, testutil.MaxRetry(1), testutil.Retries(1, 1, 1, 1))
	waitCached(t, task)
	reconcileUntil(t, task, "run 0 running", attemptsAre(1, v1alpha1.PhaseRunning))
	job := jobsOf(t, task)[0]
	must(t, testutil.CompleteJob(ctx, k8s, &job, fakeClock.Now()))
	reconcileUntil(t, task, "run 0 succeeded", phaseIs(ok))

	setRunNowWith(t, task, "r-1", map[string]string{"date": "kept"})
	id := runs.RunNowID("r-1")
	reconcileUntil(t, task, "the run-now run running", func(x *v1alpha1.Task) bool { return x.Status.CurrentRun == id && x.Status.Attempts == 1 })
	setAnnotation(t, task, v1alpha1.AnnotationRunParams, `{"date":"not-this"}`)
	j1 := waitJobOf(t, task, id, 1)
	must(t, testutil.FailJob(ctx, k8s, j1, fakeClock.Now().Add(-time10s), "BackoffLimitExceeded", "x"))
	reconcileUntil(t, task, "attempt 2 running", attemptsAre(2, v1alpha1.PhaseRunning))
	if v, _ := envOf(waitJobOf(t, task, id, 2), "TASK_PARAM_DATE"); v != "kept" {
		t.Fatalf("the retry after a restart got TASK_PARAM_DATE=%q, want kept", v)
	}
}

// waitJobOf waits for the Job of one run and attempt.
func waitJobOf(t *testing.T, task *v1alpha1.Task, run string, attempt int) *batchv1.Job {
	t.Helper()
	var job *batchv1.Job
	eventually(t, "the Job of run "+run+" attempt "+itoa(attempt), func() (bool, string) {
		for _, j := range jobsOf(t, task) {
			if j.Labels[v1alpha1.LabelRun] == run && j.Labels[v1alpha1.LabelAttempt] == itoa(attempt) {
				job = &j
				return true, ""
			}
		}
		return false, "none yet"
	})
	return job
}
