package jobs

import (
	"maps"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/notify"
)

const (
	// runnerNotifyArg starts the notification sender in the runner image.
	runnerNotifyArg = "notify"
	// notificationDeadlineSeconds bounds a notification Job: every try of
	// every target (4 x 3 x 10 s, plus the pauses) fits well within it.
	notificationDeadlineSeconds = 180
)

// NotificationDeadline is how long a notification Job may run at most
// (its activeDeadlineSeconds): a deleted Task waits no longer for one.
const NotificationDeadline = notificationDeadlineSeconds * time.Second

// NotificationName is the deterministic name of the notification Job of a
// run: the attempt Job name's pattern with "n" in place of the attempt
// number, so it never meets an attempt's name, and one run has one.
func NotificationName(task *v1alpha1.Task, runID string) string {
	return strings.TrimSuffix(Name(task, runID, 0), "0") + "n"
}

// NotificationNames are the names the notification Job of a run may have:
// NotificationName, then its legacy form when it differs (see Names).
func NotificationNames(task *v1alpha1.Task, runID string) []string {
	names := Names(task, runID, 0)
	for i := range names {
		names[i] = strings.TrimSuffix(names[i], "0") + "n"
	}
	return names
}

// BuildNotification is the Job that tells the spec.notify entries targets
// (indexes) about a finished run: one pod of the runner image running
// `task-runner notify`, within the restricted Pod Security Standard, with
// no API credentials. Secret-backed URLs and headers are secretKeyRefs
// the kubelet resolves: the operator never reads them.
func BuildNotification(task *v1alpha1.Task, doc notify.Document, targets []int, opts Options) *batchv1.Job {
	labels := map[string]string{
		v1alpha1.LabelTask:         task.Name,
		v1alpha1.LabelNotification: doc.RunID,
		v1alpha1.LabelManagedBy:    v1alpha1.ManagedByValue,
	}
	idx := make([]string, 0, len(targets))
	for _, i := range targets {
		idx = append(idx, strconv.Itoa(i))
	}
	env := []corev1.EnvVar{
		{Name: notify.EnvDocument, Value: literal(doc.JSON())},
		{Name: notify.EnvTargets, Value: strings.Join(idx, ",")},
	}
	for _, i := range targets {
		env = append(env, targetEnv(task.Spec.Notify[i], i)...)
	}
	c := corev1.Container{
		Name:                     ContainerName,
		Image:                    opts.RunnerImage,
		Command:                  []string{runnerCommand},
		Args:                     []string{runnerNotifyArg},
		Env:                      env,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          containerSecurityContext(),
	}
	pod := corev1.PodSpec{
		RestartPolicy:                corev1.RestartPolicyNever,
		AutomountServiceAccountToken: ptr.To(false),
		SecurityContext:              podSecurityContext(nil),
		Containers:                   []corev1.Container{c},
		// Where the Task's own pods may run, the notification may too.
		NodeSelector: maps.Clone(task.Spec.NodeSelector),
	}
	pod.Tolerations = tolerations(task.Spec.Tolerations)
	for _, s := range task.Spec.ImagePullSecrets {
		pod.ImagePullSecrets = append(pod.ImagePullSecrets, corev1.LocalObjectReference{Name: s.Name})
	}
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name: NotificationName(task, doc.RunID), Namespace: task.Namespace,
			Labels: labels, OwnerReferences: []metav1.OwnerReference{ownerRef(task)},
		},
		Spec: batchv1.JobSpec{
			// The sender retries each webhook itself; a second pod would
			// send a second notification.
			BackoffLimit:          ptr.To[int32](0),
			ActiveDeadlineSeconds: ptr.To[int64](notificationDeadlineSeconds),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(labels)},
				Spec:       pod,
			},
		},
	}
}

// targetEnv is entry i of spec.notify as the sender's variables.
func targetEnv(n v1alpha1.Notification, i int) []corev1.EnvVar {
	prefix := notify.TargetPrefix(i)
	url := corev1.EnvVar{Name: prefix + notify.SuffixURL, Value: literal(n.URL)}
	env := []corev1.EnvVar{}
	if n.URLFrom != nil {
		url = corev1.EnvVar{Name: prefix + notify.SuffixURL, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: secretKeySelector(n.URLFrom.SecretKeyRef)}}
		env = append(env, corev1.EnvVar{Name: prefix + notify.SuffixURLSensitive, Value: "true"})
	}
	env = append(env, url)
	format := n.Format
	if format == "" {
		format = v1alpha1.NotifyFormatJSON
	}
	env = append(env, corev1.EnvVar{Name: prefix + notify.SuffixFormat, Value: string(format)})
	return append(env, headerEnvWith(prefix+notify.SuffixHeaderPrefix, n.Headers, nil)...)
}
