package reconciler_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/taskqueue"
	"github.com/taskops/task-operator/internal/testutil"
)

// What another party (or a later edit) does must not change a result CI
// has already acted on. The table of these cases is in
// docs/reliability.md ("What another party can do to a Task's children").

// Raising maxRetry on a Task whose run failed for good reopens nothing:
// the history that recorded the failure decides, not the Jobs alone.
func TestRaisingMaxRetryAfterARunFailedStartsNoAttempt(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "no-reopen", manual, testutil.MaxRetry(0))
	reconcileUntil(t, task, "the first Job", func(*v1alpha1.Task) bool { return len(jobsOf(t, task)) == 1 })
	job := jobsOf(t, task)[0]
	must(t, testutil.FailJob(ctx, k8s, &job, fakeClock.Now(), "BackoffLimitExceeded", "exit 3"))
	reconcileUntil(t, task, "phase Failed", phaseIs(v1alpha1.PhaseFailed))

	edited := edit(t, task, func(edited *v1alpha1.Task) {
		edited.Spec.MaxRetry = 2
	})
	reconcileUntil(t, task, "the edit seen", func(x *v1alpha1.Task) bool { return x.Status.ObservedGeneration == edited.Generation })
	cached := &v1alpha1.Task{}
	waitManualCache(t, "the edit", client.ObjectKeyFromObject(task), cached, func() bool {
		return cached.Spec.MaxRetry == 2 && cached.Status.ObservedGeneration == edited.Generation
	})
	got := passesPastBackoff(t, task)
	if n := len(jobsOf(t, task)); n != 1 || got.Status.Phase != v1alpha1.PhaseFailed || got.Status.Attempts != 1 {
		t.Fatalf("maxRetry 0 -> 2 on a failed run: %d Jobs, %s", n, statusSummary(got))
	}
}

// A stop annotation proves nothing by itself: written by hand on a running
// Job, it neither ends the attempt nor starts the next one.
func TestAStopAnnotationWrittenByHandStartsNoNextAttempt(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "hand-stopped", manual, testutil.MaxRetry(2))
	reconcileUntil(t, task, "phase Running", phaseIs(v1alpha1.PhaseRunning))
	job := jobsOf(t, task)[0]
	patchJob(t, &job, map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		v1alpha1.AnnotationStopReason: string(v1alpha1.AttemptStartTimeout),
		v1alpha1.AnnotationStopTime:   fakeClock.Now().UTC().Format(time.RFC3339)}}})
	cached := &batchv1.Job{}
	waitManualCache(t, "the annotation", client.ObjectKeyFromObject(&job), cached, func() bool {
		return cached.Annotations[v1alpha1.AnnotationStopReason] != ""
	})
	got := passesPastBackoff(t, task)
	if n := len(jobsOf(t, task)); n != 1 || got.Status.Phase != v1alpha1.PhaseRunning || got.Status.Attempts != 1 {
		t.Fatalf("a hand-written stop annotation: %d Jobs, %s", n, statusSummary(got))
	}
}

// A Job the operator stopped and someone resumed is stopped again: the
// Task says Cancelled, and its Job must not run.
func TestACancelledJobThatIsResumedIsSuspendedAgain(t *testing.T) {
	task, job := startTask(t, "resumed", testutil.MaxRetry(3))
	waitTask(t, task, "phase Running", phaseIs(v1alpha1.PhaseRunning))
	setCancel(t, task, "ci-1")
	waitTask(t, task, "the run Cancelled", cancelled)

	patchJob(t, &job, map[string]any{"spec": map[string]any{"suspend": false}})
	eventually(t, "the resumed Job suspended again", func() (bool, string) {
		j := getJob(t, &job)
		return ptr.Deref(j.Spec.Suspend, false), "suspend false"
	})
	got := getTask(t, task)
	if n := len(jobsOf(t, task)); n != 1 || !cancelled(got) || got.Status.Attempts != 1 {
		t.Fatalf("after the resume: %d Jobs, %s", n, statusSummary(got))
	}
}

// passesPastBackoff moves the clock past any backoff, runs three passes
// by hand and returns the stored Task: what a next attempt would need has
// had every chance to happen.
func passesPastBackoff(t *testing.T, task *v1alpha1.Task) *v1alpha1.Task {
	t.Helper()
	fakeClock.SetTime(fakeClock.Now().Add(time.Minute))
	r := manualReconciler(nil)
	for range 3 {
		reconcileOnce(t, r, task)
	}
	return getTask(t, task)
}

// foreignJob is a suspended Job no Task controls, as someone else would
// create it, with labels.
func foreignJob(ns, name string, labels map[string]string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "busybox:test"}}}}}}
}

// patchJob merge-patches a Job as another party would.
func patchJob(t *testing.T, job *batchv1.Job, patch map[string]any) {
	t.Helper()
	data, err := json.Marshal(patch)
	must(t, err)
	must(t, k8s.Patch(ctx, job, client.RawPatch(types.MergePatchType, data)))
}

// A stopped attempt holds its queue place until its pods are gone: in a
// queue of 1 the next Task is admitted only then, never while the stopped
// script may still run.
func TestAStoppedAttemptHoldsItsQueuePlaceUntilItsPodsAreGone(t *testing.T) {
	ns := newNamespace(t)
	q := createQueue(t, ns, "one", 1)
	first := createTask(t, ns, "first", testutil.Queue("one"))
	job := waitJobs(t, first, 1)[0]
	// The Job controller (not in envtest) would count its running pod.
	job.Status.Active, job.Status.StartTime = 1, &metav1.Time{Time: fakeClock.Now()}
	must(t, k8s.Status().Update(ctx, &job))
	second := createTask(t, ns, "second", testutil.Queue("one"))
	waitTask(t, second, "second queued", queuedAs(v1alpha1.ReasonQueued))

	setCancel(t, first, "ci-1")
	waitTask(t, first, "the first run Cancelled", cancelled)
	waitJob(t, &job, "the first Job suspended", func(j *batchv1.Job) bool { return ptr.Deref(j.Spec.Suspend, false) })
	// A queue pass that sees the stop keeps the place: the pod is still
	// there. (A second queue reconciler, on the manual cache, makes sure a
	// pass has seen it.)
	cached := &batchv1.Job{}
	waitManualCache(t, "the stopped Job", client.ObjectKeyFromObject(&job), cached, func() bool { return ptr.Deref(cached.Spec.Suspend, false) })
	queues := &taskqueue.Reconciler{Client: manualClient, APIReader: manualReader, Clock: fakeClock, Lines: manualLines}
	eventually(t, "a queue pass after the stop", func() (bool, string) {
		_, err := queues.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(q)})
		return err == nil, errString(err)
	})
	got := getQueue(t, q)
	if !slices.Contains(got.Status.Admitted, job.Name) || len(got.Status.Admitted) != 1 || len(jobsOf(t, second)) != 0 {
		t.Fatalf("the stopped attempt's place was given away while its pod ran: admitted %v", got.Status.Admitted)
	}

	stopped := getJob(t, &job)
	stopped.Status.Active = 0
	must(t, k8s.Status().Update(ctx, stopped))
	waitJobs(t, second, 1)
}

func waitJob(t *testing.T, job *batchv1.Job, what string, ok func(*batchv1.Job) bool) {
	t.Helper()
	eventually(t, what, func() (bool, string) {
		j := getJob(t, job)
		return ok(j), fmt.Sprintf("suspend %v, annotations %v", j.Spec.Suspend, j.Annotations)
	})
}

// Job names of long Task names carry a long hash (they collided between
// Tasks whose generated names share their first characters); a Job made
// under the old name before an upgrade is still the attempt, and the next
// attempt gets the new name: never a second Job for one attempt.
func TestAJobUnderTheLegacyNameOfACutTaskNameIsStillItsAttempt(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "ci-build-pipeline-for-the-billing-service-run-000000000012", manual, testutil.MaxRetry(1))
	stored := getTask(t, task)
	if jobs.LegacyName(stored, "0", 1) == jobs.Name(stored, "0", 1) {
		t.Fatal("the Task name is not cut; the test needs a longer one")
	}
	legacy := jobs.Build(stored, "0", 1, nil, nil, jobOpts)
	legacy.Name = jobs.LegacyName(stored, "0", 1)
	must(t, k8s.Create(ctx, legacy))

	got := reconcileUntil(t, task, "the legacy Job as attempt 1", func(x *v1alpha1.Task) bool {
		return x.Status.Phase == v1alpha1.PhaseRunning && x.Status.LastJobName == legacy.Name
	})
	if n := len(jobsOf(t, task)); n != 1 || got.Status.Attempts != 1 {
		t.Fatalf("after the upgrade: %d Jobs, %s", n, statusSummary(got))
	}
	must(t, testutil.FailJob(ctx, k8s, legacy, fakeClock.Now(), "BackoffLimitExceeded", "exit 3"))
	fakeClock.SetTime(fakeClock.Now().Add(time.Minute)) // past the backoff
	got = reconcileUntil(t, task, "attempt 2", func(x *v1alpha1.Task) bool { return x.Status.Attempts == 2 })
	if want := jobs.Name(stored, "0", 2); got.Status.LastJobName != want || len(jobsOf(t, task)) != 2 {
		t.Fatalf("attempt 2 is Job %s (want %s), %d Jobs", got.Status.LastJobName, want, len(jobsOf(t, task)))
	}
}

// Someone else's Job under the next attempt's name is a condition and a
// Warning event, rechecked once a minute (it was an error every pass, a
// retry loop with no word in the status); once it is gone the attempt
// starts.
func TestAForeignJobUnderTheAttemptsNameIsJobRefusedAndRecheckedSlowly(t *testing.T) {
	ns := newNamespace(t)
	task := createTask(t, ns, "squatted", manual)
	stored := getTask(t, task)
	foreign := foreignJob(ns, jobs.Name(stored, "0", 1), nil)
	must(t, k8s.Create(ctx, foreign))
	waitCached(t, task)

	r := manualReconciler(nil)
	recorder := events.NewFakeRecorder(100)
	r.Recorder = recorder
	res := reconcileOnce(t, r, task)
	got := getTask(t, task)
	assertConditions(t, got, F, F, F, T)
	if c := condition(got, v1alpha1.ConditionReady); c.Reason != string(v1alpha1.ReasonJobRefused) || !strings.Contains(c.Message, "is not this Task's") {
		t.Fatalf("Ready %+v", c)
	}
	if res.RequeueAfter != time.Minute {
		t.Fatalf("rechecked after %s, want 1m", res.RequeueAfter)
	}
	if e := <-recorder.Events; !strings.Contains(e, string(v1alpha1.EventJobRefused)) {
		t.Fatalf("event %q, want JobRefused", e)
	}

	must(t, k8s.Delete(ctx, foreign, client.PropagationPolicy(metav1.DeletePropagationBackground)))
	reconcileUntil(t, task, "the attempt started", func(x *v1alpha1.Task) bool {
		return x.Status.Phase == v1alpha1.PhaseRunning && len(jobsOf(t, task)) == 1
	})
}

// An admission policy that refuses the Task's Jobs (403) is JobRefused,
// not a retry loop; a ResourceQuota on Jobs that is used up is
// WaitingForCapacity.
func TestAPolicyOrAQuotaRefusingTheJobIsAConditionNotALoop(t *testing.T) {
	t.Run("policy", func(t *testing.T) {
		ns := newNamespace(t)
		denyJobs(t, ns)
		task := createTask(t, ns, "denied", manual)
		got := reconcileUntil(t, task, "JobRefused", readyReasonIs(v1alpha1.ReasonJobRefused))
		if c := condition(got, v1alpha1.ConditionReady); !strings.Contains(c.Message, "jobs are frozen here") || got.Status.Phase != v1alpha1.PhasePending {
			t.Fatalf("Ready %+v, phase %s", c, got.Status.Phase)
		}
	})
	t.Run("quota", func(t *testing.T) {
		ns := newNamespace(t)
		fillJobsQuota(t, ns)
		task := createTask(t, ns, "over-quota", manual)
		got := reconcileUntil(t, task, "WaitingForCapacity", readyReasonIs(v1alpha1.ReasonWaitingForCapacity))
		assertConditions(t, got, U, F, T, F)
		if c := condition(got, v1alpha1.ConditionReady); !strings.Contains(c.Message, "exceeded quota: jobs") {
			t.Fatalf("Ready %+v", c)
		}
	})
}

// denyJobs makes the API server refuse every Job created in ns (403), as
// an organisation's admission policy would.
func denyJobs(t *testing.T, ns string) {
	t.Helper()
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-jobs-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}}}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: "jobs are frozen here", Reason: ptr.To(metav1.StatusReasonForbidden)}},
		}}
	must(t, k8s.Create(ctx, policy))
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "deny-jobs-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}}}}
	must(t, k8s.Create(ctx, binding))
	t.Cleanup(func() { _ = k8s.Delete(ctx, binding); _ = k8s.Delete(ctx, policy) })
	waitJobsRefused(t, ns)
}

// fillJobsQuota gives ns a ResourceQuota of one Job that is used up (the
// quota controller, not in envtest, would record the Job that uses it),
// and waits until the API server refuses Jobs by it.
func fillJobsQuota(t *testing.T, ns string) {
	t.Helper()
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "jobs"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/jobs.batch": resource.MustParse("1")}}}
	must(t, k8s.Create(ctx, q))
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{"count/jobs.batch": resource.MustParse("1")}}
	must(t, k8s.Status().Update(ctx, q))
	waitJobsRefused(t, ns)
}

// readyReasonIs reports a Task whose Ready condition has reason.
func readyReasonIs(reason v1alpha1.Reason) func(*v1alpha1.Task) bool {
	return func(x *v1alpha1.Task) bool {
		c := condition(x, v1alpha1.ConditionReady)
		return c != nil && c.Reason == string(reason)
	}
}

// waitJobsRefused waits until the API server refuses (403) a Job in ns:
// admission plugins read policies and quotas from their own caches, which
// see the objects just written a moment later. Dry runs: nothing is
// created.
func waitJobsRefused(t *testing.T, ns string) {
	t.Helper()
	probe := foreignJob(ns, "probe", nil)
	eventually(t, "Jobs refused in "+ns, func() (bool, string) {
		err := k8s.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return apierrors.IsForbidden(err), errString(err)
	})
}

// A Job that carries a queue's label but that no Task controls takes no
// place in the queue: anyone who may create Jobs can set the label.
func TestAForeignJobWithAQueuesLabelTakesNoPlace(t *testing.T) {
	ns := newNamespace(t)
	q := createQueue(t, ns, "one", 1)
	foreign := foreignJob(ns, "not-a-task", map[string]string{v1alpha1.LabelQueue: "one", v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue})
	must(t, k8s.Create(ctx, foreign))
	task := createTask(t, ns, "queued", testutil.Queue("one"))
	waitJobs(t, task, 1)
	if got := getQueue(t, q); slices.Contains(got.Status.Admitted, foreign.Name) {
		t.Fatalf("the foreign Job holds a place: %v", got.Status.Admitted)
	}
}

// A queued Task whose admitted attempt's Job is refused gives its place
// back: its status no longer waits for the admitted attempt and no Job
// exists, so the queue releases the place and the next Task runs.
func TestARefusedQueuedAttemptGivesItsPlaceBack(t *testing.T) {
	ns := newNamespace(t)
	q := createQueue(t, ns, "one", 1)
	blocked := createTask(t, ns, "blocked", manual, testutil.Queue("one"))
	stored := getTask(t, blocked)
	// Someone else's Job under the name of blocked's first attempt.
	foreign := foreignJob(ns, jobs.Name(stored, "0", 1), nil)
	must(t, k8s.Create(ctx, foreign))
	// The operator's queue controller does not see manual Tasks: a second
	// one, on the manual cache, admits it.
	queues := &taskqueue.Reconciler{Client: manualClient, APIReader: manualReader, Clock: fakeClock, Lines: manualLines}
	tasks := manualReconciler(nil)
	eventually(t, "admitted, then JobRefused", func() (bool, string) {
		_, _ = queues.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(q)})
		_, _ = tasks.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(blocked)})
		x := getTask(t, blocked)
		return readyReasonIs(v1alpha1.ReasonJobRefused)(x), statusSummary(x)
	})
	// The place is given back: the next queue pass releases it.
	eventually(t, "the place released", func() (bool, string) {
		_, err := queues.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(q)})
		got := getQueue(t, q)
		return err == nil && len(got.Status.Admitted) == 0, fmt.Sprintf("admitted %v", got.Status.Admitted)
	})
	next := createTask(t, ns, "next", testutil.Queue("one"))
	waitJobs(t, next, 1)
}
