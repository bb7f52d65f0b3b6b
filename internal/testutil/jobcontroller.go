package testutil

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
)

// The Job controller's stand-in. envtest runs no Job controller, so tests
// write Job status themselves, the way kube-apiserver v1.37 validates it:
// Complete=True needs SuccessCriteriaMet=True, Failed=True needs
// FailureTarget=True, a finished Job needs startTime, and completionTime
// goes only with Complete.

// CompleteJob marks a Job succeeded at t.
func CompleteJob(ctx context.Context, c client.Client, job *batchv1.Job, t time.Time) error {
	n := ptr.Deref(job.Spec.Completions, 1)
	return updateJobStatus(ctx, c, job, func(s *batchv1.JobStatus) {
		mt := metav1.NewTime(t)
		s.StartTime = ptr.To(metav1.NewTime(t.Add(-time.Second)))
		s.CompletionTime = &mt
		s.Active, s.Ready, s.Succeeded = 0, ptr.To[int32](0), n
		if job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion {
			s.CompletedIndexes = indexRange(n)
		}
		s.Conditions = append(s.Conditions,
			cond(batchv1.JobSuccessCriteriaMet, "CompletionsReached", "", t),
			cond(batchv1.JobComplete, "CompletionsReached", "", t))
	})
}

// FailJob marks a Job failed at t with the Job controller's reason
// (BackoffLimitExceeded, DeadlineExceeded, PodFailurePolicy) and message,
// after FailingJob or at once.
func FailJob(ctx context.Context, c client.Client, job *batchv1.Job, t time.Time, reason, message string) error {
	return updateJobStatus(ctx, c, job, func(s *batchv1.JobStatus) {
		s.StartTime = ptr.To(metav1.NewTime(t.Add(-time.Second)))
		s.Active, s.Ready, s.Failed = 0, ptr.To[int32](0), 1
		if job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion {
			s.FailedIndexes = nil
		}
		if !hasCondition(s, batchv1.JobFailureTarget) {
			s.Conditions = append(s.Conditions, cond(batchv1.JobFailureTarget, reason, message, t))
		}
		s.Conditions = append(s.Conditions, cond(batchv1.JobFailed, reason, message, t))
	})
}

// FailingJob is the Job controller's first step in failing a Job (for
// example at its deadline): FailureTarget, while its pods are deleted; Failed
// follows (FailJob) once they are gone.
func FailingJob(ctx context.Context, c client.Client, job *batchv1.Job, t time.Time, reason, message string) error {
	return updateJobStatus(ctx, c, job, func(s *batchv1.JobStatus) {
		if s.StartTime == nil {
			s.StartTime = ptr.To(metav1.NewTime(t.Add(-time.Second)))
		}
		s.Conditions = append(s.Conditions, cond(batchv1.JobFailureTarget, reason, message, t))
	})
}

func hasCondition(s *batchv1.JobStatus, t batchv1.JobConditionType) bool {
	for _, c := range s.Conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}

// StartJob marks a Job's pods all running and ready.
func StartJob(ctx context.Context, c client.Client, job *batchv1.Job, t time.Time) error {
	n := ptr.Deref(job.Spec.Parallelism, 1)
	return updateJobStatus(ctx, c, job, func(s *batchv1.JobStatus) {
		s.StartTime = ptr.To(metav1.NewTime(t))
		s.Active, s.Ready = n, ptr.To(n)
	})
}

func updateJobStatus(ctx context.Context, c client.Client, job *batchv1.Job, change func(*batchv1.JobStatus)) error {
	fresh := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(job), fresh); err != nil {
		return err
	}
	change(&fresh.Status)
	if err := c.Status().Update(ctx, fresh); err != nil {
		return fmt.Errorf("writing status of Job %s: %w", job.Name, err)
	}
	*job = *fresh
	return nil
}

func cond(t batchv1.JobConditionType, reason, message string, at time.Time) batchv1.JobCondition {
	mt := metav1.NewTime(at)
	return batchv1.JobCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: message,
		LastProbeTime: mt, LastTransitionTime: mt}
}

func indexRange(n int32) string {
	if n == 1 {
		return "0"
	}
	return fmt.Sprintf("0-%d", n-1)
}

// PodOf creates a pod of a Job (as the Job controller would) and sets its
// status with setStatus, e.g. to a terminated container or a waiting one.
func PodOf(ctx context.Context, c client.Client, job *batchv1.Job, index int, setStatus func(*corev1.PodStatus)) (*corev1.Pod, error) {
	labels := map[string]string{batchv1.JobNameLabel: job.Name}
	for k, v := range job.Spec.Template.Labels {
		labels[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: job.Namespace,
			Name:      fmt.Sprintf("%s-%d-x", job.Name, index),
			Labels:    labels,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
				Controller: ptr.To(true)}},
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	if err := c.Create(ctx, pod); err != nil {
		return nil, err
	}
	setStatus(&pod.Status)
	if err := c.Status().Update(ctx, pod); err != nil {
		return nil, err
	}
	return pod, nil
}

// Terminated is a pod status whose task container exited with code and
// termination message msg.
func Terminated(code int32, msg string) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		phase := corev1.PodFailed
		if code == 0 {
			phase = corev1.PodSucceeded
		}
		s.Phase = phase
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: jobs.ContainerName, Image: "x",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", Message: msg}}}}
	}
}

// Running is a running pod status: its task container started and has not
// ended.
func Running() func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		s.Phase = corev1.PodRunning
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: jobs.ContainerName, Image: "x", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}}}
	}
}

// Waiting is a pending pod status whose task container waits for reason.
func Waiting(reason, msg string) func(*corev1.PodStatus) {
	return func(s *corev1.PodStatus) {
		s.Phase = corev1.PodPending
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: jobs.ContainerName, Image: "x",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	}
}

// TaskLabel selects a Task's Jobs.
func TaskLabel(task *v1alpha1.Task) client.MatchingLabels {
	return client.MatchingLabels{v1alpha1.LabelTask: task.Name}
}
