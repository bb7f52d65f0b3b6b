package reconciler_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

const deadlineMessage = "Job was active longer than specified deadline"

// slowAttempt creates a Task with activeDeadlineSeconds and waits for its
// attempt's pod to run, having printed the first of two steps.
func slowAttempt(t *testing.T, deadline int64) (*v1alpha1.Task, batchv1.Job, *corev1.Pod) {
	t.Helper()
	fakeClock.SetTime(time.Now())
	task, job := startTask(t, "slow", testutil.ActiveDeadline(deadline))
	ns := task.Namespace
	pod, err := testutil.PodOf(ctx, k8s, &job, 0, testutil.Running())
	must(t, err)
	podLogs.Set(ns, pod.Name, "step 1 of 2 done\n")
	return task, job, pod
}

// failsWithTheDeadlineAndItsOutput waits for the Task to fail and checks
// that lastError and the history tell the deadline and the pod's output.
func failsWithTheDeadlineAndItsOutput(t *testing.T, task *v1alpha1.Task) {
	t.Helper()
	failed := waitTask(t, task, "phase Failed", phaseIs(v1alpha1.PhaseFailed))
	if le := failed.Status.LastError; !strings.Contains(le, "DeadlineExceeded (attempt 1") || !strings.Contains(le, "step 1 of 2 done") {
		t.Fatalf("lastError %q, want the deadline and the pod's last output", le)
	}
	if h := failed.Status.History[0]; !strings.Contains(h.Message, "step 1 of 2 done") {
		t.Fatalf("history message %q, want the pod's last output", h.Message)
	}
}

// At its deadline the operator reads what the attempt's still-running pod
// printed, keeps it on the Job, and only then stops the attempt
// (DeadlineExceeded): a script that ends at SIGTERM would leave nothing to
// read if the pods were killed first. lastError and the history tell how
// far the attempt got.
func TestAtItsDeadlineAnAttemptIsStoppedAfterWhatItsPodPrintedIsKept(t *testing.T) {
	task, job, _ := slowAttempt(t, 30)
	if a := getJob(t, &job).Annotations[v1alpha1.AnnotationStopReason]; a != "" {
		t.Fatalf("stopped (%s) before its deadline", a)
	}

	fakeClock.SetTime(job.CreationTimestamp.Add(31 * time.Second))
	poke(t, task)
	eventually(t, "the attempt stopped at its deadline with the pod's output on the Job", func() (bool, string) {
		j := getJob(t, &job)
		out, reason := j.Annotations[v1alpha1.AnnotationOutput], j.Annotations[v1alpha1.AnnotationStopReason]
		return reason == string(v1alpha1.AttemptDeadlineExceeded) && strings.Contains(out, "step 1 of 2 done") && ptr.Deref(j.Spec.Suspend, false),
			fmt.Sprintf("stop reason %q, output %q", reason, out)
	})
	failsWithTheDeadlineAndItsOutput(t, task)
}

// The Job's own deadline is the backstop for when no operator runs: at it
// the Job controller first sets FailureTarget and deletes the pods, and
// marks the Job Failed only once they are gone. The operator reads what
// the still-running pod printed in between and keeps it on the Job.
func TestAnAttemptTheJobControllerFailsForItsDeadlineKeepsWhatItsStillRunningPodPrinted(t *testing.T) {
	task, job, pod := slowAttempt(t, 600)

	must(t, testutil.FailingJob(ctx, k8s, &job, fakeClock.Now(), "DeadlineExceeded", deadlineMessage))
	eventually(t, "the pod's output recorded on the Job", func() (bool, string) {
		out := getJob(t, &job).Annotations[v1alpha1.AnnotationOutput]
		return strings.Contains(out, "step 1 of 2 done") && strings.Contains(out, pod.Name), fmt.Sprintf("output annotation %q", out)
	})
	if st := getTask(t, task).Status; st.Phase != v1alpha1.PhaseRunning && st.Phase != v1alpha1.PhasePending {
		t.Fatalf("phase %q while the Job is only being failed; want it still in progress", st.Phase)
	}

	// The Job controller deletes the pod, then marks the Job Failed.
	must(t, k8s.Delete(ctx, pod))
	must(t, testutil.FailJob(ctx, k8s, &job, fakeClock.Now(), "DeadlineExceeded", deadlineMessage))
	failsWithTheDeadlineAndItsOutput(t, task)
}

// Without a pod left to read (or nothing printed) the attempt fails with
// the Job's own message, and the Job is not annotated.
func TestAnAttemptFailedForItsDeadlineWithNoPodLeftKeepsTheJobsMessage(t *testing.T) {
	fakeClock.SetTime(time.Now())
	task, job := startTask(t, "gone", testutil.ActiveDeadline(600))
	must(t, testutil.FailingJob(ctx, k8s, &job, fakeClock.Now(), "DeadlineExceeded", deadlineMessage))
	must(t, testutil.FailJob(ctx, k8s, &job, fakeClock.Now(), "DeadlineExceeded", deadlineMessage))
	failed := waitTask(t, task, "phase Failed", phaseIs(v1alpha1.PhaseFailed))
	if !strings.Contains(failed.Status.LastError, deadlineMessage) {
		t.Fatalf("lastError %q, want the Job's message", failed.Status.LastError)
	}
	if out, ok := getJob(t, &job).Annotations[v1alpha1.AnnotationOutput]; ok {
		t.Fatalf("the Job got an output annotation %q with no pod to read", out)
	}
}
