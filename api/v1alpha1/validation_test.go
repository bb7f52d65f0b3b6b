package v1alpha1_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

// These tests send Tasks to a real kube-apiserver with the generated CRD:
// what the contract refuses must be refused at admission, with a message
// naming the field, and valid Tasks must pass.

var (
	ctx = context.Background()
	k8s client.Client
)

const ns = "default"

func TestMain(m *testing.M) {
	_, c, stop, err := testutil.StartAPIServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = c
	code := m.Run()
	stop()
	os.Exit(code)
}

func shellTask(name string, change func(*v1alpha1.Task)) *v1alpha1.Task {
	t := &v1alpha1.Task{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.TaskSpec{Type: v1alpha1.TaskTypeShell, Shell: "echo hi"},
	}
	if change != nil {
		change(t)
	}
	return t
}

func httpTask(name string, change func(*v1alpha1.Task)) *v1alpha1.Task {
	return shellTask(name, func(t *v1alpha1.Task) {
		t.Spec.Type, t.Spec.Shell, t.Spec.URL = v1alpha1.TaskTypeHTTP, "", "https://example.com/hook"
		if change != nil {
			change(t)
		}
	})
}

func TestInvalidTasksAreRefusedNamingTheField(t *testing.T) {
	cases := []struct {
		name string
		task *v1alpha1.Task
		want []string // substrings of the API server's error
	}{
		{"a name with dots is refused", shellTask("my.task", nil),
			[]string{"metadata.name must be a DNS-1123 label"}},
		{"a name longer than 63 characters is refused", shellTask(strings.Repeat("a", 64), nil),
			[]string{"metadata.name must be a DNS-1123 label"}},
		{"an unknown type is refused", shellTask("bad-type", func(t *v1alpha1.Task) { t.Spec.Type = "python" }),
			[]string{"spec.type", "Unsupported value"}},
		{"an unknown imagePullPolicy is refused", shellTask("bad-pull", func(t *v1alpha1.Task) { t.Spec.ImagePullPolicy = "Sometimes" }),
			[]string{"spec.imagePullPolicy", "Unsupported value"}},
		{"a shell Task without shell is refused", shellTask("no-shell", func(t *v1alpha1.Task) { t.Spec.Shell = "" }),
			[]string{"spec.shell is required when type is shell"}},
		{"a notification without outcomes is refused, saying to quote on", shellTask("notify-no-on", func(t *v1alpha1.Task) {
			t.Spec.Notify = []v1alpha1.Notification{{URL: "https://hooks.example.com/x"}}
		}), []string{"spec.notify[].on is required", `quote the key`}},
		{"a notification with both url and urlFrom is refused", shellTask("notify-two-urls", func(t *v1alpha1.Task) {
			t.Spec.Notify = []v1alpha1.Notification{{On: []v1alpha1.NotifyOn{v1alpha1.NotifyOnFailed}, URL: "https://hooks.example.com/x",
				URLFrom: &v1alpha1.HeaderValueSource{SecretKeyRef: v1alpha1.KeySelector{Name: "s", Key: "k"}}}}
		}), []string{"exactly one of url or urlFrom"}},
		{"a notification to a non-http URL is refused", shellTask("notify-ftp", func(t *v1alpha1.Task) {
			t.Spec.Notify = []v1alpha1.Notification{{On: []v1alpha1.NotifyOn{v1alpha1.NotifyOnFailed}, URL: "ftp://hooks.example.com/x"}}
		}), []string{"spec.notify[].url must be an absolute http:// or https:// URL"}},
		{"an unknown outcome is refused", shellTask("notify-bad-on", func(t *v1alpha1.Task) {
			t.Spec.Notify = []v1alpha1.Notification{{On: []v1alpha1.NotifyOn{"Stopped"}, URL: "https://hooks.example.com/x"}}
		}), []string{"Unsupported value", "Stopped"}},
		{"five notifications are refused", shellTask("notify-five", func(t *v1alpha1.Task) {
			for range 5 {
				t.Spec.Notify = append(t.Spec.Notify, v1alpha1.Notification{On: []v1alpha1.NotifyOn{v1alpha1.NotifyOnFailed}, URL: "https://hooks.example.com/x"})
			}
		}), []string{"spec.notify", "must have at most 4 items"}},
		{"suspendAfterFailures on a one-shot Task is refused", shellTask("streak-one-shot", func(t *v1alpha1.Task) {
			t.Spec.SuspendAfterFailures = ptr.To[int32](3)
		}), []string{"spec.suspendAfterFailures is only allowed with spec.schedule"}},
		{"a shell Task with a url is refused", shellTask("shell-url", func(t *v1alpha1.Task) { t.Spec.URL = "https://x.example" }),
			[]string{"spec.url is only allowed when type is http"}},
		{"an http Task without url is refused", httpTask("no-url", func(t *v1alpha1.Task) { t.Spec.URL = "" }),
			[]string{"spec.url is required when type is http"}},
		{"an ftp url is refused", httpTask("ftp-url", func(t *v1alpha1.Task) { t.Spec.URL = "ftp://example.com/x" }),
			[]string{"spec.url", "absolute http:// or https:// URL"}},
		{"a relative url is refused", httpTask("rel-url", func(t *v1alpha1.Task) { t.Spec.URL = "/hook" }),
			[]string{"spec.url", "absolute http:// or https:// URL"}},
		{"an http Task with an image is refused", httpTask("http-image", func(t *v1alpha1.Task) { t.Spec.Image = "busybox" }),
			[]string{"spec.image is only allowed when type is shell"}},
		{"a shell Task with an http block is refused", shellTask("shell-http", func(t *v1alpha1.Task) { t.Spec.HTTP = &v1alpha1.HTTPSpec{} }),
			[]string{"spec.http is only allowed when type is http"}},
		{"zero replicas are refused", shellTask("zero", func(t *v1alpha1.Task) { t.Spec.Replicas = -1 }),
			[]string{"spec.replicas", "greater than or equal to 1"}},
		{"more than 100 replicas are refused", shellTask("wide", func(t *v1alpha1.Task) { t.Spec.Replicas = 101 }),
			[]string{"spec.replicas", "less than or equal to 100"}},
		{"more than 100 retries are refused", shellTask("stubborn", func(t *v1alpha1.Task) { t.Spec.MaxRetry = 101 }),
			[]string{"spec.maxRetry", "less than or equal to 100"}},
		{"a backoff cap below its initial delay is refused", shellTask("backoff", func(t *v1alpha1.Task) {
			t.Spec.Backoff = &v1alpha1.Backoff{InitialSeconds: 60, MaxSeconds: 10, Factor: 2}
		}), []string{"spec.backoff", "maxSeconds must be greater than or equal to"}},
		{"a reserved pod label is refused", shellTask("label", func(t *v1alpha1.Task) {
			t.Spec.PodMetadata = &v1alpha1.PodMetadata{Labels: map[string]string{"batch.taskops.io/run": "x"}}
		}), []string{"spec.podMetadata.labels", "cannot set batch.taskops.io/*"}},
		{"a reserved pod annotation is refused", shellTask("annotation", func(t *v1alpha1.Task) {
			t.Spec.PodMetadata = &v1alpha1.PodMetadata{Annotations: map[string]string{"job-name": "x"}}
		}), []string{"spec.podMetadata.annotations"}},
		{"an AppArmor profile by annotation is refused", shellTask("apparmor", func(t *v1alpha1.Task) {
			t.Spec.PodMetadata = &v1alpha1.PodMetadata{Annotations: map[string]string{"container.apparmor.security.beta.kubernetes.io/task": "unconfined"}}
		}), []string{"spec.podMetadata.annotations", "security-relevant"}},
		{"a seccomp profile by annotation is refused", shellTask("seccomp", func(t *v1alpha1.Task) {
			t.Spec.PodMetadata = &v1alpha1.PodMetadata{Annotations: map[string]string{"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}}
		}), []string{"spec.podMetadata.annotations", "security-relevant"}},
		{"a container runtime annotation is refused", shellTask("runtime", func(t *v1alpha1.Task) {
			t.Spec.PodMetadata = &v1alpha1.PodMetadata{Annotations: map[string]string{"io.kubernetes.cri-o.userns-mode": "host"}}
		}), []string{"spec.podMetadata.annotations", "security-relevant"}},
		{"a nodeSelector value longer than a label value is refused", shellTask("node-selector", func(t *v1alpha1.Task) {
			t.Spec.NodeSelector = map[string]string{"zone": strings.Repeat("z", 64)}
		}), []string{"spec.nodeSelector", "at most 63"}},
		{"a toleration value longer than a label value is refused", shellTask("toleration", func(t *v1alpha1.Task) {
			t.Spec.Tolerations = []v1alpha1.Toleration{{Key: "k", Operator: "Equal", Value: strings.Repeat("v", 64)}}
		}), []string{"spec.tolerations[0].value", "63"}},
		{"an affinity with 5 terms in one list is refused", shellTask("affinity", func(t *v1alpha1.Task) {
			var terms []v1alpha1.PreferredSchedulingTerm
			for range 5 {
				terms = append(terms, v1alpha1.PreferredSchedulingTerm{Weight: 1, Preference: v1alpha1.NodeSelectorTerm{
					MatchExpressions: []v1alpha1.NodeSelectorRequirement{{Key: "k", Operator: "Exists"}}}})
			}
			t.Spec.Affinity = &v1alpha1.Affinity{NodeAffinity: &v1alpha1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: terms}}
		}), []string{"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution", "at most 4 items"}},
		{"an affinity term with 5 expressions is refused", shellTask("affinity-expressions", func(t *v1alpha1.Task) {
			var exprs []v1alpha1.NodeSelectorRequirement
			for i := range 5 {
				exprs = append(exprs, v1alpha1.NodeSelectorRequirement{Key: fmt.Sprintf("k%d", i), Operator: "Exists"})
			}
			t.Spec.Affinity = &v1alpha1.Affinity{NodeAffinity: &v1alpha1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1alpha1.NodeSelector{
				NodeSelectorTerms: []v1alpha1.NodeSelectorTerm{{MatchExpressions: exprs}}}}}
		}), []string{"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions", "at most 4 items"}},
		{"an affinity expression with 9 values is refused", shellTask("affinity-values", func(t *v1alpha1.Task) {
			var values []string
			for i := range 9 {
				values = append(values, fmt.Sprintf("v%d", i))
			}
			t.Spec.Affinity = &v1alpha1.Affinity{PodAntiAffinity: &v1alpha1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1alpha1.PodAffinityTerm{{
				TopologyKey: "kubernetes.io/hostname", LabelSelector: &v1alpha1.LabelSelector{MatchExpressions: []v1alpha1.LabelSelectorRequirement{{Key: "app", Operator: "In", Values: values}}}}}}}
		}), []string{"spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].values", "at most 8 items"}},
		{"a pod affinity label selector value longer than a label value is refused", shellTask("affinity-label", func(t *v1alpha1.Task) {
			t.Spec.Affinity = &v1alpha1.Affinity{PodAffinity: &v1alpha1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1alpha1.WeightedPodAffinityTerm{{Weight: 1,
				PodAffinityTerm: v1alpha1.PodAffinityTerm{TopologyKey: "zone", LabelSelector: &v1alpha1.LabelSelector{MatchLabels: map[string]string{"app": strings.Repeat("a", 64)}}}}}}}
		}), []string{"matchLabels", "values at most 63"}},
		{"an affinity operator that is not one of a pod's is refused", shellTask("affinity-operator", func(t *v1alpha1.Task) {
			t.Spec.Affinity = &v1alpha1.Affinity{NodeAffinity: &v1alpha1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1alpha1.PreferredSchedulingTerm{{Weight: 1,
				Preference: v1alpha1.NodeSelectorTerm{MatchExpressions: []v1alpha1.NodeSelectorRequirement{{Key: "k", Operator: "Near"}}}}}}}
		}), []string{"matchExpressions[0].operator", "Unsupported value"}},
		{"a ConfigMap volume name longer than a DNS name is refused", shellTask("configmap-name", func(t *v1alpha1.Task) {
			t.Spec.Volumes = []v1alpha1.Volume{{Name: "c", ConfigMap: &v1alpha1.ConfigMapVolumeSource{Name: strings.Repeat("c", 254)}}}
		}), []string{"spec.volumes[0].configMap.name", "253"}},
		{"a pod label value longer than a label value is refused", shellTask("pod-label", func(t *v1alpha1.Task) {
			t.Spec.PodMetadata = &v1alpha1.PodMetadata{Labels: map[string]string{"team": strings.Repeat("t", 64)}}
		}), []string{"spec.podMetadata.labels", "at most 63"}},
		{"a Secret volume listing 17 keys is refused", shellTask("items", func(t *v1alpha1.Task) {
			var items []v1alpha1.KeyToPath
			for i := range 17 {
				items = append(items, v1alpha1.KeyToPath{Key: fmt.Sprintf("k%d", i), Path: fmt.Sprintf("p%d", i)})
			}
			t.Spec.Volumes = []v1alpha1.Volume{{Name: "s", Secret: &v1alpha1.SecretVolumeSource{SecretName: "s", Items: items}}}
		}), []string{"spec.volumes[0].secret.items", "at most 16 items"}},
		{"a queue name longer than a label value is refused", shellTask("long-queue", func(t *v1alpha1.Task) {
			t.Spec.QueueName = strings.Repeat("q", 64)
		}), []string{"spec.queueName", "63"}},
		{"an env name reserved for the runner is refused", shellTask("env", func(t *v1alpha1.Task) {
			t.Spec.Env = []v1alpha1.EnvVar{{Name: "TASK_HTTP_URL", Value: ptr.To("x")}}
		}), []string{"spec.env", "TASK_HTTP_"}},
		{"a CRON_TZ prefix is refused", shellTask("crontz", func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To("CRON_TZ=UTC * * * * *") }),
			[]string{"spec.schedule", "set spec.timeZone instead"}},
		{"a schedule with three fields is refused", shellTask("three", func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To("* * *") }),
			[]string{"spec.schedule must be 5 space-separated cron fields"}},
		{"a time zone without a schedule is refused", shellTask("tz", func(t *v1alpha1.Task) { t.Spec.TimeZone = ptr.To("Europe/Berlin") }),
			[]string{"spec.timeZone is only allowed with spec.schedule"}},
		{"a ttl on a cron Task is refused", shellTask("ttl", func(t *v1alpha1.Task) {
			t.Spec.Schedule, t.Spec.TTLSecondsAfterFinished = ptr.To("@hourly"), ptr.To[int32](60)
		}), []string{"spec.ttlSecondsAfterFinished is only allowed for one-shot Tasks"}},
		{"a header with both a value and a Secret is refused", httpTask("header", func(t *v1alpha1.Task) {
			t.Spec.HTTP = &v1alpha1.HTTPSpec{Headers: []v1alpha1.HTTPHeader{{Name: "X-Key", Value: ptr.To("a"),
				ValueFrom: &v1alpha1.HeaderValueSource{SecretKeyRef: v1alpha1.KeySelector{Name: "s", Key: "k"}}}}}
		}), []string{"spec.http.headers[0]", "exactly one of value or valueFrom"}},
		{"a header name with a space is refused", httpTask("header-name", func(t *v1alpha1.Task) {
			t.Spec.HTTP = &v1alpha1.HTTPSpec{Headers: []v1alpha1.HTTPHeader{{Name: "X Key", Value: ptr.To("a")}}}
		}), []string{"spec.http.headers[0].name"}},
		{"a success code below 100 is refused", httpTask("codes", func(t *v1alpha1.Task) {
			t.Spec.HTTP = &v1alpha1.HTTPSpec{SuccessCodes: []int32{99}}
		}), []string{"spec.http.successCodes[0]", "greater than or equal to 100"}},
		{"an unknown HTTP method is refused", httpTask("method", func(t *v1alpha1.Task) {
			t.Spec.HTTP = &v1alpha1.HTTPSpec{Method: "FETCH"}
		}), []string{"spec.http.method", "Unsupported value"}},
		{"a shell script over 32 KiB is refused", shellTask("big", func(t *v1alpha1.Task) { t.Spec.Shell = strings.Repeat("x", 32769) }),
			[]string{"spec.shell", "Too long"}},
		{"an unknown concurrency policy is refused", shellTask("policy", func(t *v1alpha1.Task) { t.Spec.ConcurrencyPolicy = "Sometimes" }),
			[]string{"spec.concurrencyPolicy", "Unsupported value"}},
		{"a url over 2 KiB is refused", httpTask("long-url", func(t *v1alpha1.Task) { t.Spec.URL = "https://x.example/" + strings.Repeat("a", 2048) }),
			[]string{"spec.url", "Too long"}},
		// Pod fields (contract v4).
		{"runAsUser 0 is refused", shellTask("root", func(t *v1alpha1.Task) {
			t.Spec.SecurityContext = &v1alpha1.SecurityContext{RunAsUser: ptr.To[int64](0)}
		}), []string{"spec.securityContext.runAsUser", "greater than or equal to 1"}},
		{"runAsGroup 0 is refused", shellTask("root-group", func(t *v1alpha1.Task) {
			t.Spec.SecurityContext = &v1alpha1.SecurityContext{RunAsGroup: ptr.To[int64](0)}
		}), []string{"spec.securityContext.runAsGroup", "greater than or equal to 1"}},
		{"fsGroup 0 is refused", shellTask("root-fs", func(t *v1alpha1.Task) {
			t.Spec.SecurityContext = &v1alpha1.SecurityContext{FSGroup: ptr.To[int64](0)}
		}), []string{"spec.securityContext.fsGroup", "greater than or equal to 1"}},
		{"a volume with two sources is refused", shellTask("two-sources", func(t *v1alpha1.Task) {
			t.Spec.Volumes = []v1alpha1.Volume{{Name: "v", EmptyDir: &v1alpha1.EmptyDirVolumeSource{},
				Secret: &v1alpha1.SecretVolumeSource{SecretName: "s"}}}
		}), []string{"spec.volumes[0]", "exactly one of configMap, secret, emptyDir or persistentVolumeClaim"}},
		{"a volume with no source (say, a hostPath) is refused", shellTask("host-path", func(t *v1alpha1.Task) {
			t.Spec.Volumes = []v1alpha1.Volume{{Name: "v"}}
		}), []string{"spec.volumes[0]", "exactly one of"}},
		{"more than 16 volumes are refused", shellTask("many-volumes", func(t *v1alpha1.Task) {
			for i := 0; i < 17; i++ {
				t.Spec.Volumes = append(t.Spec.Volumes, v1alpha1.Volume{Name: fmt.Sprintf("v%d", i), EmptyDir: &v1alpha1.EmptyDirVolumeSource{}})
			}
		}), []string{"spec.volumes", "must have at most 16 items"}},
		{"two volumes with one name are refused", shellTask("dup-volume", func(t *v1alpha1.Task) {
			t.Spec.Volumes = []v1alpha1.Volume{{Name: "v", EmptyDir: &v1alpha1.EmptyDirVolumeSource{}}, {Name: "v", EmptyDir: &v1alpha1.EmptyDirVolumeSource{}}}
		}), []string{"spec.volumes[1]", "Duplicate value"}},
		{"a volume name that is not a DNS label is refused", shellTask("volume-name", func(t *v1alpha1.Task) {
			t.Spec.Volumes = []v1alpha1.Volume{{Name: "My_Volume", EmptyDir: &v1alpha1.EmptyDirVolumeSource{}}}
		}), []string{"spec.volumes[0].name"}},
		{"a mount of a volume that does not exist is refused", shellTask("mount-missing", func(t *v1alpha1.Task) {
			t.Spec.VolumeMounts = []v1alpha1.VolumeMount{{Name: "nope", MountPath: "/data"}}
		}), []string{"spec.volumeMounts must name volumes of spec.volumes"}},
		{"a relative mountPath is refused", shellTask("mount-relative", func(t *v1alpha1.Task) {
			t.Spec.Volumes = []v1alpha1.Volume{{Name: "v", EmptyDir: &v1alpha1.EmptyDirVolumeSource{}}}
			t.Spec.VolumeMounts = []v1alpha1.VolumeMount{{Name: "v", MountPath: "data"}}
		}), []string{"spec.volumeMounts[0].mountPath"}},
		{"two mounts at one mountPath are refused", shellTask("mount-twice", func(t *v1alpha1.Task) {
			t.Spec.Volumes = []v1alpha1.Volume{{Name: "a", EmptyDir: &v1alpha1.EmptyDirVolumeSource{}}, {Name: "b", EmptyDir: &v1alpha1.EmptyDirVolumeSource{}}}
			t.Spec.VolumeMounts = []v1alpha1.VolumeMount{{Name: "a", MountPath: "/data"}, {Name: "b", MountPath: "/data"}}
		}), []string{"spec.volumeMounts", "same mountPath"}},
		{"a subPath with .. is refused", shellTask("subpath", func(t *v1alpha1.Task) {
			t.Spec.Volumes = []v1alpha1.Volume{{Name: "v", EmptyDir: &v1alpha1.EmptyDirVolumeSource{}}}
			t.Spec.VolumeMounts = []v1alpha1.VolumeMount{{Name: "v", MountPath: "/data", SubPath: "a/../../etc"}}
		}), []string{"spec.volumeMounts[0].subPath", "relative path without '..'"}},
		{"a relative workingDir is refused", shellTask("workdir", func(t *v1alpha1.Task) { t.Spec.WorkingDir = "work" }),
			[]string{"spec.workingDir"}},
		{"a priorityClassName that is not a DNS name is refused", shellTask("priority", func(t *v1alpha1.Task) { t.Spec.PriorityClassName = "High Priority" }),
			[]string{"spec.priorityClassName"}},
		{"an image pull secret without a name is refused", shellTask("pull-secret", func(t *v1alpha1.Task) {
			t.Spec.ImagePullSecrets = []v1alpha1.LocalObjectReference{{Name: ""}}
		}), []string{"spec.imagePullSecrets[0].name"}},
		{"more than 32 tolerations are refused", shellTask("tolerations", func(t *v1alpha1.Task) {
			for i := 0; i < 33; i++ {
				t.Spec.Tolerations = append(t.Spec.Tolerations, v1alpha1.Toleration{Key: fmt.Sprintf("k%d", i), Operator: "Exists"})
			}
		}), []string{"spec.tolerations", "must have at most 32 items"}},
		{"the run context cannot be set in env", shellTask("run-context", func(t *v1alpha1.Task) {
			t.Spec.Env = []v1alpha1.EnvVar{{Name: "TASK_ATTEMPT", Value: ptr.To("1")}}
		}), []string{"spec.env cannot set TASK_NAME, TASK_NAMESPACE, TASK_RUN_ID, TASK_ATTEMPT or TASK_SCHEDULED_TIME"}},
		// Cron fields CEL can check (contract v4: admission catches what it can).
		{"minute 61 is refused", shellTask("cron-minute", func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To("61 * * * *") }),
			[]string{"the minute field (field 1)"}},
		{"hour 24 is refused", shellTask("cron-hour", func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To("0 24 * * *") }),
			[]string{"the hour field (field 2)"}},
		{"day 32 is refused", shellTask("cron-dom", func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To("0 0 32 * *") }),
			[]string{"the day-of-month field (field 3)"}},
		{"month 13 is refused", shellTask("cron-month", func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To("0 0 1 13 *") }),
			[]string{"the month field (field 4)"}},
		{"day-of-week 8 is refused", shellTask("cron-dow", func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To("0 0 * * 8") }),
			[]string{"the day-of-week field (field 5)"}},
		{"an unknown descriptor is refused", shellTask("cron-desc", func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To("@fortnightly") }),
			[]string{"unknown descriptor"}},
		{"a step in a cron field still needs a valid start", shellTask("cron-step", func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To("60/5 * * * *") }),
			[]string{"the minute field (field 1)"}},
		// Failure classes.
		{"an exit code above 255 is refused", shellTask("exit-256", func(t *v1alpha1.Task) { t.Spec.NonRetryableExitCodes = []int32{256} }),
			[]string{"spec.nonRetryableExitCodes[0]", "less than or equal to 255"}},
		{"exit code 0 is refused", shellTask("exit-0", func(t *v1alpha1.Task) { t.Spec.NonRetryableExitCodes = []int32{0} }),
			[]string{"spec.nonRetryableExitCodes[0]", "greater than or equal to 1"}},
		{"nonRetryableExitCodes on an http Task are refused", httpTask("http-codes", func(t *v1alpha1.Task) { t.Spec.NonRetryableExitCodes = []int32{3} }),
			[]string{"spec.nonRetryableExitCodes is only allowed when type is shell"}},
		{"a jitter above 100 percent is refused", shellTask("jitter", func(t *v1alpha1.Task) {
			t.Spec.Backoff = &v1alpha1.Backoff{InitialSeconds: 10, MaxSeconds: 60, Factor: 2, JitterPercent: 101}
		}), []string{"spec.backoff.jitterPercent", "less than or equal to 100"}},

		// Business calendars.
		{"skip dates on a one-shot Task are refused", shellTask("skip-oneshot", func(t *v1alpha1.Task) { t.Spec.SkipDates = []string{"2026-12-25"} }),
			[]string{"spec.skipDates is only allowed with spec.schedule or spec.after"}},
		{"skip calendars on a one-shot Task are refused", shellTask("calendars-oneshot", func(t *v1alpha1.Task) { t.Spec.SkipCalendars = []string{"bank"} }),
			[]string{"spec.skipCalendars is only allowed with spec.schedule or spec.after"}},
		{"skip dates from a ConfigMap on a one-shot Task are refused", shellTask("from-oneshot", func(t *v1alpha1.Task) {
			t.Spec.SkipDatesFrom = &v1alpha1.ConfigMapKeyRef{Name: "holidays", Key: "dates"}
		}), []string{"spec.skipDatesFrom is only allowed with spec.schedule or spec.after"}},
		{"daylight-saving policies on a one-shot Task are refused", shellTask("dst-oneshot", func(t *v1alpha1.Task) {
			t.Spec.RepeatedTimePolicy, t.Spec.SkippedTimePolicy = "Once", "Skip"
		}), []string{"spec.repeatedTimePolicy is only allowed with spec.schedule", "spec.skippedTimePolicy is only allowed with spec.schedule"}},
		{"a starting deadline on a one-shot Task is refused", shellTask("deadline-oneshot", func(t *v1alpha1.Task) { t.Spec.StartingDeadlineSeconds = ptr.To[int64](60) }),
			[]string{"spec.startingDeadlineSeconds is only allowed with spec.schedule"}},
		// One rule says which fields a Task may set (task_types.go says
		// why): every field it refuses is named, each with its reason.
		{"every field a Task may not set is named at once", httpTask("many-wrong", func(t *v1alpha1.Task) {
			t.Spec.Image, t.Spec.NonRetryableExitCodes, t.Spec.SuspendAfterFailures, t.Spec.AfterPolicy = "busybox", []int32{3}, ptr.To[int32](3), v1alpha1.AfterAny
		}), []string{"spec.image is only allowed when type is shell: http Tasks always run the runner image",
			"spec.nonRetryableExitCodes is only allowed when type is shell: the http runner has its own failure classes",
			"spec.suspendAfterFailures is only allowed with spec.schedule", "spec.afterPolicy is only allowed with spec.after"}},
		{"the fields of the other type are named, as is the missing one", shellTask("shell-as-http", func(t *v1alpha1.Task) {
			t.Spec.Shell, t.Spec.URL, t.Spec.HTTP = "", "https://x.example", &v1alpha1.HTTPSpec{}
		}), []string{"spec.shell is required when type is shell", "spec.url is only allowed when type is http", "spec.http is only allowed when type is http"}},
		{"more than 4 skip calendars are refused", shellTask("calendars-five", func(t *v1alpha1.Task) {
			t.Spec.Schedule, t.Spec.SkipCalendars = ptr.To("@daily"), []string{"a", "b", "c", "d", "e"}
		}), []string{"spec.skipCalendars", "must have at most 4 items"}},
		{"a skip date in another form is refused", shellTask("skip-form", func(t *v1alpha1.Task) {
			t.Spec.Schedule, t.Spec.SkipDates = ptr.To("@daily"), []string{"25.12.2026"}
		}), []string{"spec.skipDates[0]", "should match"}},
		{"an unknown repeatedTimePolicy is refused", shellTask("dst-policy", func(t *v1alpha1.Task) {
			t.Spec.Schedule, t.Spec.RepeatedTimePolicy = ptr.To("@daily"), "Thrice"
		}), []string{"spec.repeatedTimePolicy", "Unsupported value"}},

		// Chains.
		{"a Task that runs after itself is refused", shellTask("selfish", func(t *v1alpha1.Task) { t.Spec.After = []v1alpha1.TaskAfter{{Task: "selfish"}} }),
			[]string{"spec.after cannot name the Task itself"}},
		{"9 upstream Tasks are refused", shellTask("after-9", func(t *v1alpha1.Task) {
			for i := range 9 {
				t.Spec.After = append(t.Spec.After, v1alpha1.TaskAfter{Task: fmt.Sprintf("up-%d", i)})
			}
		}), []string{"spec.after", "must have at most 8 items"}},
		{"an outcome other than Succeeded and Failed is refused", shellTask("after-stopped", func(t *v1alpha1.Task) {
			t.Spec.After = []v1alpha1.TaskAfter{{Task: "etl", On: []v1alpha1.AfterOn{"Stopped"}}}
		}), []string{"spec.after[0].on[0]", "Unsupported value"}},
		{"a param from a result that spec.params does not declare is refused", shellTask("after-param", func(t *v1alpha1.Task) {
			t.Spec.After = []v1alpha1.TaskAfter{{Task: "etl", Params: []v1alpha1.AfterParam{{Name: "rows", FromResult: "rows"}}}}
		}), []string{"spec.after[].params[].name must name a param of spec.params"}},
		{"afterPolicy without after is refused", shellTask("policy-alone", func(t *v1alpha1.Task) { t.Spec.AfterPolicy = v1alpha1.AfterAny }),
			[]string{"spec.afterPolicy is only allowed with spec.after"}},

		// Params and results.
		{"a param name with capitals is refused", shellTask("param-caps", func(t *v1alpha1.Task) { t.Spec.Params = []v1alpha1.ParamSpec{{Name: "Date"}} }),
			[]string{"spec.params[0].name", "should match"}},
		{"two params of one name are refused", shellTask("param-dup", func(t *v1alpha1.Task) {
			t.Spec.Params = []v1alpha1.ParamSpec{{Name: "date"}, {Name: "date"}}
		}), []string{"spec.params[1]", "Duplicate value"}},
		{"17 params are refused", shellTask("param-17", func(t *v1alpha1.Task) {
			for i := range 17 {
				t.Spec.Params = append(t.Spec.Params, v1alpha1.ParamSpec{Name: fmt.Sprintf("p%d", i)})
			}
		}), []string{"spec.params", "must have at most 16 items"}},
		{"a default over 1 KiB of UTF-8 is refused", shellTask("param-big", func(t *v1alpha1.Task) {
			t.Spec.Params = []v1alpha1.ParamSpec{{Name: "date", Default: ptr.To(strings.Repeat("é", 513))}}
		}), []string{"spec.params[0].default", "at most 1024 bytes"}},
		{"defaults over 4 KiB in all are refused", shellTask("param-total", func(t *v1alpha1.Task) {
			for i := range 5 {
				t.Spec.Params = append(t.Spec.Params, v1alpha1.ParamSpec{Name: fmt.Sprintf("p%d", i), Default: ptr.To(strings.Repeat("x", 1000))})
			}
		}), []string{"spec.params", "the defaults are at most 4096 bytes in all"}},
		{"a cron Task's param without a default is refused", shellTask("param-cron", func(t *v1alpha1.Task) {
			t.Spec.Schedule = ptr.To("@hourly")
			t.Spec.Params = []v1alpha1.ParamSpec{{Name: "date"}}
		}), []string{"every param of a cron Task needs a default"}},
		{"a result name with a dash is refused", shellTask("result-dash", func(t *v1alpha1.Task) { t.Spec.Results = []v1alpha1.ResultSpec{{Name: "row-count"}} }),
			[]string{"spec.results[0].name", "should match"}},
		{"an http result not declared in spec.results is refused", httpTask("http-result-undeclared", func(t *v1alpha1.Task) {
			t.Spec.HTTP = &v1alpha1.HTTPSpec{Results: []v1alpha1.HTTPResult{{Name: "id", From: "jsonPath:{.id}"}}}
		}), []string{"spec.http.results must name results declared in spec.results"}},
		{"an http result from an unknown place is refused", httpTask("http-result-from", func(t *v1alpha1.Task) {
			t.Spec.Results = []v1alpha1.ResultSpec{{Name: "id"}}
			t.Spec.HTTP = &v1alpha1.HTTPSpec{Results: []v1alpha1.HTTPResult{{Name: "id", From: "body"}}}
		}), []string{"spec.http.results[0].from", "should match"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := k8s.Create(ctx, c.task, client.DryRunAll)
			if err == nil {
				t.Fatalf("the API server accepted %s", c.name)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestValidTasksAreAcceptedWithDefaults(t *testing.T) {
	full := httpTask("full-http", func(t *v1alpha1.Task) {
		t.Spec.HTTP = &v1alpha1.HTTPSpec{Method: "POST", Body: `{"a":1}`, SuccessCodes: []int32{200, 202}, TimeoutSeconds: 10,
			Headers: []v1alpha1.HTTPHeader{
				{Name: "Content-Type", Value: ptr.To("application/json")},
				{Name: "Authorization", ValueFrom: &v1alpha1.HeaderValueSource{SecretKeyRef: v1alpha1.KeySelector{Name: "api", Key: "token"}}},
			}}
		t.Spec.MaxRetry, t.Spec.Replicas = 3, 2
		t.Spec.Env = []v1alpha1.EnvVar{{Name: "MODE", Value: ptr.To("ci")},
			{Name: "POD", ValueFrom: &v1alpha1.EnvVarSource{FieldRef: &v1alpha1.FieldSelector{FieldPath: "metadata.name"}}}}
		t.Spec.Resources = &v1alpha1.Resources{Requests: corev1.ResourceList{corev1.ResourceCPU: mustQuantity("10m")}}
		t.Spec.PodMetadata = &v1alpha1.PodMetadata{Labels: map[string]string{"team": "billing"},
			Annotations: map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}}
		t.Spec.TTLSecondsAfterFinished = ptr.To[int32](3600)
	})
	cron := shellTask("nightly", func(t *v1alpha1.Task) {
		t.Spec.Schedule, t.Spec.TimeZone = ptr.To("30 2 * * *"), ptr.To("Europe/Berlin")
		t.Spec.ConcurrencyPolicy, t.Spec.StartingDeadlineSeconds = v1alpha1.ReplaceConcurrent, ptr.To[int64](300)
		t.Spec.Image, t.Spec.NonRetryableExitCodes, t.Spec.SuspendAfterFailures = "busybox:1.37", []int32{3}, ptr.To[int32](5)
	})
	every := shellTask("every", func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To("@every 90s") })
	weekdays := shellTask("weekdays", func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To("*/15 9-17 1,15 jan-jun MON-FRI") })
	question := shellTask("question", func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To("0 0 ? * 0") })
	zeros := shellTask("zeros", func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To("007 00 01 001 0") })
	everyLong := shellTask("every-long", func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To(" @every 1h30m ") })
	params := shellTask("params", func(t *v1alpha1.Task) {
		t.Spec.Params = []v1alpha1.ParamSpec{{Name: "date", Description: "the day to report"}, {Name: "region", Default: ptr.To("")}}
		t.Spec.Results = []v1alpha1.ResultSpec{{Name: "rows"}, {Name: "url", Description: "where the report is"}}
	})
	httpParams := httpTask("http-params", func(t *v1alpha1.Task) {
		t.Spec.URL = "https://example.com/report/$(params.date)?region=$(params.region)"
		t.Spec.Params = []v1alpha1.ParamSpec{{Name: "date", Default: ptr.To("today")}, {Name: "region", Default: ptr.To("eu")}}
		t.Spec.Results = []v1alpha1.ResultSpec{{Name: "id"}, {Name: "code"}, {Name: "etag"}}
		t.Spec.HTTP = &v1alpha1.HTTPSpec{Body: `{"date":"$(params.date)"}`,
			Headers: []v1alpha1.HTTPHeader{{Name: "X-Region", Value: ptr.To("$(params.region)")}},
			Results: []v1alpha1.HTTPResult{{Name: "id", From: "jsonPath:{.id}"}, {Name: "code", From: "statusCode"}, {Name: "etag", From: "header:ETag"}}}
	})
	calendar := shellTask("calendar", func(t *v1alpha1.Task) {
		t.Spec.Schedule, t.Spec.TimeZone = ptr.To("30 2 * * 1-5"), ptr.To("Europe/Berlin")
		t.Spec.SkipDates = []string{"2026-12-24", "--12-25", "--01-01"}
		t.Spec.SkipDatesFrom = &v1alpha1.ConfigMapKeyRef{Name: "holidays", Key: "de.txt"}
		t.Spec.SkipCalendars = []string{"de-bank-holidays", "company"}
		t.Spec.RepeatedTimePolicy, t.Spec.SkippedTimePolicy = v1alpha1.RepeatedTwice, v1alpha1.SkippedRunAfter
	})
	cronParams := shellTask("cron-params", func(t *v1alpha1.Task) {
		t.Spec.Schedule = ptr.To("@daily")
		t.Spec.Params = []v1alpha1.ParamSpec{{Name: "date", Default: ptr.To("yesterday")}}
	})
	chained := shellTask("report", func(t *v1alpha1.Task) {
		t.Spec.Params = []v1alpha1.ParamSpec{{Name: "rows"}}
		t.Spec.After = []v1alpha1.TaskAfter{{Task: "etl", On: []v1alpha1.AfterOn{v1alpha1.AfterOnSucceeded, v1alpha1.AfterOnFailed},
			Params: []v1alpha1.AfterParam{{Name: "rows", FromResult: "rows"}}}, {Task: "load"}}
		t.Spec.AfterPolicy = v1alpha1.AfterAny
		t.Spec.TimeZone, t.Spec.SkipDates = ptr.To("Europe/Berlin"), []string{"--12-25"}
	})
	for _, task := range []*v1alpha1.Task{shellTask("minimal", nil), full, cron, every, weekdays, question, zeros, everyLong,
		shellTask(strings.Repeat("a", 63), nil), params, httpParams, cronParams, calendar, chained} {
		t.Run(task.Name, func(t *testing.T) {
			if err := k8s.Create(ctx, task, client.DryRunAll); err != nil {
				t.Fatalf("a valid Task was refused: %v", err)
			}
		})
	}

	after := shellTask("after-defaults", func(t *v1alpha1.Task) { t.Spec.After = []v1alpha1.TaskAfter{{Task: "etl"}} })
	must(t, k8s.Create(ctx, after))
	if on := after.Spec.After[0].On; len(on) != 1 || on[0] != v1alpha1.AfterOnSucceeded {
		t.Fatalf("spec.after[0].on defaulted to %v, want [Succeeded]", on)
	}

	minimal := shellTask("defaults", nil)
	must(t, k8s.Create(ctx, minimal))
	s := minimal.Spec
	if s.Replicas != 1 || s.MaxRetry != 0 || s.ConcurrencyPolicy != v1alpha1.ForbidConcurrent || *s.StartTimeoutSeconds != 300 ||
		*s.Backoff != (v1alpha1.Backoff{InitialSeconds: 10, MaxSeconds: 300, Factor: 2}) ||
		*s.SuccessfulRunsHistoryLimit != 3 || *s.FailedRunsHistoryLimit != 1 || *s.Suspend {
		t.Fatalf("defaults not applied: %+v", s)
	}
}

func TestImmutableFieldsCannotChange(t *testing.T) {
	task := shellTask("immutable", nil)
	must(t, k8s.Create(ctx, task))
	cases := []struct {
		name   string
		change func(*v1alpha1.Task)
		want   string
	}{
		{"the type cannot change", func(t *v1alpha1.Task) {
			t.Spec.Type, t.Spec.Shell, t.Spec.URL = v1alpha1.TaskTypeHTTP, "", "https://x.example"
		},
			"spec.type is immutable"},
		{"a one-shot Task cannot gain a schedule", func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To("@hourly") },
			"spec.schedule cannot be added or removed after creation"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fresh := &v1alpha1.Task{}
			must(t, k8s.Get(ctx, client.ObjectKeyFromObject(task), fresh))
			c.change(fresh)
			err := k8s.Update(ctx, fresh, client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
	fresh := &v1alpha1.Task{}
	must(t, k8s.Get(ctx, client.ObjectKeyFromObject(task), fresh))
	fresh.Spec.Shell, fresh.Spec.MaxRetry = "echo changed", 2
	if err := k8s.Update(ctx, fresh, client.DryRunAll); err != nil {
		t.Fatalf("a mutable field could not change: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }

// Found by the fuzzer (test/fuzz): inputs the schema used to get wrong.
func TestFuzzFindingsAreHandledAtAdmission(t *testing.T) {
	t.Run("a resource quantity no client can decode is refused", func(t *testing.T) {
		// Go's Quantity cannot even hold "1e1.5", so send it as raw JSON.
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "batch.taskops.io/v1alpha1", "kind": "Task",
			"metadata": map[string]any{"name": "bad-quantity", "namespace": ns},
			"spec": map[string]any{"type": "shell", "shell": "true",
				"resources": map[string]any{"limits": map[string]any{"cpu": "1e1.5"}}},
		}}
		err := k8s.Create(ctx, u, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "spec.resources.limits values must be Kubernetes quantities") {
			t.Fatalf("an undecodable quantity was not refused: %v", err)
		}
	})
	t.Run("a schedule with surrounding whitespace is accepted", func(t *testing.T) {
		task := shellTask("spaced-cron", func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To(" */5 *\t* * * ") })
		if err := k8s.Create(ctx, task, client.DryRunAll); err != nil {
			t.Fatalf("a valid schedule was refused: %v", err)
		}
	})
	t.Run("an image with whitespace is refused", func(t *testing.T) {
		task := shellTask("spaced-image", func(t *v1alpha1.Task) { t.Spec.Image = "busybox:1.37 " })
		if err := k8s.Create(ctx, task, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "spec.image") {
			t.Fatalf("an image with a space was not refused: %v", err)
		}
	})
	t.Run("an env value over 4 KiB is refused", func(t *testing.T) {
		task := shellTask("big-env", func(t *v1alpha1.Task) {
			t.Spec.Env = []v1alpha1.EnvVar{{Name: "BIG", Value: ptr.To(strings.Repeat("x", 4097))}}
		})
		if err := k8s.Create(ctx, task, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "spec.env[0].value") {
			t.Fatalf("a 4 KiB+ env value was not refused: %v", err)
		}
	})
}

func TestFuzzFindingsFurtherRules(t *testing.T) {
	cases := []struct {
		name   string
		task   *v1alpha1.Task
		refuse string // "" means accepted
	}{
		{"a schedule with no-break spaces is accepted", shellTask("nbsp-cron", func(t *v1alpha1.Task) { t.Spec.Schedule = ptr.To("0\u00a09 * * *") }), ""},
		{"an image with a vertical tab is refused", shellTask("vt-image", func(t *v1alpha1.Task) { t.Spec.Image = "busybox\v" }), "spec.image"},
		{"an image with a no-break space is refused", shellTask("nbsp-image", func(t *v1alpha1.Task) { t.Spec.Image = "busy\u00a0box" }), "spec.image"},
		{"an image with a registry port and digest is accepted", shellTask("digest-image", func(t *v1alpha1.Task) {
			t.Spec.Image = "registry.example.com:5000/tools/busybox@sha256:" + strings.Repeat("a", 64)
		}), ""},
		{"a header value with a line break is refused", httpTask("crlf", func(t *v1alpha1.Task) {
			t.Spec.HTTP = &v1alpha1.HTTPSpec{Headers: []v1alpha1.HTTPHeader{{Name: "X", Value: ptr.To("a\r\nInjected: 1")}}}
		}), "spec.http.headers[0].value"},
		{"a Secret name that is not a DNS name is refused", httpTask("secret-name", func(t *v1alpha1.Task) {
			t.Spec.HTTP = &v1alpha1.HTTPSpec{Headers: []v1alpha1.HTTPHeader{{Name: "X",
				ValueFrom: &v1alpha1.HeaderValueSource{SecretKeyRef: v1alpha1.KeySelector{Name: "My..Secret", Key: "k"}}}}}
		}), "spec.http.headers[0].valueFrom.secretKeyRef.name"},
		{"a Secret key of '..' is refused", httpTask("secret-key", func(t *v1alpha1.Task) {
			t.Spec.HTTP = &v1alpha1.HTTPSpec{Headers: []v1alpha1.HTTPHeader{{Name: "X",
				ValueFrom: &v1alpha1.HeaderValueSource{SecretKeyRef: v1alpha1.KeySelector{Name: "s", Key: ".."}}}}}
		}), "spec.http.headers[0].valueFrom.secretKeyRef.key"},
		{"a service account name with two dots in a row is refused", shellTask("sa", func(t *v1alpha1.Task) { t.Spec.ServiceAccountName = "a..b" }), "spec.serviceAccountName"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := k8s.Create(ctx, c.task, client.DryRunAll)
			switch {
			case c.refuse == "" && err != nil:
				t.Fatalf("a valid Task was refused: %v", err)
			case c.refuse != "" && (err == nil || !strings.Contains(err.Error(), c.refuse)):
				t.Fatalf("got %v, want a refusal naming %s", err, c.refuse)
			}
		})
	}
}

// Every manifest in samples/ is accepted at admission as it is (server-side
// dry run), so the samples the README points to never drift from the API.
func TestTheSamplesAreAccepted(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testutil.RepoRoot(), "samples", "*.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("samples: %v %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := testutil.DecodeManifests(data)
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range objs {
				u.SetNamespace(ns)
				if err := k8s.Create(ctx, u, client.DryRunAll); err != nil {
					t.Errorf("%s %s refused: %v", u.GetKind(), u.GetName(), err)
				}
			}
		})
	}
}

// A sample either runs as it is on the local cluster or says, in its first
// line, that it is a template and what to replace: one that names an
// example.com image or URL without that line would fail for a user who
// applies it as it is.
func TestSamplesThatCannotRunAsTheyAreSayTheyAreTemplates(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testutil.RepoRoot(), "samples", "*.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("samples: %v %v", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		template := strings.HasPrefix(string(data), "# TEMPLATE: replace ")
		if strings.Contains(string(data), "example.com") && !template {
			t.Errorf("%s names example.com but does not begin with \"# TEMPLATE: replace ...\"", filepath.Base(f))
		}
	}
}

// YAML 1.1 reads an unquoted `on` key as the boolean true, so a manifest
// written like GitHub Actions' loses the field: the refusal says to quote
// it.
func TestAnUnquotedOnInYAMLIsRefusedSayingToQuoteIt(t *testing.T) {
	objs, err := testutil.DecodeManifests([]byte(`apiVersion: batch.taskops.io/v1alpha1
kind: Task
metadata:
  name: unquoted-on
spec:
  type: shell
  shell: exit 3
  notify:
    - on: [Failed]
      url: https://hooks.example.com/x
`))
	if err != nil || len(objs) != 1 {
		t.Fatalf("%v %v", objs, err)
	}
	objs[0].SetNamespace(ns)
	err = k8s.Create(ctx, objs[0], client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), `quote the key`) {
		t.Fatalf("an unquoted on: %v, want a refusal that says to quote it", err)
	}
}

// A TaskQueue's name is a label value on the Jobs it admits: one longer
// than 63 characters is refused at creation, not discovered by every Task
// in it ending InvalidSpec.
func TestATaskQueueNameLongerThanALabelValueIsRefused(t *testing.T) {
	long := testutil.NewTaskQueue(ns, strings.Repeat("q", 64), 1)
	err := k8s.Create(ctx, long, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "at most 63 characters") {
		t.Fatalf("a 64-character TaskQueue name: %v", err)
	}
	must(t, k8s.Create(ctx, testutil.NewTaskQueue(ns, strings.Repeat("q", 63), 1), client.DryRunAll))
}

// A TaskCalendar takes dates in the forms of skipDates, at most 1000.
func TestTaskCalendarsAreCheckedAtAdmission(t *testing.T) {
	for _, c := range []struct {
		name  string
		dates []string
		want  string
	}{
		{"dates in both forms are accepted", []string{"2026-12-24", "--12-25"}, ""},
		{"a date in another form is refused", []string{"24.12.2026"}, "spec.dates[0]"},
		{"more than 1000 dates are refused", make([]string, 1001), "spec.dates"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cal := &v1alpha1.TaskCalendar{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cal-%d", len(c.dates))},
				Spec: v1alpha1.TaskCalendarSpec{Dates: c.dates}}
			if len(c.dates) > 1000 {
				for i := range cal.Spec.Dates {
					cal.Spec.Dates[i] = fmt.Sprintf("20%02d-%02d-%02d", 26+i/336, 1+i/28%12, 1+i%28)
				}
			}
			err := k8s.Create(ctx, cal, client.DryRunAll)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v, want one naming %s", err, c.want)
			}
		})
	}
}
