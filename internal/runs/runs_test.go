package runs_test

import (
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

var t0 = time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)

const owner = types.UID("task-uid")

// job is a child Job of attempt n of run id, created at created.
func job(id string, n string, created time.Time, opts ...func(*batchv1.Job)) batchv1.Job {
	j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Name:              "t-" + id + "-" + n,
		CreationTimestamp: metav1.NewTime(created),
		Labels:            map[string]string{v1alpha1.LabelRun: id, v1alpha1.LabelAttempt: n},
		Annotations:       map[string]string{v1alpha1.AnnotationGeneration: "3"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "Task", Name: "t",
			UID: owner, Controller: ptr.To(true)}},
	}}
	for _, o := range opts {
		o(&j)
	}
	return j
}

func withCondition(typ batchv1.JobConditionType, reason, message string, at time.Time) func(*batchv1.Job) {
	return func(j *batchv1.Job) {
		j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue,
			Reason: reason, Message: message, LastTransitionTime: metav1.NewTime(at)})
	}
}

// suspended is a Job with spec.suspend: true.
func suspended(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }

func withAnnotation(k, v string) func(*batchv1.Job) {
	return func(j *batchv1.Job) { j.Annotations[k] = v }
}

func TestFromJobsGroupsAttemptsIntoRunsOldestFirst(t *testing.T) {
	slot := t0.Add(-time.Hour)
	stranger := job("0", "1", t0, func(j *batchv1.Job) { j.OwnerReferences[0].UID = "other" })
	unlabelled := job("0", "1", t0, func(j *batchv1.Job) { delete(j.Labels, v1alpha1.LabelAttempt) })
	got := runs.FromJobs(owner, []batchv1.Job{
		job("m1", "1", t0.Add(time.Minute)),
		job("0", "2", t0.Add(time.Second)),
		job("0", "1", t0),
		job(runs.ScheduledID(slot), "1", t0, withAnnotation(v1alpha1.AnnotationScheduledTime, slot.Format(time.RFC3339))),
		stranger, unlabelled,
	})
	if len(got) != 3 {
		t.Fatalf("got %d runs, want 3 (Jobs of another owner or without labels are not ours): %+v", len(got), got)
	}
	if got[0].ID != "0" || got[1].ID != runs.ScheduledID(slot) || got[2].ID != "m1" {
		t.Errorf("runs %s, %s, %s; want 0 first on a tie, then the slot, then m1", got[0].ID, got[1].ID, got[2].ID)
	}
	if n := got[0].Attempts; len(n) != 2 || n[0].Number != 1 || n[1].Number != 2 {
		t.Errorf("run 0 attempts %+v, want 1 then 2", n)
	}
	if got[1].Scheduled == nil || !got[1].Scheduled.Equal(slot) {
		t.Errorf("scheduled %v, want %s", got[1].Scheduled, slot)
	}
	if got[0].Attempts[0].Generation != 3 {
		t.Errorf("generation %d, want 3", got[0].Attempts[0].Generation)
	}
}

func TestAttemptOfReadsWhatTheJobSays(t *testing.T) {
	done := t0.Add(time.Minute)
	tests := []struct {
		name    string
		job     batchv1.Job
		phase   runs.Phase
		reason  v1alpha1.Reason
		failing v1alpha1.Reason
	}{
		{"a Job without conditions is active", job("0", "1", t0), runs.Active, "", ""},
		{"a complete Job succeeded", job("0", "1", t0, withCondition(batchv1.JobComplete, "", "", done)), runs.Succeeded, "", ""},
		{"a pod failure fails the attempt", job("0", "1", t0, withCondition(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "", done)),
			runs.Failed, v1alpha1.AttemptPodFailed, ""},
		{"the deadline fails it with DeadlineExceeded", job("0", "1", t0, withCondition(batchv1.JobFailed, batchv1.JobReasonDeadlineExceeded, "", done)),
			runs.Failed, v1alpha1.AttemptDeadlineExceeded, ""},
		{"the pod failure policy's FailJob rule is not retryable",
			job("0", "1", t0, withCondition(batchv1.JobFailed, batchv1.JobReasonPodFailurePolicy, "Container task for pod x failed with exit code 2 matching FailJob rule at index 0", done)),
			runs.Failed, v1alpha1.AttemptNotRetryable, ""},
		{"a Job being failed for its deadline is still active, and failing",
			job("0", "1", t0, withCondition(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, "", done)),
			runs.Active, "", v1alpha1.AttemptDeadlineExceeded},
		{"a Job the operator stopped (suspended) is stopped, with the reason it gave",
			job("0", "1", t0, withAnnotation(v1alpha1.AnnotationStopReason, string(v1alpha1.AttemptStartTimeout)),
				withAnnotation(v1alpha1.AnnotationStopTime, done.Format(time.RFC3339)), suspended),
			runs.Stopped, v1alpha1.AttemptStartTimeout, ""},
		{"a failed Job the operator stopped in its backoff is stopped",
			job("0", "1", t0, withAnnotation(v1alpha1.AnnotationStopReason, string(v1alpha1.AttemptCancelled)),
				withAnnotation(v1alpha1.AnnotationStopTime, done.Format(time.RFC3339)),
				withCondition(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "", done)),
			runs.Stopped, v1alpha1.AttemptCancelled, ""},
		{"a stop annotation on a Job that runs (resumed, or written by hand) proves nothing: active",
			job("0", "1", t0, withAnnotation(v1alpha1.AnnotationStopReason, string(v1alpha1.AttemptCancelled))),
			runs.Active, "", ""},
		{"a Job that completed before its stop took effect succeeded",
			job("0", "1", t0, withAnnotation(v1alpha1.AnnotationStopReason, string(v1alpha1.AttemptReplaced)),
				withCondition(batchv1.JobComplete, "", "", done)),
			runs.Succeeded, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := runs.AttemptOf(&tt.job, 1)
			if a.Phase != tt.phase || a.Reason != tt.reason || a.Failing != tt.failing {
				t.Errorf("phase %s reason %q failing %q, want %s %q %q", a.Phase, a.Reason, a.Failing, tt.phase, tt.reason, tt.failing)
			}
			if a.Phase != runs.Active && !a.Finished.Equal(done) {
				t.Errorf("finished %s, want %s", a.Finished, done)
			}
		})
	}
}

// The exit code of an attempt whose pods are not here to read (a
// MultiKueue worker ran them, or they are gone) is in its Job's Failed
// condition, written by the pod failure policy rule that matched; the
// rule says whether it may be retried.
func TestAFailedJobsConditionGivesTheExitCodeAndWhetherToRetry(t *testing.T) {
	done := t0.Add(time.Minute)
	rule := func(code, index int) string {
		return fmt.Sprintf("Container task for pod team/x-0-abc failed with exit code %d matching FailJob rule at index %d", code, index)
	}
	retryableAt := func(i string) func(*batchv1.Job) { return withAnnotation(v1alpha1.AnnotationRetryableExitRule, i) }
	tests := []struct {
		name   string
		job    batchv1.Job
		phase  runs.Phase
		reason v1alpha1.Reason // Reason when Failed, Failing when Active
		exit   *int32
	}{
		{"a complete Job's pods all exited 0", job("0", "1", t0, withCondition(batchv1.JobComplete, "", "", done)), runs.Succeeded, "", ptr.To[int32](0)},
		{"the retryable rule the annotation names: PodFailed with its exit code",
			job("0", "1", t0, retryableAt("2"), withCondition(batchv1.JobFailed, batchv1.JobReasonPodFailurePolicy, rule(3, 2), done)),
			runs.Failed, v1alpha1.AttemptPodFailed, ptr.To[int32](3)},
		{"another FailJob rule: NotRetryable with its exit code",
			job("0", "1", t0, retryableAt("2"), withCondition(batchv1.JobFailed, batchv1.JobReasonPodFailurePolicy, rule(64, 1), done)),
			runs.Failed, v1alpha1.AttemptNotRetryable, ptr.To[int32](64)},
		{"a Job made before the retryable rule existed: every FailJob is NotRetryable",
			job("0", "1", t0, withCondition(batchv1.JobFailed, batchv1.JobReasonPodFailurePolicy, rule(3, 1), done)),
			runs.Failed, v1alpha1.AttemptNotRetryable, ptr.To[int32](3)},
		{"a message of another form on a Job with a retryable rule: retried, no exit code",
			job("0", "1", t0, retryableAt("1"), withCondition(batchv1.JobFailed, batchv1.JobReasonPodFailurePolicy, "FailJob matched", done)),
			runs.Failed, v1alpha1.AttemptPodFailed, nil},
		{"the backoff limit (a pod failed without an exit code, say): PodFailed, no exit code",
			job("0", "1", t0, retryableAt("1"), withCondition(batchv1.JobFailed, batchv1.JobReasonBackoffLimitExceeded, "", done)),
			runs.Failed, v1alpha1.AttemptPodFailed, nil},
		{"a Job being failed by the retryable rule is active, failing PodFailed",
			job("0", "1", t0, retryableAt("1"), withCondition(batchv1.JobFailureTarget, batchv1.JobReasonPodFailurePolicy, rule(3, 1), done)),
			runs.Active, v1alpha1.AttemptPodFailed, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := runs.AttemptOf(&tt.job, 1)
			reason := a.Reason
			if a.Phase == runs.Active {
				reason = a.Failing
			}
			if a.Phase != tt.phase || reason != tt.reason || !ptr.Equal(a.ExitCode, tt.exit) {
				t.Errorf("phase %s reason %q exit %v, want %s %q %v", a.Phase, reason, ptr.Deref(a.ExitCode, -1), tt.phase, tt.reason, ptr.Deref(tt.exit, -1))
			}
		})
	}
}

func TestPodsStartedCountsReadyAndFinishedPodsAgainstCompletions(t *testing.T) {
	j := job("0", "1", t0, func(j *batchv1.Job) {
		j.Spec.Completions = ptr.To[int32](3)
		j.Status.Ready, j.Status.Succeeded = ptr.To[int32](1), 1
	})
	if runs.AttemptOf(&j, 1).PodsStarted {
		t.Error("2 of 3 pods started, yet PodsStarted")
	}
	j.Status.Failed = 1
	if !runs.AttemptOf(&j, 1).PodsStarted {
		t.Error("3 of 3 pods started, yet not PodsStarted")
	}
}

// A Job's start (status.startTime) counts as its start even within the
// second it was created (Kueue admitting it at once): "admitted, not
// started yet" would otherwise last for ever, and no start timeout or
// deadline would run.
func TestAStartInTheSecondOfCreationIsAStart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start *metav1.Time
		want  time.Time
	}{
		{"no start yet", nil, time.Time{}},
		{"started in the second of its creation", ptr.To(metav1.NewTime(t0)), t0},
		{"resumed later", ptr.To(metav1.NewTime(t0.Add(time.Minute))), t0.Add(time.Minute)},
	} {
		j := job("0", "1", t0, func(j *batchv1.Job) { j.Status.StartTime = tc.start })
		if got := runs.AttemptOf(&j, 1).Resumed; !got.Equal(tc.want) {
			t.Errorf("%s: Resumed %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A Job another controller runs (spec.managedBy: MultiKueue) is remote;
// one the Job controller runs, named or by default, is not.
func TestAJobManagedElsewhereIsRemote(t *testing.T) {
	for _, tc := range []struct {
		managedBy *string
		remote    bool
	}{{nil, false}, {ptr.To(batchv1.JobControllerName), false}, {ptr.To(v1alpha1.MultiKueueManagedBy), true}} {
		j := job("0", "1", t0, func(j *batchv1.Job) { j.Spec.ManagedBy = tc.managedBy })
		if got := runs.AttemptOf(&j, 1).Remote; got != tc.remote {
			t.Errorf("managedBy %v: Remote %v, want %v", ptr.Deref(tc.managedBy, "<unset>"), got, tc.remote)
		}
	}
}

func TestAddAttemptKeepsRunsAndAttemptsInOrder(t *testing.T) {
	rs := runs.FromJobs(owner, []batchv1.Job{job("0", "2", t0.Add(time.Minute))})
	rs = runs.AddAttempt(rs, "0", nil, runs.Attempt{Number: 1, JobName: "t-0-1", Created: t0})
	rs = runs.AddAttempt(rs, "0", nil, runs.Attempt{Number: 1, JobName: "duplicate", Created: t0})
	rs = runs.AddAttempt(rs, "m1", nil, runs.Attempt{Number: 1, JobName: "t-m1-1", Created: t0.Add(-time.Hour)})
	if len(rs) != 2 || rs[0].ID != "m1" || rs[1].ID != "0" {
		t.Fatalf("runs %+v, want m1 (older) then 0", rs)
	}
	if a := rs[1].Attempts; len(a) != 2 || a[0].JobName != "t-0-1" || a[1].Number != 2 {
		t.Errorf("run 0 attempts %+v, want 1 (the first one added) then 2", a)
	}
}

func TestCloneIsIndependent(t *testing.T) {
	rs := runs.FromJobs(owner, []batchv1.Job{job("0", "1", t0)})
	c := runs.Clone(rs)
	c[0].Latest().Stop(v1alpha1.AttemptReplaced, "x", t0)
	if rs[0].Latest().Phase != runs.Active {
		t.Error("changing the clone changed the original")
	}
}
