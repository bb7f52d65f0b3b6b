package jobs

import (
	"strings"
	"testing"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/notify"
)

func TestANotificationJobIsNamedForItsRunAndNeverLikeAnAttempt(t *testing.T) {
	task := newTask(func(t *v1alpha1.Task) { t.Name = strings.Repeat("a", 63) })
	name := NotificationName(task, "s1764556200")
	if len(name) > maxNameLength || !strings.HasSuffix(name, "-s1764556200-n") {
		t.Fatalf("name %q (%d characters)", name, len(name))
	}
	if name != NotificationName(task, "s1764556200") {
		t.Fatal("the name is not deterministic")
	}
	for n := int32(1); n <= 100; n++ {
		if Name(task, "s1764556200", n) == name {
			t.Fatalf("attempt %d has the notification's name", n)
		}
	}
}

func TestANotificationJobRunsTheSenderWithSecretsByReferenceAndNoRetries(t *testing.T) {
	task := newTask()
	task.Spec.Notify = []v1alpha1.Notification{
		{On: []v1alpha1.NotifyOn{v1alpha1.NotifyOnSucceeded}, URL: "http://10.0.0.1/a"},
		{On: []v1alpha1.NotifyOn{v1alpha1.NotifyOnFailed}, Format: v1alpha1.NotifyFormatSlack,
			URLFrom: &v1alpha1.HeaderValueSource{SecretKeyRef: v1alpha1.KeySelector{Name: "hooks", Key: "slack"}},
			Headers: []v1alpha1.HTTPHeader{{Name: "Authorization", ValueFrom: &v1alpha1.HeaderValueSource{SecretKeyRef: v1alpha1.KeySelector{Name: "hooks", Key: "token"}}}}},
	}
	doc := notify.Document{RunID: "s1", Event: v1alpha1.NotifyOnFailed}
	job := BuildNotification(task, doc, []int{1}, Options{RunnerImage: "runner:v1"})
	if job.Labels[v1alpha1.LabelNotification] != "s1" || job.Labels[v1alpha1.LabelAttempt] != "" {
		t.Fatalf("labels %v", job.Labels)
	}
	if *job.Spec.BackoffLimit != 0 || job.Spec.ActiveDeadlineSeconds == nil {
		t.Fatalf("backoffLimit %d, activeDeadlineSeconds %v", *job.Spec.BackoffLimit, job.Spec.ActiveDeadlineSeconds)
	}
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != "runner:v1" || c.Args[0] != "notify" || *pod.AutomountServiceAccountToken {
		t.Fatalf("container %s %v, automount %v", c.Image, c.Args, *pod.AutomountServiceAccountToken)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			env[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
			continue
		}
		env[e.Name] = e.Value
	}
	for k, want := range map[string]string{
		notify.EnvTargets: "1", "TASK_NOTIFY_1_URL": "secret:hooks/slack", "TASK_NOTIFY_1_URL_SENSITIVE": "true",
		"TASK_NOTIFY_1_FORMAT": "slack", "TASK_NOTIFY_1_HEADER_0_VALUE": "secret:hooks/token", "TASK_NOTIFY_1_HEADER_0_SENSITIVE": "true",
	} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	if _, ok := env["TASK_NOTIFY_0_URL"]; ok {
		t.Errorf("an entry not told about Failed is in the Job")
	}
}
