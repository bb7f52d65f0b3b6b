package reconciler_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
)

const (
	T  = metav1.ConditionTrue
	F  = metav1.ConditionFalse
	U  = metav1.ConditionUnknown
	ok = v1alpha1.PhaseSucceeded
)

func TestAShellTaskRunsAsOneJobAndSucceeds(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "hello")

	job := waitJobs(t, task, 1)[0]
	running := waitTask(t, task, "phase Running", phaseIs(v1alpha1.PhaseRunning))
	assertConditions(t, running, U, F, T, F)
	assertKstatus(t, running, kstatus.InProgressStatus)
	if running.Status.Attempts != 1 || running.Status.CurrentRun != "0" || running.Status.LastJobName != job.Name || len(running.Status.Active) != 1 {
		t.Fatalf("running status: %s", statusSummary(running))
	}
	if !strings.Contains(strings.Join(running.Finalizers, ","), v1alpha1.Finalizer) {
		t.Fatalf("finalizer missing: %v", running.Finalizers)
	}

	// The Job has the contract's shape.
	if job.Name != jobs.Name(running, "0", 1) {
		t.Fatalf("job name %s, want %s", job.Name, jobs.Name(running, "0", 1))
	}
	for k, v := range map[string]string{v1alpha1.LabelTask: "hello", v1alpha1.LabelRun: "0", v1alpha1.LabelAttempt: "1", v1alpha1.LabelManagedBy: "task-operator"} {
		if job.Labels[k] != v || job.Spec.Template.Labels[k] != v {
			t.Fatalf("label %s = %q / %q, want %q", k, job.Labels[k], job.Spec.Template.Labels[k], v)
		}
	}
	ref := metav1.GetControllerOf(&job)
	if ref == nil || ref.UID != running.UID {
		t.Fatalf("controller reference %v, want the Task", ref)
	}
	if *job.Spec.BackoffLimit != 0 || *job.Spec.CompletionMode != batchv1.IndexedCompletion || job.Spec.PodFailurePolicy == nil {
		t.Fatalf("job spec: %+v", job.Spec)
	}
	c := job.Spec.Template.Spec.Containers[0]
	if strings.Join(c.Command, " ") != "/bin/sh -c echo hello" || c.Image != "busybox:test" {
		t.Fatalf("container: %v %s", c.Command, c.Image)
	}

	must(t, testutil.CompleteJob(ctx, k8s, &job, fakeClock.Now()))
	done := waitTask(t, task, "phase Succeeded", phaseIs(ok))
	assertConditions(t, done, T, F, F, F)
	assertKstatus(t, done, kstatus.CurrentStatus)
	if len(done.Status.Active) != 0 || done.Status.CompletionTime == nil || done.Status.LastSuccessfulTime == nil {
		t.Fatalf("succeeded status: %s", statusSummary(done))
	}
	if h := done.Status.History; len(h) != 1 || h[0].RunID != "0" || h[0].Result != v1alpha1.RunResultSucceeded || h[0].Attempts != 1 || h[0].Generation != done.Generation {
		t.Fatalf("history: %+v", h)
	}
}

func TestAnUnchangedTaskCostsNoWrites(t *testing.T) {
	task, job := startTask(t, "idle")
	must(t, testutil.CompleteJob(ctx, k8s, &job, fakeClock.Now()))
	done := waitTask(t, task, "phase Succeeded", phaseIs(ok))

	for i := 0; i < 3; i++ {
		res := reconcileOnce(t, rec, task)
		if res.RequeueAfter != 0 {
			t.Fatalf("a finished Task requeues after %s", res.RequeueAfter)
		}
	}
	after := getTask(t, task)
	if after.ResourceVersion != done.ResourceVersion {
		t.Fatalf("reconciling an unchanged Task wrote it: resourceVersion %s -> %s", done.ResourceVersion, after.ResourceVersion)
	}
	if j := jobsOf(t, task)[0]; j.ResourceVersion != job.ResourceVersion {
		t.Fatalf("reconciling an unchanged Task wrote its Job")
	}
}

func TestAFailedAttemptIsRetriedAfterItsBackoffAndThenSucceeds(t *testing.T) {
	task, first := startTask(t, "flaky", testutil.MaxRetry(2))

	failedAt := fakeClock.Now().Truncate(time.Second)
	_, err := testutil.PodOf(ctx, k8s, &first, 0, testutil.Terminated(3, "connection refused by db"))
	must(t, err)
	must(t, testutil.FailJob(ctx, k8s, &first, failedAt, "BackoffLimitExceeded", "Job has reached the specified backoff limit"))

	retrying := waitTask(t, task, "phase Retrying", phaseIs(v1alpha1.PhaseRetrying))
	assertConditions(t, retrying, U, F, T, F)
	assertKstatus(t, retrying, kstatus.InProgressStatus)
	if want := failedAt.Add(10 * time.Second); retrying.Status.NextRetryTime == nil || !retrying.Status.NextRetryTime.Time.Equal(want) {
		t.Fatalf("nextRetryTime %v, want %v", retrying.Status.NextRetryTime, want)
	}
	if !strings.Contains(retrying.Status.LastError, "PodFailed") || !strings.Contains(retrying.Status.LastError, "exited with code 3: connection refused by db") {
		t.Fatalf("lastError %q", retrying.Status.LastError)
	}
	if len(jobsOf(t, task)) != 1 {
		t.Fatalf("the next attempt started before its backoff")
	}

	fakeClock.SetTime(failedAt.Add(10 * time.Second))
	poke(t, task)
	second := jobOf(t, task, "0", 2)
	waitJobs(t, task, 2)
	running := waitTask(t, task, "attempt 2 running", func(x *v1alpha1.Task) bool {
		return x.Status.Phase == v1alpha1.PhaseRunning && x.Status.Attempts == 2
	})
	if running.Status.RetryCount != 1 || running.Status.NextRetryTime != nil {
		t.Fatalf("status after retry: %s", statusSummary(running))
	}
	if !strings.Contains(running.Status.LastError, "connection refused by db") {
		t.Fatalf("a later pass lost the pod's output from lastError: %q", running.Status.LastError)
	}

	must(t, testutil.CompleteJob(ctx, k8s, second, fakeClock.Now()))
	done := waitTask(t, task, "phase Succeeded", phaseIs(ok))
	assertConditions(t, done, T, F, F, F)
	if done.Status.Attempts != 2 || done.Status.RetryCount != 1 || done.Status.History[0].Attempts != 2 {
		t.Fatalf("final status: %s", statusSummary(done))
	}
}

func TestExhaustedRetriesFailTheTaskWithTheLastReasonAndOutput(t *testing.T) {
	ns := newNamespace(t)
	task := newTask(ns, "doomed", testutil.MaxRetry(1), func(t *v1alpha1.Task) {
		t.Spec.Backoff = &v1alpha1.Backoff{InitialSeconds: 0, MaxSeconds: 0, Factor: 2}
	})
	must(t, k8s.Create(ctx, task))

	first := waitJobs(t, task, 1)[0]
	must(t, testutil.FailJob(ctx, k8s, &first, fakeClock.Now(), "BackoffLimitExceeded", "backoff limit"))
	waitJobs(t, task, 2)
	second := jobOf(t, task, "0", 2)
	_, err := testutil.PodOf(ctx, k8s, second, 0, testutil.Terminated(1, "line 1\nfatal: disk full"))
	must(t, err)
	must(t, testutil.FailJob(ctx, k8s, second, fakeClock.Now(), "DeadlineExceeded", "Job was active longer than specified deadline"))

	failed := waitTask(t, task, "phase Failed", phaseIs(v1alpha1.PhaseFailed))
	assertConditions(t, failed, F, T, F, T)
	assertKstatus(t, failed, kstatus.FailedStatus)
	fc := condition(failed, v1alpha1.ConditionFailed)
	if fc.Reason != string(v1alpha1.ReasonRetriesExhausted) || !strings.Contains(fc.Message, "DeadlineExceeded") {
		t.Fatalf("Failed condition: %+v", fc)
	}
	if failed.Status.Attempts != 2 || failed.Status.RetryCount != 1 {
		t.Fatalf("attempts: %s", statusSummary(failed))
	}
	if !strings.Contains(failed.Status.LastError, "DeadlineExceeded (attempt 2") || !strings.Contains(failed.Status.LastError, "fatal: disk full") {
		t.Fatalf("lastError %q", failed.Status.LastError)
	}
	if len(failed.Status.LastError) > 1024 {
		t.Fatalf("lastError is %d bytes", len(failed.Status.LastError))
	}
	if len(jobsOf(t, task)) != 2 {
		t.Fatalf("a third attempt was created")
	}
	if h := failed.Status.History[0]; !strings.Contains(h.Message, "fatal: disk full") || strings.Contains(h.Message, "Job was active") {
		t.Fatalf("history message should carry the pod's output instead of the Job's: %q", h.Message)
	}

	// Later passes change nothing: the output read once stays.
	for i := 0; i < 3; i++ {
		reconcileOnce(t, rec, task)
	}
	if again := getTask(t, task); again.ResourceVersion != failed.ResourceVersion {
		t.Fatalf("a failed Task was written again: lastError %q, history %q", again.Status.LastError, again.Status.History[0].Message)
	}
}

func TestTheRunnersBadRequestExitIsNotRetried(t *testing.T) {
	task, job := startTask(t, "bad-request", testutil.HTTP("https://example.test/hook"), testutil.MaxRetry(3))
	if job.Spec.Template.Spec.Containers[0].Image != "runner:test" {
		t.Fatalf("http Task image %s", job.Spec.Template.Spec.Containers[0].Image)
	}
	must(t, testutil.FailJob(ctx, k8s, &job, fakeClock.Now(), "PodFailurePolicy",
		"Container task for pod x failed with exit code 2 matching FailJob rule at index 1"))

	failed := waitTask(t, task, "phase Failed", phaseIs(v1alpha1.PhaseFailed))
	assertConditions(t, failed, F, T, F, T)
	if r := condition(failed, v1alpha1.ConditionFailed).Reason; r != string(v1alpha1.ReasonNotRetryable) {
		t.Fatalf("reason %s, want NotRetryable", r)
	}
	if failed.Status.Attempts != 1 || len(jobsOf(t, task)) != 1 {
		t.Fatalf("a not-retryable failure was retried: %s", statusSummary(failed))
	}
}

func TestAnAttemptWhosePodCannotStartIsStoppedAfterTheStartTimeout(t *testing.T) {
	ns := newNamespaceNow(t)
	task := createTask(t, ns, "no-image", testutil.StartTimeout(60))
	job := waitJobs(t, task, 1)[0]
	_, err := testutil.PodOf(ctx, k8s, &job, 0, testutil.Waiting("ImagePullBackOff", `Back-off pulling image "nope:1"`))
	must(t, err)

	fakeClock.SetTime(time.Now().Add(61 * time.Second))
	poke(t, task)
	failed := waitTask(t, task, "phase Failed", phaseIs(v1alpha1.PhaseFailed))
	fc := condition(failed, v1alpha1.ConditionFailed)
	if fc.Reason != string(v1alpha1.ReasonRetriesExhausted) || !strings.Contains(fc.Message, "StartTimeout") || !strings.Contains(fc.Message, "ImagePullBackOff") {
		t.Fatalf("Failed condition: %+v", fc)
	}
	stopped := jobsOf(t, task)[0]
	if !ptr.Deref(stopped.Spec.Suspend, false) || stopped.Annotations[v1alpha1.AnnotationStopReason] != "StartTimeout" || stopped.Annotations[v1alpha1.AnnotationStopTime] == "" {
		t.Fatalf("the stuck Job was not stopped the contract's way: suspend=%v annotations=%v", stopped.Spec.Suspend, stopped.Annotations)
	}
	fakeClock.SetTime(time.Now())
}

func TestReplicasRunAsOneIndexedJob(t *testing.T) {
	task, job := startTask(t, "wide", testutil.Replicas(5))
	if *job.Spec.Completions != 5 || *job.Spec.Parallelism != 5 || *job.Spec.CompletionMode != batchv1.IndexedCompletion {
		t.Fatalf("completions %d parallelism %d", *job.Spec.Completions, *job.Spec.Parallelism)
	}
	must(t, testutil.CompleteJob(ctx, k8s, &job, fakeClock.Now()))
	waitTask(t, task, "phase Succeeded", phaseIs(ok))
}

func TestRunNowReRunsAFinishedTaskOnceAndATokenPresentAtCreationDoesNot(t *testing.T) {
	task, job := startTask(t, "rerun", testutil.Annotation(v1alpha1.AnnotationRunNow, "at-creation"))
	must(t, testutil.CompleteJob(ctx, k8s, &job, fakeClock.Now()))
	done := waitTask(t, task, "phase Succeeded", phaseIs(ok))
	if done.Status.LastRunNowToken != runs.TokenHash("at-creation") {
		t.Fatalf("the token present at creation was not recorded: %q", done.Status.LastRunNowToken)
	}
	if n := len(jobsOf(t, task)); n != 1 {
		t.Fatalf("a token present at creation started an extra run: %d Jobs", n)
	}

	setRunNow(t, task, "build-42")
	runID := runs.RunNowID("build-42")
	rerun := waitTask(t, task, "the run-now run", func(x *v1alpha1.Task) bool {
		return x.Status.CurrentRun == runID && x.Status.Phase == v1alpha1.PhaseRunning
	})
	assertConditions(t, rerun, U, F, T, F)
	assertKstatus(t, rerun, kstatus.InProgressStatus)
	if rerun.Status.Attempts != 1 || rerun.Status.LastRunNowToken != runs.TokenHash("build-42") {
		t.Fatalf("rerun status: %s", statusSummary(rerun))
	}
	waitJobs(t, task, 2)
	mjob := jobOf(t, task, runID, 1)
	poke(t, task) // another pass with the same token starts nothing more
	must(t, testutil.CompleteJob(ctx, k8s, mjob, fakeClock.Now()))
	again := waitTask(t, task, "the re-run succeeded", func(x *v1alpha1.Task) bool {
		return x.Status.Phase == ok && x.Status.CurrentRun == runID
	})
	assertConditions(t, again, T, F, F, F)
	assertKstatus(t, again, kstatus.CurrentStatus)
	if len(again.Status.History) != 2 || again.Status.History[0].RunID != runID || again.Status.History[1].RunID != "0" {
		t.Fatalf("history: %+v", again.Status.History)
	}
	if n := len(jobsOf(t, task)); n != 2 {
		t.Fatalf("%d Jobs after one run-now", n)
	}
}

func TestDeletingATaskDeletesItsActiveJobsAndLetsItGo(t *testing.T) {
	task, job := startTask(t, "doomed-delete", testutil.Replicas(2))
	must(t, testutil.StartJob(ctx, k8s, &job, fakeClock.Now()))
	// The finalizer comes with the first status write, which the pass that
	// created the Job leaves to the next one; deleted before it, the Task
	// would leave its Job to the garbage collector, which envtest lacks.
	waitTask(t, task, "the finalizer", func(x *v1alpha1.Task) bool { return slices.Contains(x.Finalizers, v1alpha1.Finalizer) })

	must(t, k8s.Delete(ctx, getTask(t, task)))
	eventually(t, "the Task and its Job to be gone", func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(task), &v1alpha1.Task{})
		jobsLeft := len(jobsOf(t, task))
		return apierrors.IsNotFound(err) && jobsLeft == 0, "task err=" + errString(err) + " jobs=" + itoa(jobsLeft)
	})
}

func TestAJobTheAPIServerRefusesMakesTheSpecInvalidUntilFixed(t *testing.T) {
	ns := newNamespace(t)
	// requests above limits pass the Task schema but not Job validation.
	task := newTask(ns, "greedy", func(t *v1alpha1.Task) {
		t.Spec.Resources = &v1alpha1.Resources{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: mustQuantity("100m")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("1")},
		}
	})
	must(t, k8s.Create(ctx, task))
	bad := waitTask(t, task, "InvalidSpec", phaseIs(v1alpha1.PhaseFailed))
	assertConditions(t, bad, F, T, F, T)
	assertKstatus(t, bad, kstatus.FailedStatus)
	if c := condition(bad, v1alpha1.ConditionReady); c.Reason != string(v1alpha1.ReasonInvalidSpec) || !strings.Contains(c.Message, "requests") {
		t.Fatalf("Ready: %+v", c)
	}
	if n := len(jobsOf(t, task)); n != 0 {
		t.Fatalf("%d Jobs for an invalid spec", n)
	}
	// A pass that races the manager's own may meet a conflict (a quiet
	// requeue); the one after it must not ask to be run again.
	eventually(t, "a pass that does not requeue the invalid spec", func() (bool, string) {
		res := reconcileOnce(t, rec, task)
		return res.RequeueAfter == 0, fmt.Sprintf("requeued after %s", res.RequeueAfter)
	})

	edit(t, task, func(fixed *v1alpha1.Task) {
		fixed.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: mustQuantity("50m")}
	})
	waitJobs(t, task, 1)
	running := waitTask(t, task, "phase Running", phaseIs(v1alpha1.PhaseRunning))
	assertConditions(t, running, U, F, T, F)
}

func TestAFinishedTaskIsDeletedAfterItsTTL(t *testing.T) {
	ns := newNamespaceNow(t)
	task := createTask(t, ns, "short-lived", func(t *v1alpha1.Task) { t.Spec.TTLSecondsAfterFinished = ptr.To[int32](60) })
	job := waitJobs(t, task, 1)[0]
	finished := fakeClock.Now().Truncate(time.Second)
	must(t, testutil.CompleteJob(ctx, k8s, &job, finished))
	waitTask(t, task, "phase Succeeded", phaseIs(ok))
	if res := reconcileOnce(t, rec, task); res.RequeueAfter <= 0 || res.RequeueAfter > 60*time.Second {
		t.Fatalf("requeue after %s, want the wait until the TTL ends", res.RequeueAfter)
	}

	fakeClock.SetTime(finished.Add(61 * time.Second))
	poke(t, task)
	eventually(t, "the Task and its Job deleted", func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(task), &v1alpha1.Task{})
		n := len(jobsOf(t, task))
		return apierrors.IsNotFound(err) && n == 0, errString(err) + " jobs=" + itoa(n)
	})
	fakeClock.SetTime(time.Now())
}
