//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// (a) A shell Task that succeeds: `kubectl wait --for=condition=Ready`
// returns, status, Job and pod say what the contract says, and `kubectl
// task logs` prints what the container really printed.
func TestTaskSucceeds(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-success")
	task := testutil.NewTask(ns, "hello", testutil.Shell(`echo "hello from e2e as $(id -u):$(id -g)"`))
	start := time.Now()
	create(t, task)
	waited := kubectlWait(t, ns, "condition=Ready", "task/hello", 60*time.Second)
	t.Logf("kubectl wait --for=condition=Ready task/hello returned %s after the Task was created (it blocked %s)", harness.Secs(time.Since(start)), harness.Secs(waited))

	task = mustGetTask(t, ns, "hello")
	st := task.Status
	if st.Phase != v1alpha1.PhaseSucceeded || st.Attempts != 1 || st.RetryCount != 0 || st.CurrentRun != "0" {
		t.Errorf("status: phase %q attempts %d retryCount %d currentRun %q; want Succeeded 1 0 \"0\"", st.Phase, st.Attempts, st.RetryCount, st.CurrentRun)
	}
	expectCondition(t, task, v1alpha1.ConditionReady, metav1.ConditionTrue, string(v1alpha1.ReasonSucceeded))
	expectCondition(t, task, v1alpha1.ConditionFailed, metav1.ConditionFalse, "")
	expectCondition(t, task, v1alpha1.ConditionReconciling, metav1.ConditionFalse, "")
	expectCondition(t, task, v1alpha1.ConditionStalled, metav1.ConditionFalse, "")
	if st.ObservedGeneration != task.Generation {
		t.Errorf("observedGeneration %d, want %d", st.ObservedGeneration, task.Generation)
	}
	if st.LastError != "" {
		t.Errorf("lastError %q, want empty", st.LastError)
	}
	if len(st.History) != 1 || st.History[0].Result != v1alpha1.RunResultSucceeded || st.History[0].Attempts != 1 || st.History[0].RunID != "0" {
		t.Errorf("history %+v, want one run 0 Succeeded after 1 attempt", st.History)
	}
	if !harness.HasFinalizer(task) {
		t.Errorf("finalizers %v, want %s", task.Finalizers, v1alpha1.Finalizer)
	}

	ctx := ctxFor(t, 20*time.Second)
	jobs, err := harness.JobsOf(ctx, env.c, ns, "hello")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Fatalf("%d Jobs, want 1", len(jobs))
	}
	job := jobs[0]
	want := map[string]string{v1alpha1.LabelTask: "hello", v1alpha1.LabelRun: "0", v1alpha1.LabelAttempt: "1", v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue}
	for k, v := range want {
		if job.Labels[k] != v {
			t.Errorf("Job %s: label %s=%q, want %q", job.Name, k, job.Labels[k], v)
		}
		if job.Spec.Template.Labels[k] != v {
			t.Errorf("Job %s pod template: label %s=%q, want %q", job.Name, k, job.Spec.Template.Labels[k], v)
		}
	}
	if len(job.Name) > 60 || job.Name != st.LastJobName {
		t.Errorf("Job name %q (%d chars), lastJobName %q", job.Name, len(job.Name), st.LastJobName)
	}
	if ref := metav1.GetControllerOf(&job); ref == nil || ref.UID != task.UID {
		t.Errorf("Job %s controller %v, want the Task (uid %s)", job.Name, ref, task.UID)
	}
	if job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0 {
		t.Errorf("Job %s backoffLimit %v, want 0", job.Name, job.Spec.BackoffLimit)
	}
	pods, err := harness.PodsOf(ctx, env.c, ns, "hello")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 1 || pods[0].Status.Phase != corev1.PodSucceeded {
		t.Errorf("pods %v, want one Succeeded pod", harness.PodPhases(pods))
	}
	if logs := kubectlTask(t, 30*time.Second, "logs", "hello", "-n", ns); !strings.Contains(logs, "hello from e2e as 65532:65532") {
		t.Errorf("kubectl task logs hello printed %q, want the container's real output (run as 65532:65532)", logs)
	}
}

// (b) Every attempt fails (the shell exits 3 after writing to stderr):
// after maxRetry 2 the Task is Failed with 3 attempts, three real pods ran,
// and lastError holds the real stderr tail and exit code.
func TestTaskFailsAfterRetries(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-retries")
	const msg = "e2e: could not reach the database"
	create(t, testutil.NewTask(ns, "doomed", testutil.Retries(2, 1, 10, 2), testutil.Shell(`echo "starting"; echo "`+msg+`" >&2; exit 3`)))
	waited := kubectlWait(t, ns, "condition=Failed", "task/doomed", 90*time.Second)
	t.Logf("kubectl wait --for=condition=Failed task/doomed returned after %s (3 attempts, backoff 1 s then 2 s)", harness.Secs(waited))

	task := mustGetTask(t, ns, "doomed")
	st := task.Status
	if st.Phase != v1alpha1.PhaseFailed || st.Attempts != 3 || st.RetryCount != 2 {
		t.Errorf("status: phase %q attempts %d retryCount %d; want Failed 3 2", st.Phase, st.Attempts, st.RetryCount)
	}
	expectCondition(t, task, v1alpha1.ConditionFailed, metav1.ConditionTrue, string(v1alpha1.ReasonRetriesExhausted))
	expectCondition(t, task, v1alpha1.ConditionReady, metav1.ConditionFalse, "")
	expectCondition(t, task, v1alpha1.ConditionStalled, metav1.ConditionTrue, "")
	expectCondition(t, task, v1alpha1.ConditionReconciling, metav1.ConditionFalse, "")
	for _, s := range []string{msg, string(v1alpha1.AttemptPodFailed), "code 3", "attempt 3"} {
		if !strings.Contains(st.LastError, s) {
			t.Errorf("lastError %q does not contain %q", st.LastError, s)
		}
	}
	if len(st.LastError) > 1024 {
		t.Errorf("lastError has %d bytes, more than 1 KiB", len(st.LastError))
	}
	if len(st.History) != 1 || st.History[0].Result != v1alpha1.RunResultFailed || st.History[0].Attempts != 3 {
		t.Errorf("history %+v, want one Failed run with 3 attempts", st.History)
	}

	// One Job per attempt, each started no earlier than its backoff allows
	// (times have 1 s resolution).
	jobs, err := harness.JobsOf(ctxFor(t, 10*time.Second), env.c, ns, "doomed")
	if err != nil {
		t.Fatal(err)
	}
	byAttempt := map[int]batchv1.Job{}
	for _, j := range jobs {
		n, _ := strconv.Atoi(j.Labels[v1alpha1.LabelAttempt])
		if _, dup := byAttempt[n]; dup {
			t.Errorf("two Jobs for attempt %d", n)
		}
		byAttempt[n] = j
	}
	if len(byAttempt) != 3 {
		t.Fatalf("Jobs for attempts %v, want 1, 2, 3", keys(byAttempt))
	}
	for n, delay := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second} {
		prev, next := byAttempt[n], byAttempt[n+1]
		failed := harness.JobCondition(&prev, batchv1.JobFailed)
		if failed == nil {
			t.Errorf("Job %s of attempt %d has no Failed condition", prev.Name, n)
			continue
		}
		gap := next.CreationTimestamp.Sub(failed.LastTransitionTime.Time)
		t.Logf("attempt %d failed at %s, attempt %d created %s later (backoff %s)", n, failed.LastTransitionTime.Format(time.TimeOnly), n+1, gap, delay)
		if gap < delay-time.Second {
			t.Errorf("attempt %d started %s after attempt %d failed; backoff is %s", n+1, gap, n, delay)
		}
	}
}

// (c) A pod that never starts (an image that does not exist, pulled from a
// loopback port where nothing listens): after startTimeoutSeconds the
// attempt is stopped and, with no retries left, the Task fails with
// RetriesExhausted naming StartTimeout and the pull error.
// startTimeoutOnABusyNode is the start timeout of the tests that want a
// start timeout to name why a pod did not start: on a 2-core machine whose
// cores are busy, the kubelet had not yet tried the image pull (no waiting
// reason, no event: "Pending") 5 s after the pod's creation.
const startTimeoutOnABusyNode = 15

func TestStartTimeout(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-start")
	start := time.Now()
	create(t, testutil.NewTask(ns, "stuck", testutil.StartTimeout(startTimeoutOnABusyNode), testutil.Image(missingImage)))
	waited := kubectlWait(t, ns, "condition=Failed", "task/stuck", 60*time.Second)
	elapsed := time.Since(start)
	t.Logf("Failed %s after creation (startTimeoutSeconds %d; kubectl wait blocked %s)", harness.Secs(elapsed), startTimeoutOnABusyNode, harness.Secs(waited))
	// The timeout counts from the pod's creationTimestamp, which has 1 s
	// resolution (truncated), so it can end up to a second early.
	if elapsed < time.Duration(startTimeoutOnABusyNode-1)*time.Second {
		t.Errorf("failed after %s, well before the %d s start timeout", elapsed, startTimeoutOnABusyNode)
	}

	task := mustGetTask(t, ns, "stuck")
	expectCondition(t, task, v1alpha1.ConditionFailed, metav1.ConditionTrue, string(v1alpha1.ReasonRetriesExhausted))
	msg := harness.Cond(task, v1alpha1.ConditionFailed).Message
	if !strings.Contains(msg, string(v1alpha1.AttemptStartTimeout)) || !strings.Contains(task.Status.LastError, string(v1alpha1.AttemptStartTimeout)) {
		t.Errorf("Failed condition message %q / lastError %q do not mention %s", msg, task.Status.LastError, v1alpha1.AttemptStartTimeout)
	}
	// The best cause: the container's waiting reason (ErrImagePull, then
	// ImagePullBackOff), or, when the kubelet has not put one in the
	// container status yet (a busy machine), its newest Warning event
	// ("Failed to pull image ...", "Error: ErrImagePull"); never just
	// "Pending".
	if !strings.Contains(task.Status.LastError, "ImagePull") && !strings.Contains(task.Status.LastError, missingImage) {
		t.Errorf("lastError %q does not name the pull error (ErrImagePull / ImagePullBackOff, or the image)", task.Status.LastError)
	}
	if task.Status.Phase != v1alpha1.PhaseFailed || task.Status.Attempts != 1 {
		t.Errorf("phase %q attempts %d, want Failed 1", task.Status.Phase, task.Status.Attempts)
	}

	// The attempt was stopped the contract's way: Job suspended and
	// annotated, kept as a record; its pod ends.
	jobs, err := harness.JobsOf(ctxFor(t, 10*time.Second), env.c, ns, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Fatalf("%d Jobs, want 1", len(jobs))
	}
	job := jobs[0]
	if job.Spec.Suspend == nil || !*job.Spec.Suspend || job.Annotations[v1alpha1.AnnotationStopReason] != string(v1alpha1.AttemptStartTimeout) {
		t.Errorf("Job %s: suspend %v, stop reason %q; want suspended with %s", job.Name, job.Spec.Suspend, job.Annotations[v1alpha1.AnnotationStopReason], v1alpha1.AttemptStartTimeout)
	}
	gone := eventually(t, 30*time.Second, "the stuck pod to be deleted", func(ctx context.Context) (bool, string) {
		pods, err := harness.PodsOf(ctx, env.c, ns, "stuck")
		if err != nil {
			return false, err.Error()
		}
		return len(pods) == 0, fmt.Sprintf("pods %v", harness.PodPhases(pods))
	})
	t.Logf("the stuck pod was gone %s after the Task failed", harness.Secs(gone))
}

// (d) Deleting a Task whose Job is running deletes the Job and its pod,
// and the finalizer lets the Task go.
func TestDeleteTaskWithRunningJob(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-delete")
	create(t, testutil.NewTask(ns, "forever", testutil.Shell(runsUntilStopped)))
	running := eventually(t, 60*time.Second, "the Task's pod to run", func(ctx context.Context) (bool, string) {
		pods, err := harness.PodsOf(ctx, env.c, ns, "forever")
		if err != nil {
			return false, err.Error()
		}
		task, err := harness.GetTask(ctx, env.c, ns, "forever")
		if err != nil {
			return false, err.Error()
		}
		return len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning && task.Status.Phase == v1alpha1.PhaseRunning,
			fmt.Sprintf("pods %v, Task phase %q", harness.PodPhases(pods), task.Status.Phase)
	})
	t.Logf("pod Running and Task phase Running %s after creation", harness.Secs(running))
	task := mustGetTask(t, ns, "forever")
	if !harness.HasFinalizer(task) {
		t.Fatalf("finalizers %v, want %s", task.Finalizers, v1alpha1.Finalizer)
	}

	start := time.Now()
	if err := env.c.Delete(ctxFor(t, 10*time.Second), task); err != nil {
		t.Fatal(err)
	}
	var taskGone, jobsGone time.Duration
	all := eventually(t, 60*time.Second, "the Task, its Jobs and its pods to be gone", func(ctx context.Context) (bool, string) {
		_, err := harness.GetTask(ctx, env.c, ns, "forever")
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err.Error()
		}
		if apierrors.IsNotFound(err) && taskGone == 0 {
			taskGone = time.Since(start)
		}
		jobs, err := harness.JobsOf(ctx, env.c, ns, "forever")
		if err != nil {
			return false, err.Error()
		}
		if len(jobs) == 0 && jobsGone == 0 {
			jobsGone = time.Since(start)
		}
		pods, err := harness.PodsOf(ctx, env.c, ns, "forever")
		if err != nil {
			return false, err.Error()
		}
		return taskGone > 0 && len(jobs) == 0 && len(pods) == 0,
			fmt.Sprintf("Task gone %v, %d Jobs, pods %v", taskGone > 0, len(jobs), harness.PodPhases(pods))
	})
	t.Logf("after the delete: Task gone in %s, Jobs in %s, pods in %s", harness.Secs(taskGone), harness.Secs(jobsGone), harness.Secs(all))
}

// The e2e namespaces enforce the restricted Pod Security Standard: a pod
// that breaks it is refused there, and the operator's Job pods are admitted.
func TestPodSecurityRestricted(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "e2e-pss")

	// Control: the namespace really enforces the policy.
	bad := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "root-pod"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.37"}}},
	}
	err := env.c.Create(ctxFor(t, 10*time.Second), bad, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Fatalf("a pod without a security context was not refused in %s (err: %v): the namespace does not enforce restricted", ns, err)
	}

	start := time.Now()
	create(t, testutil.NewTask(ns, "wide", testutil.Replicas(3), testutil.Shell(`echo "index=$JOB_COMPLETION_INDEX"`)))
	kubectlWait(t, ns, "condition=Ready", "task/wide", 60*time.Second)
	t.Logf("a 3-replica Task was Ready %s after creation", harness.Secs(time.Since(start)))

	ctx := ctxFor(t, 20*time.Second)
	pods, err := harness.PodsOf(ctx, env.c, ns, "wide")
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 3 {
		t.Errorf("pods %v, want 3 (one per replica)", harness.PodPhases(pods))
	}
	indexes := map[string]bool{}
	for _, p := range pods {
		sc := p.Spec.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("pod %s: securityContext %+v, want runAsNonRoot", p.Name, sc)
		}
		if env.cluster.RealNode() {
			indexes[strings.TrimSpace(kubectl(t, 20*time.Second, "logs", "-n", ns, p.Name))] = true
		}
	}
	if env.cluster.RealNode() && !(len(indexes) == 3 && indexes["index=0"] && indexes["index=1"] && indexes["index=2"]) {
		t.Errorf("the 3 real pods printed %v, want index=0, index=1 and index=2 (distinct JOB_COMPLETION_INDEX)", keysOf(indexes))
	}
	var events corev1.EventList
	if err := env.c.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == "FailedCreate" {
			t.Errorf("event %s on %s/%s: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
	}
	jobs, err := harness.JobsOf(ctx, env.c, ns, "wide")
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		for _, c := range j.Status.Conditions {
			if c.Reason == "FailedCreate" || strings.Contains(c.Message, "PodSecurity") {
				t.Errorf("Job %s condition %s: %s: %s", j.Name, c.Type, c.Reason, c.Message)
			}
		}
	}
}

func keys[V any](m map[int]V) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
