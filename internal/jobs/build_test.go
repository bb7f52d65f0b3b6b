package jobs

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

var testOpts = Options{ShellImage: "busybox:1.37", RunnerImage: "ghcr.io/taskops/task-operator:v1"}

func httpTask(opts ...func(*v1alpha1.Task)) *v1alpha1.Task {
	return newTask(append([]func(*v1alpha1.Task){func(t *v1alpha1.Task) {
		t.Spec.Type = v1alpha1.TaskTypeHTTP
		t.Spec.Shell = ""
		t.Spec.URL = "https://example.com/hook"
	}}, opts...)...)
}

func withReplicas(n int32) func(*v1alpha1.Task) {
	return func(t *v1alpha1.Task) { t.Spec.Replicas = n }
}

func withHTTP(h *v1alpha1.HTTPSpec) func(*v1alpha1.Task) {
	return func(t *v1alpha1.Task) { t.Spec.HTTP = h }
}

func withServiceAccount(name string) func(*v1alpha1.Task) {
	return func(t *v1alpha1.Task) { t.Spec.ServiceAccountName = name }
}

// asJSON renders a value for failure messages and substring checks.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// envMap indexes a container's env by name.
func envMap(c corev1.Container) map[string]corev1.EnvVar {
	m := make(map[string]corev1.EnvVar, len(c.Env))
	for _, e := range c.Env {
		m[e.Name] = e
	}
	return m
}

func TestBuildShellTaskHasTheWholeContractShape(t *testing.T) {
	task := newTask(func(t *v1alpha1.Task) {
		t.Spec.Shell = "echo $GREETING && exit 0"
		t.Spec.Env = []v1alpha1.EnvVar{
			{Name: "GREETING", Value: ptr.To("hi")},
			{Name: "PASSWORD", ValueFrom: &v1alpha1.EnvVarSource{SecretKeyRef: &v1alpha1.KeySelector{Name: "db", Key: "password", Optional: ptr.To(true)}}},
			{Name: "LEVEL", ValueFrom: &v1alpha1.EnvVarSource{ConfigMapKeyRef: &v1alpha1.KeySelector{Name: "cfg", Key: "level"}}},
			{Name: "POD", ValueFrom: &v1alpha1.EnvVarSource{FieldRef: &v1alpha1.FieldSelector{FieldPath: "metadata.name"}}},
		}
		t.Spec.Resources = &v1alpha1.Resources{
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		}
	})
	slot := time.Date(2026, 1, 1, 1, 0, 0, 0, time.FixedZone("CET", 3600))

	got := Build(task, "s1767225600", 2, &slot, nil, testOpts)

	labels := map[string]string{
		"batch.taskops.io/task":        "backup",
		"batch.taskops.io/run":         "s1767225600",
		"batch.taskops.io/attempt":     "2",
		"app.kubernetes.io/managed-by": "task-operator",
	}
	want := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      Name(task, "s1767225600", 2),
			Namespace: "team-a",
			Labels:    labels,
			Annotations: map[string]string{
				"batch.taskops.io/generation":          "3",
				"batch.taskops.io/scheduled-time":      "2026-01-01T00:00:00Z",
				"batch.taskops.io/retryable-exit-rule": "1",
			},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion:         "batch.taskops.io/v1alpha1",
				Kind:               "Task",
				Name:               "backup",
				UID:                task.UID,
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: batchv1.JobSpec{
			BackoffLimit:   ptr.To[int32](0),
			CompletionMode: ptr.To(batchv1.IndexedCompletion),
			Completions:    ptr.To[int32](1),
			Parallelism:    ptr.To[int32](1),
			PodFailurePolicy: &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{
				Action:          batchv1.PodFailurePolicyActionIgnore,
				OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}},
			}, {
				Action: batchv1.PodFailurePolicyActionFailJob,
				OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
					ContainerName: ptr.To("task"), Operator: batchv1.PodFailurePolicyOnExitCodesOpNotIn, Values: []int32{0},
				},
			}}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					RestartPolicy:                corev1.RestartPolicyNever,
					AutomountServiceAccountToken: ptr.To(false),
					// The shell is not PID 1, so it ends at SIGTERM.
					ShareProcessNamespace:         ptr.To(true),
					TerminationGracePeriodSeconds: ptr.To[int64](30),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](65532),
						RunAsGroup:     ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:                     "task",
						Image:                    "busybox:1.37",
						Command:                  []string{"/bin/sh", "-c", "echo $$GREETING && exit 0"},
						TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							RunAsNonRoot:             ptr.To(true),
						},
						Resources: corev1.ResourceRequirements{
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
						},
						Env: []corev1.EnvVar{
							{Name: "GREETING", Value: "hi"},
							{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password", Optional: ptr.To(true)}}},
							{Name: "LEVEL", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}, Key: "level"}}},
							{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							// The run context, last.
							{Name: "TASK_NAME", Value: "backup"},
							{Name: "TASK_NAMESPACE", Value: "team-a"},
							{Name: "TASK_RUN_ID", Value: "s1767225600"},
							{Name: "TASK_ATTEMPT", Value: "2"},
							{Name: "TASK_SCHEDULED_TIME", Value: "2026-01-01T00:00:00Z"},
						},
					}},
				},
			},
		},
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("Build() =\n%s\nwant\n%s", asJSON(t, got), asJSON(t, want))
	}
}

func TestTerminationGracePeriodComesFromTheSpecOrIs30(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  *int64
		want int64
	}{
		{"unset is the Kubernetes default", nil, 30},
		{"a script that cleans up gets its time", ptr.To[int64](120), 120},
		{"zero kills at once", ptr.To[int64](0), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := newTask(func(t *v1alpha1.Task) { t.Spec.TerminationGracePeriodSeconds = tc.set })
			pod := Build(task, "0", 1, nil, nil, testOpts).Spec.Template.Spec
			if got := ptr.Deref(pod.TerminationGracePeriodSeconds, -1); got != tc.want {
				t.Errorf("terminationGracePeriodSeconds = %d, want %d", got, tc.want)
			}
			if !ptr.Deref(pod.ShareProcessNamespace, false) {
				t.Error("shareProcessNamespace is not true: the task's process would be PID 1 and ignore SIGTERM")
			}
		})
	}
}

func TestBuildJobSpec(t *testing.T) {
	tests := []struct {
		name  string
		task  *v1alpha1.Task
		check func(t *testing.T, job *batchv1.Job)
	}{
		{"five replicas run as five indexed completions in parallel", newTask(withReplicas(5)), func(t *testing.T, job *batchv1.Job) {
			if *job.Spec.Completions != 5 || *job.Spec.Parallelism != 5 {
				t.Errorf("completions/parallelism = %d/%d, want 5/5", *job.Spec.Completions, *job.Spec.Parallelism)
			}
			if *job.Spec.CompletionMode != batchv1.IndexedCompletion {
				t.Errorf("completionMode = %s, want Indexed", *job.Spec.CompletionMode)
			}
		}},
		{"zero replicas (not defaulted) run one pod", newTask(withReplicas(0)), func(t *testing.T, job *batchv1.Job) {
			if *job.Spec.Completions != 1 || *job.Spec.Parallelism != 1 {
				t.Errorf("completions/parallelism = %d/%d, want 1/1", *job.Spec.Completions, *job.Spec.Parallelism)
			}
		}},
		{"the job never retries by itself", newTask(), func(t *testing.T, job *batchv1.Job) {
			if job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 0 {
				t.Errorf("backoffLimit = %v, want 0", job.Spec.BackoffLimit)
			}
		}},
		{"the job has no ttl of its own", newTask(), func(t *testing.T, job *batchv1.Job) {
			if job.Spec.TTLSecondsAfterFinished != nil {
				t.Errorf("ttlSecondsAfterFinished = %d, want unset", *job.Spec.TTLSecondsAfterFinished)
			}
		}},
		{"the job's activeDeadlineSeconds is the task's plus the backstop: the operator stops the attempt first", newTask(func(t *v1alpha1.Task) { t.Spec.ActiveDeadlineSeconds = ptr.To[int64](600) }), func(t *testing.T, job *batchv1.Job) {
			if got := ptr.Deref(job.Spec.ActiveDeadlineSeconds, 0); got != 660 {
				t.Errorf("activeDeadlineSeconds = %d, want 600 + 60", got)
			}
		}},
		{"no activeDeadlineSeconds leaves the job unbounded", newTask(), func(t *testing.T, job *batchv1.Job) {
			if job.Spec.ActiveDeadlineSeconds != nil {
				t.Errorf("activeDeadlineSeconds = %d, want unset", *job.Spec.ActiveDeadlineSeconds)
			}
		}},
		{"a run without a slot has no scheduled-time annotation", newTask(), func(t *testing.T, job *batchv1.Job) {
			if v, ok := job.Annotations[v1alpha1.AnnotationScheduledTime]; ok {
				t.Errorf("scheduled-time = %q, want none", v)
			}
			if job.Annotations[v1alpha1.AnnotationGeneration] != "3" {
				t.Errorf("generation annotation = %q, want 3", job.Annotations[v1alpha1.AnnotationGeneration])
			}
		}},
		{"a shell task's own image replaces the default", newTask(func(t *v1alpha1.Task) { t.Spec.Image = "alpine:3" }), func(t *testing.T, job *batchv1.Job) {
			if img := job.Spec.Template.Spec.Containers[0].Image; img != "alpine:3" {
				t.Errorf("image = %q, want alpine:3", img)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.check(t, Build(tt.task, runs.OneShot, 1, nil, nil, testOpts))
		})
	}
}

func TestBuildPodFailurePolicy(t *testing.T) {
	failJobOn := func(op batchv1.PodFailurePolicyOnExitCodesOperator, codes ...int32) batchv1.PodFailurePolicyRule {
		return batchv1.PodFailurePolicyRule{
			Action: batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				ContainerName: ptr.To("task"),
				Operator:      op,
				Values:        codes,
			},
		}
	}
	tests := []struct {
		name string
		task *v1alpha1.Task
		want []int32 // the exit codes that fail the Job as not retryable; nil: no such rule
	}{
		{"a shell task ignores disruptions and treats exit code 2 like any failure", newTask(), nil},
		{"a shell task fails the job at once on its nonRetryableExitCodes, sorted and unique",
			newTask(func(t *v1alpha1.Task) { t.Spec.NonRetryableExitCodes = []int32{65, 64, 65} }), []int32{64, 65}},
		{"an http task fails the job on the runner's bad definition (2) and client error (9)", httpTask(), []int32{2, 9}},
		{"an http task that retries all failures fails the job only on a bad definition", httpTask(withHTTP(&v1alpha1.HTTPSpec{RetryAllFailures: true})), []int32{2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := Build(tt.task, runs.OneShot, 1, nil, nil, testOpts)
			rules := job.Spec.PodFailurePolicy.Rules
			first := rules[0]
			if first.Action != batchv1.PodFailurePolicyActionIgnore || len(first.OnPodConditions) != 1 ||
				first.OnPodConditions[0].Type != corev1.DisruptionTarget {
				t.Errorf("first rule = %s, want Ignore on DisruptionTarget", asJSON(t, first))
			}
			want := []batchv1.PodFailurePolicyRule{first}
			if tt.want != nil {
				want = append(want, failJobOn(batchv1.PodFailurePolicyOnExitCodesOpIn, tt.want...))
			}
			// Last, any other exit code fails the Job through a rule, so
			// its Failed condition names the code; the annotation names
			// that rule as the retryable one.
			want = append(want, failJobOn(batchv1.PodFailurePolicyOnExitCodesOpNotIn, 0))
			if !equality.Semantic.DeepEqual(rules, want) {
				t.Errorf("rules = %s, want %s", asJSON(t, rules), asJSON(t, want))
			}
			if got, w := job.Annotations[v1alpha1.AnnotationRetryableExitRule], strconv.Itoa(len(want)-1); got != w {
				t.Errorf("retryable rule annotation = %q, want %q", got, w)
			}
		})
	}
}

func TestBuildHTTPTask(t *testing.T) {
	literalAndSecretHeaders := &v1alpha1.HTTPSpec{
		Method:         "POST",
		Body:           `{"price":"$(PRICE)$$"}`,
		SuccessCodes:   []int32{200, 202},
		TimeoutSeconds: 5,
		Headers: []v1alpha1.HTTPHeader{
			{Name: "Content-Type", Value: ptr.To("application/json")},
			{Name: "Authorization", ValueFrom: &v1alpha1.HeaderValueSource{SecretKeyRef: v1alpha1.KeySelector{Name: "api-token", Key: "bearer"}}},
		},
	}
	userEnv := func(t *v1alpha1.Task) {
		t.Spec.Env = []v1alpha1.EnvVar{{Name: "HTTPS_PROXY", Value: ptr.To("http://proxy:3128")}}
	}

	tests := []struct {
		name string
		task *v1alpha1.Task
		want []corev1.EnvVar
	}{
		{
			name: "an http task without spec.http gets GET, any 2xx and 30 seconds",
			task: httpTask(),
			want: []corev1.EnvVar{
				{Name: "TASK_HTTP_URL", Value: "https://example.com/hook"},
				{Name: "TASK_HTTP_METHOD", Value: "GET"},
				{Name: "TASK_HTTP_TIMEOUT_SECONDS", Value: "30"},
			},
		},
		{
			name: "an empty spec.http gets the same defaults",
			task: httpTask(withHTTP(&v1alpha1.HTTPSpec{})),
			want: []corev1.EnvVar{
				{Name: "TASK_HTTP_URL", Value: "https://example.com/hook"},
				{Name: "TASK_HTTP_METHOD", Value: "GET"},
				{Name: "TASK_HTTP_TIMEOUT_SECONDS", Value: "30"},
			},
		},
		{
			name: "user env comes first, then the request, then headers in order with only the secret one sensitive",
			task: httpTask(withHTTP(literalAndSecretHeaders), userEnv),
			want: []corev1.EnvVar{
				{Name: "HTTPS_PROXY", Value: "http://proxy:3128"},
				{Name: "TASK_HTTP_URL", Value: "https://example.com/hook"},
				{Name: "TASK_HTTP_METHOD", Value: "POST"},
				// $ doubled so the kubelet's $(VAR) expansion hands the runner the body verbatim.
				{Name: "TASK_HTTP_BODY", Value: `{"price":"$$(PRICE)$$$$"}`},
				{Name: "TASK_HTTP_SUCCESS_CODES", Value: "200,202"},
				{Name: "TASK_HTTP_TIMEOUT_SECONDS", Value: "5"},
				{Name: "TASK_HTTP_HEADER_0_NAME", Value: "Content-Type"},
				{Name: "TASK_HTTP_HEADER_0_VALUE", Value: "application/json"},
				{Name: "TASK_HTTP_HEADER_1_NAME", Value: "Authorization"},
				{Name: "TASK_HTTP_HEADER_1_VALUE", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "api-token"}, Key: "bearer",
				}}},
				{Name: "TASK_HTTP_HEADER_1_SENSITIVE", Value: "true"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := Build(tt.task, runs.OneShot, 1, nil, nil, testOpts)
			c := job.Spec.Template.Spec.Containers[0]
			if c.Image != testOpts.RunnerImage {
				t.Errorf("image = %q, want the runner image %q", c.Image, testOpts.RunnerImage)
			}
			if strings.Join(c.Command, " ") != "/task-runner" || strings.Join(c.Args, " ") != "http" {
				t.Errorf("command/args = %q %q, want [/task-runner] [http]", c.Command, c.Args)
			}
			want := append(tt.want,
				corev1.EnvVar{Name: "TASK_NAME", Value: "backup"}, corev1.EnvVar{Name: "TASK_NAMESPACE", Value: "team-a"},
				corev1.EnvVar{Name: "TASK_RUN_ID", Value: "0"}, corev1.EnvVar{Name: "TASK_ATTEMPT", Value: "1"})
			if !equality.Semantic.DeepEqual(c.Env, want) {
				t.Errorf("env =\n%s\nwant\n%s", asJSON(t, c.Env), asJSON(t, want))
			}
		})
	}
}

func TestEveryPodFieldReachesTheJob(t *testing.T) {
	claim := v1alpha1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}
	task := newTask(func(t *v1alpha1.Task) {
		t.Spec.NodeSelector = map[string]string{"pool": "batch"}
		t.Spec.Tolerations = []v1alpha1.Toleration{{Key: "dedicated", Operator: "Equal", Value: "batch", Effect: "NoSchedule"}}
		t.Spec.Affinity = &v1alpha1.Affinity{NodeAffinity: &v1alpha1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &v1alpha1.NodeSelector{
			NodeSelectorTerms: []v1alpha1.NodeSelectorTerm{{MatchExpressions: []v1alpha1.NodeSelectorRequirement{{Key: "zone", Operator: "In", Values: []string{"a"}}}}}}}}
		t.Spec.PriorityClassName = "batch-low"
		t.Spec.ImagePullSecrets = []v1alpha1.LocalObjectReference{{Name: "registry"}}
		t.Spec.Volumes = []v1alpha1.Volume{
			{Name: "scripts", ConfigMap: &v1alpha1.ConfigMapVolumeSource{Name: "scripts"}},
			{Name: "creds", Secret: &v1alpha1.SecretVolumeSource{SecretName: "creds"}},
			{Name: "scratch", EmptyDir: &v1alpha1.EmptyDirVolumeSource{}},
			{Name: "data", PersistentVolumeClaim: &claim},
		}
		t.Spec.VolumeMounts = []v1alpha1.VolumeMount{{Name: "scripts", MountPath: "/scripts", ReadOnly: true}, {Name: "scratch", MountPath: "/work", SubPath: "a"}}
		t.Spec.WorkingDir = "/work"
		t.Spec.SecurityContext = &v1alpha1.SecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](2000), FSGroup: ptr.To[int64](3000)}
		t.Spec.NonRetryableExitCodes = []int32{64, 3, 64}
	})
	job := Build(task, runs.OneShot, 1, nil, nil, testOpts)
	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	checks := []struct {
		what string
		ok   bool
	}{
		{"nodeSelector", equality.Semantic.DeepEqual(pod.NodeSelector, task.Spec.NodeSelector)},
		{"tolerations", asJSON(t, pod.Tolerations) == asJSON(t, task.Spec.Tolerations)},
		{"affinity", asJSON(t, pod.Affinity) == asJSON(t, task.Spec.Affinity)},
		{"priorityClassName", pod.PriorityClassName == "batch-low"},
		{"imagePullSecrets", len(pod.ImagePullSecrets) == 1 && pod.ImagePullSecrets[0].Name == "registry"},
		{"volumes", len(pod.Volumes) == 4 && pod.Volumes[0].ConfigMap.Name == "scripts" && pod.Volumes[1].Secret.SecretName == "creds" &&
			pod.Volumes[2].EmptyDir != nil && pod.Volumes[3].PersistentVolumeClaim.ClaimName == "data"},
		{"volumeMounts", equality.Semantic.DeepEqual(c.VolumeMounts, []corev1.VolumeMount{
			{Name: "scripts", MountPath: "/scripts", ReadOnly: true}, {Name: "scratch", MountPath: "/work", SubPath: "a"}})},
		{"workingDir", c.WorkingDir == "/work"},
		{"securityContext", *pod.SecurityContext.RunAsUser == 1000 && *pod.SecurityContext.RunAsGroup == 2000 && *pod.SecurityContext.FSGroup == 3000 &&
			*pod.SecurityContext.RunAsNonRoot},
		{"nonRetryableExitCodes", len(job.Spec.PodFailurePolicy.Rules) == 3 &&
			equality.Semantic.DeepEqual(job.Spec.PodFailurePolicy.Rules[1].OnExitCodes.Values, []int32{3, 64}) &&
			job.Spec.PodFailurePolicy.Rules[1].Action == batchv1.PodFailurePolicyActionFailJob},
	}
	for _, ck := range checks {
		if !ck.ok {
			t.Errorf("%s did not reach the Job: %s", ck.what, asJSON(t, job.Spec))
		}
	}
	// The Job shares nothing with the Task.
	pod.NodeSelector["pool"] = "changed"
	pod.Affinity.NodeAffinity = nil
	if task.Spec.NodeSelector["pool"] != "batch" || task.Spec.Affinity.NodeAffinity == nil {
		t.Error("the Job shares maps or pointers with the Task")
	}
}

func TestBuildNeverCarriesASecretValue(t *testing.T) {
	// The operator never reads Secrets, so the only way a value could leak
	// into the Job is by being copied from somewhere; check the whole Job
	// refers to the Secret by name and key only.
	task := httpTask(withHTTP(&v1alpha1.HTTPSpec{Headers: []v1alpha1.HTTPHeader{
		{Name: "X-Plain", Value: ptr.To("visible")},
		{Name: "Authorization", ValueFrom: &v1alpha1.HeaderValueSource{SecretKeyRef: v1alpha1.KeySelector{Name: "api-token", Key: "bearer"}}},
	}}))
	job := Build(task, runs.OneShot, 1, nil, nil, testOpts)
	env := envMap(job.Spec.Template.Spec.Containers[0])

	secret := env["TASK_HTTP_HEADER_1_VALUE"]
	if secret.Value != "" || secret.ValueFrom == nil || secret.ValueFrom.SecretKeyRef == nil ||
		secret.ValueFrom.SecretKeyRef.Name != "api-token" || secret.ValueFrom.SecretKeyRef.Key != "bearer" {
		t.Errorf("secret header value = %s, want only a secretKeyRef to api-token/bearer", asJSON(t, secret))
	}
	if v, ok := env["TASK_HTTP_HEADER_1_SENSITIVE"]; !ok || v.Value != "true" {
		t.Errorf("TASK_HTTP_HEADER_1_SENSITIVE = %q (set %v), want true", v.Value, ok)
	}
	if v, ok := env["TASK_HTTP_HEADER_0_SENSITIVE"]; ok {
		t.Errorf("TASK_HTTP_HEADER_0_SENSITIVE = %q, want unset for a literal header", v.Value)
	}
	if got := strings.Count(asJSON(t, job), `"api-token"`); got != 1 {
		t.Errorf("the Secret is referenced %d times in the Job, want exactly once (its secretKeyRef)", got)
	}
}

func TestBuildShellCommandReachesTheShellVerbatim(t *testing.T) {
	tests := []struct {
		name  string
		shell string
		want  string
	}{
		{"a script without dollars is passed unchanged", "echo hello", "echo hello"},
		{"the shell's pid survives the kubelet's $$ unescaping", "echo $$ > /tmp/pid", "echo $$$$ > /tmp/pid"},
		{"a command substitution is not taken for a kubelet variable", "echo $(HOSTNAME)", "echo $$(HOSTNAME)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Build(newTask(func(t *v1alpha1.Task) { t.Spec.Shell = tt.shell }), runs.OneShot, 1, nil, nil, testOpts).Spec.Template.Spec.Containers[0]
			want := []string{"/bin/sh", "-c", tt.want}
			if !equality.Semantic.DeepEqual(c.Command, want) {
				t.Errorf("command = %q, want %q", c.Command, want)
			}
			if c.Args != nil {
				t.Errorf("args = %q, want none", c.Args)
			}
		})
	}
}

func TestBuildPodTemplate(t *testing.T) {
	withPodMetadata := func(t *v1alpha1.Task) {
		t.Spec.PodMetadata = &v1alpha1.PodMetadata{
			Labels: map[string]string{
				"team":                  "data",
				"batch.taskops.io/task": "spoofed", // refused at admission; must lose anyway
			},
			Annotations: map[string]string{"prometheus.io/scrape": "false"},
		}
	}
	tests := []struct {
		name  string
		task  *v1alpha1.Task
		check func(t *testing.T, pod corev1.PodTemplateSpec, job *batchv1.Job)
	}{
		{"imagePullPolicy is Kubernetes' default unless the Task sets it", newTask(), func(t *testing.T, pod corev1.PodTemplateSpec, _ *batchv1.Job) {
			if p := pod.Spec.Containers[0].ImagePullPolicy; p != "" {
				t.Errorf("imagePullPolicy = %q, want unset (Kubernetes' rule)", p)
			}
		}},
		{"imagePullPolicy is passed through", newTask(func(t *v1alpha1.Task) { t.Spec.ImagePullPolicy = corev1.PullNever }), func(t *testing.T, pod corev1.PodTemplateSpec, _ *batchv1.Job) {
			if p := pod.Spec.Containers[0].ImagePullPolicy; p != corev1.PullNever {
				t.Errorf("imagePullPolicy = %q, want Never", p)
			}
		}},
		{"pod metadata is merged and the operator's labels win", newTask(withPodMetadata), func(t *testing.T, pod corev1.PodTemplateSpec, job *batchv1.Job) {
			want := map[string]string{
				"team":                         "data",
				"batch.taskops.io/task":        "backup",
				"batch.taskops.io/run":         "0",
				"batch.taskops.io/attempt":     "1",
				"app.kubernetes.io/managed-by": "task-operator",
			}
			if !equality.Semantic.DeepEqual(pod.Labels, want) {
				t.Errorf("pod labels = %v, want %v", pod.Labels, want)
			}
			if pod.Annotations["prometheus.io/scrape"] != "false" || len(pod.Annotations) != 1 {
				t.Errorf("pod annotations = %v, want only prometheus.io/scrape", pod.Annotations)
			}
			if _, ok := job.Labels["team"]; ok {
				t.Errorf("job labels = %v, want podMetadata labels on the pods only", job.Labels)
			}
		}},
		{"without a service account the token is not mounted", newTask(), func(t *testing.T, pod corev1.PodTemplateSpec, _ *batchv1.Job) {
			if pod.Spec.ServiceAccountName != "" {
				t.Errorf("serviceAccountName = %q, want empty", pod.Spec.ServiceAccountName)
			}
			if pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
				t.Errorf("automountServiceAccountToken = %v, want false", pod.Spec.AutomountServiceAccountToken)
			}
		}},
		{"with a service account the token mount is left to the account", newTask(withServiceAccount("deployer")), func(t *testing.T, pod corev1.PodTemplateSpec, _ *batchv1.Job) {
			if pod.Spec.ServiceAccountName != "deployer" {
				t.Errorf("serviceAccountName = %q, want deployer", pod.Spec.ServiceAccountName)
			}
			if pod.Spec.AutomountServiceAccountToken != nil {
				t.Errorf("automountServiceAccountToken = %v, want unset", *pod.Spec.AutomountServiceAccountToken)
			}
		}},
		{"a shell pod meets the restricted pod security standard", newTask(), checkRestricted},
		{"an http pod meets the restricted pod security standard", httpTask(withServiceAccount("caller")), checkRestricted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := Build(tt.task, runs.OneShot, 1, nil, nil, testOpts)
			tt.check(t, job.Spec.Template, job)
		})
	}
}

// checkRestricted checks the fields the Pod Security Standard "restricted"
// requires, the way the admission plugin evaluates them.
func checkRestricted(t *testing.T, pod corev1.PodTemplateSpec, _ *batchv1.Job) {
	t.Helper()
	ps := pod.Spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Errorf("pod runAsNonRoot not true")
	}
	if ps == nil || ps.RunAsUser == nil || *ps.RunAsUser != DefaultRunAsID || ps.RunAsGroup == nil || *ps.RunAsGroup != DefaultRunAsID {
		t.Errorf("pod runAsUser/runAsGroup not %d", DefaultRunAsID)
	}
	if ps == nil || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod seccompProfile not RuntimeDefault")
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy = %q, want Never", pod.Spec.RestartPolicy)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("containers = %d, want 1", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if c.Name != ContainerName || c.TerminationMessagePolicy != corev1.TerminationMessageFallbackToLogsOnError {
		t.Errorf("container %q terminationMessagePolicy %q, want task / FallbackToLogsOnError", c.Name, c.TerminationMessagePolicy)
	}
	cs := c.SecurityContext
	if cs == nil || cs.AllowPrivilegeEscalation == nil || *cs.AllowPrivilegeEscalation {
		t.Errorf("container allowPrivilegeEscalation not false")
	}
	if cs == nil || cs.Capabilities == nil || !equality.Semantic.DeepEqual(cs.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(cs.Capabilities.Add) != 0 {
		t.Errorf("container capabilities do not drop ALL and add nothing")
	}
	if cs == nil || cs.RunAsNonRoot == nil || !*cs.RunAsNonRoot {
		t.Errorf("container runAsNonRoot not true")
	}
	if cs != nil && (cs.Privileged != nil && *cs.Privileged || cs.RunAsUser != nil && *cs.RunAsUser == 0) {
		t.Errorf("container is privileged or root")
	}
	if pod.Spec.HostNetwork || pod.Spec.HostPID || pod.Spec.HostIPC || len(pod.Spec.Volumes) != 0 || len(c.Ports) != 0 {
		t.Errorf("pod uses host namespaces, volumes or ports")
	}
}

func TestBuildIsPure(t *testing.T) {
	task := newTask(withServiceAccount("sa"), func(t *v1alpha1.Task) {
		t.Spec.PodMetadata = &v1alpha1.PodMetadata{Labels: map[string]string{"team": "data"}, Annotations: map[string]string{"a": "b"}}
		t.Spec.Resources = &v1alpha1.Resources{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
		t.Spec.ActiveDeadlineSeconds = ptr.To[int64](60)
	})
	before := task.DeepCopy()

	first := Build(task, "m0123456789", 1, nil, nil, testOpts)
	second := Build(task, "m0123456789", 1, nil, nil, testOpts)
	if !equality.Semantic.DeepEqual(first, second) {
		t.Errorf("two builds differ:\n%s\n%s", asJSON(t, first), asJSON(t, second))
	}

	// Changing the Job must not reach back into the Task.
	first.Spec.Template.Labels["team"] = "changed"
	first.Spec.Template.Annotations["a"] = "changed"
	first.Spec.Template.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("2")
	*first.Spec.ActiveDeadlineSeconds = 1
	if !equality.Semantic.DeepEqual(task, before) {
		t.Errorf("Build shares state with the Task: task is now\n%s", asJSON(t, task))
	}
}

// The Jobs of a Task labelled for Kueue carry its Kueue labels and are
// created suspended, for Kueue to admit; other Tasks' Jobs are not.
func TestAKueueTasksJobIsCreatedSuspendedWithItsLabels(t *testing.T) {
	task := &v1alpha1.Task{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "k", UID: "u", Labels: map[string]string{
			v1alpha1.LabelKueueQueueName: "team", v1alpha1.LabelKueuePriorityClass: "high"}},
		Spec: v1alpha1.TaskSpec{Type: v1alpha1.TaskTypeShell, Shell: "true"},
	}
	job := Build(task, "0", 1, nil, nil, testOpts)
	if !ptr.Deref(job.Spec.Suspend, false) || job.Labels[v1alpha1.LabelKueueQueueName] != "team" || job.Labels[v1alpha1.LabelKueuePriorityClass] != "high" {
		t.Fatalf("suspend %v, labels %v", job.Spec.Suspend, job.Labels)
	}
	delete(task.Labels, v1alpha1.LabelKueueQueueName)
	if plain := Build(task, "0", 1, nil, nil, testOpts); plain.Spec.Suspend != nil {
		t.Fatalf("a Task without the Kueue label got suspend %v", *plain.Spec.Suspend)
	}
}

// A Task labelled for Kueue and for MultiKueue dispatch gets Jobs managed
// by MultiKueue from creation (the field is immutable); the dispatch label
// alone, or with another value, is a problem and changes nothing.
func TestMultiKueueDispatch(t *testing.T) {
	for _, tc := range []struct {
		name        string
		labels      map[string]string
		managedBy   string
		wantProblem string
	}{
		{"a Task with the Kueue queue and the dispatch label is dispatched",
			map[string]string{v1alpha1.LabelKueueQueueName: "team", v1alpha1.LabelDispatch: v1alpha1.DispatchMultiKueue}, v1alpha1.MultiKueueManagedBy, ""},
		{"a Task with the Kueue queue alone runs in this cluster",
			map[string]string{v1alpha1.LabelKueueQueueName: "team"}, "", ""},
		{"the dispatch label without a Kueue queue is a problem",
			map[string]string{v1alpha1.LabelDispatch: v1alpha1.DispatchMultiKueue}, "", "needs the label kueue.x-k8s.io/queue-name"},
		{"another dispatch value is a problem",
			map[string]string{v1alpha1.LabelKueueQueueName: "team", v1alpha1.LabelDispatch: "elsewhere"}, "", `the only value is "multikueue"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := &v1alpha1.Task{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "k", UID: "u", Labels: tc.labels},
				Spec:       v1alpha1.TaskSpec{Type: v1alpha1.TaskTypeShell, Shell: "true"},
			}
			job := Build(task, "0", 1, nil, nil, testOpts)
			if got := ptr.Deref(job.Spec.ManagedBy, ""); got != tc.managedBy {
				t.Errorf("spec.managedBy %q, want %q", got, tc.managedBy)
			}
			got := DispatchProblem(task)
			if (got == "") != (tc.wantProblem == "") || !strings.Contains(got, tc.wantProblem) {
				t.Errorf("DispatchProblem %q, want one containing %q", got, tc.wantProblem)
			}
		})
	}
}
