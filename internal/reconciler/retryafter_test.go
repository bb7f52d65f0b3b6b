package reconciler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/httprunner"
	"github.com/taskops/task-operator/internal/testutil"
)

func TestAnHTTPAttemptThrottledWithRetryAfterIsRetriedNoSoonerThanTheServerAsked(t *testing.T) {
	task, job := startTask(t, "throttled", testutil.HTTP("https://example.com/hook"), testutil.Retries(2, 1, 300, 2))
	failedAt := fakeClock.Now().Truncate(time.Second)
	msg := "result:    unexpected status (exit 1)\nstatus:    503 Service Unavailable (expected any 2xx)\n" +
		httprunner.ResultDataPrefix + `{"retryAfterSeconds":30}` + "\n"
	_, err := testutil.PodOf(ctx, k8s, &job, 0, testutil.Terminated(1, msg))
	must(t, err)
	must(t, testutil.FailJob(ctx, k8s, &job, failedAt, "BackoffLimitExceeded", "Job has reached the specified backoff limit"))

	got := waitTask(t, task, "phase Retrying", phaseIs(v1alpha1.PhaseRetrying))
	if want := failedAt.Add(30 * time.Second); got.Status.NextRetryTime == nil || !got.Status.NextRetryTime.Time.Equal(want) {
		t.Fatalf("nextRetryTime %v, want %s (Retry-After 30 s, not the 1 s backoff)", got.Status.NextRetryTime, want)
	}
	if strings.Contains(got.Status.LastError, httprunner.ResultDataPrefix) || !strings.Contains(got.Status.LastError, "503") {
		t.Fatalf("lastError %q: want the summary without the structured line", got.Status.LastError)
	}
	if a := getJob(t, &job).Annotations[v1alpha1.AnnotationRetryAfter]; a != "30" {
		t.Fatalf("the Job's retry-after annotation is %q, want 30", a)
	}
	fakeClock.SetTime(failedAt.Add(29 * time.Second))
	poke(t, task)
	reconcileOnce(t, rec, task)
	if n := len(jobsOf(t, task)); n != 1 {
		t.Fatalf("attempt 2 started before the server's Retry-After: %d Jobs", n)
	}
	fakeClock.SetTime(failedAt.Add(30 * time.Second))
	poke(t, task)
	waitJobs(t, task, 2)
}
