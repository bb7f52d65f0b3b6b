package reconciler_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/testutil"
)

// restrictedNamespace is a namespace that enforces and warns on the
// restricted Pod Security Standard.
func restrictedNamespace(t *testing.T) string {
	t.Helper()
	ns := newNamespace(t)
	obj := &corev1.Namespace{}
	must(t, k8s.Get(ctx, client.ObjectKey{Name: ns}, obj))
	obj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	obj.Labels["pod-security.kubernetes.io/warn"] = "restricted"
	must(t, k8s.Update(ctx, obj))
	return ns
}

// admitPod asks the API server, with Pod Security on, to create the pod a
// Job would create, as a dry run, and returns the warnings.
func admitPod(t *testing.T, job *batchv1.Job) []string {
	t.Helper()
	cfg, w := testutil.WarnOn(restCfg)
	c, err := client.New(cfg, client.Options{Scheme: testutil.Scheme()})
	must(t, err)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name + "-0-probe", Labels: job.Spec.Template.Labels},
		Spec:       *job.Spec.Template.Spec.DeepCopy(),
	}
	if err := c.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Fatalf("the pod of Job %s is refused: %v", job.Name, err)
	}
	return w.Take()
}

func TestTheJobOfAnHTTPTaskRunsTheRunnerWithSecretsByReferenceAndPassesRestricted(t *testing.T) {
	ns := restrictedNamespace(t)
	task := newTask(ns, "webhook", testutil.HTTP("https://hooks.example.com/deploy?key=x"), func(t *v1alpha1.Task) {
		t.Spec.HTTP = &v1alpha1.HTTPSpec{Method: "POST", Body: `{"v":1}`, SuccessCodes: []int32{200, 202}, TimeoutSeconds: 7,
			Headers: []v1alpha1.HTTPHeader{
				{Name: "Content-Type", Value: ptr.To("application/json")},
				{Name: "Authorization", ValueFrom: &v1alpha1.HeaderValueSource{SecretKeyRef: v1alpha1.KeySelector{Name: "hook", Key: "token"}}},
			}}
	})
	must(t, k8s.Create(ctx, task))
	job := waitJobs(t, task, 1)[0]

	pod := job.Spec.Template.Spec
	c := pod.Containers[0]
	if c.Image != jobOpts.RunnerImage || strings.Join(c.Command, " ") != "/task-runner" || strings.Join(c.Args, " ") != "http" {
		t.Fatalf("runner container: image %s command %v args %v", c.Image, c.Command, c.Args)
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	for name, want := range map[string]string{
		"TASK_HTTP_URL": "https://hooks.example.com/deploy?key=x", "TASK_HTTP_METHOD": "POST", "TASK_HTTP_BODY": `{"v":1}`,
		"TASK_HTTP_SUCCESS_CODES": "200,202", "TASK_HTTP_TIMEOUT_SECONDS": "7",
		"TASK_HTTP_HEADER_0_NAME": "Content-Type", "TASK_HTTP_HEADER_0_VALUE": "application/json",
		"TASK_HTTP_HEADER_1_NAME": "Authorization", "TASK_HTTP_HEADER_1_SENSITIVE": "true",
	} {
		if env[name].Value != want {
			t.Fatalf("%s = %q, want %q", name, env[name].Value, want)
		}
	}
	secret := env["TASK_HTTP_HEADER_1_VALUE"]
	if secret.Value != "" || secret.ValueFrom == nil || secret.ValueFrom.SecretKeyRef == nil ||
		secret.ValueFrom.SecretKeyRef.Name != "hook" || secret.ValueFrom.SecretKeyRef.Key != "token" {
		t.Fatalf("the Secret-backed header is not a secretKeyRef: %+v", secret)
	}
	if _, ok := env["TASK_HTTP_HEADER_0_SENSITIVE"]; ok {
		t.Fatal("a literal header is marked sensitive")
	}
	if ptr.Deref(pod.AutomountServiceAccountToken, true) {
		t.Fatal("the service account token is mounted without serviceAccountName")
	}
	if w := admitPod(t, &job); len(w) != 0 {
		t.Fatalf("Pod Security warnings for the http pod: %v", w)
	}
}

func TestAShellTaskOnARootImageRunsNonRootAndPassesRestricted(t *testing.T) {
	ns := restrictedNamespace(t)
	task := newTask(ns, "busybox", func(t *v1alpha1.Task) {
		t.Spec.Image = "busybox:1.37" // root by default
		t.Spec.Env = []v1alpha1.EnvVar{{Name: "MODE", Value: ptr.To("ci")}}
		t.Spec.PodMetadata = &v1alpha1.PodMetadata{Labels: map[string]string{"team": "ops"}, Annotations: map[string]string{"note": "x"}}
	})
	must(t, k8s.Create(ctx, task))
	job := waitJobs(t, task, 1)[0]
	sc := job.Spec.Template.Spec.SecurityContext
	if sc == nil || ptr.Deref(sc.RunAsUser, 0) == 0 || !ptr.Deref(sc.RunAsNonRoot, false) {
		t.Fatalf("pod security context: %+v", sc)
	}
	if w := admitPod(t, &job); len(w) != 0 {
		t.Fatalf("Pod Security warnings for the shell pod: %v", w)
	}
	if job.Spec.Template.Labels["team"] != "ops" || job.Spec.Template.Annotations["note"] != "x" {
		t.Fatalf("podMetadata not passed: %v %v", job.Spec.Template.Labels, job.Spec.Template.Annotations)
	}
}

// The control: the same namespace refuses a pod that is not restricted, so
// the checks above can fail.
func TestARestrictedNamespaceRefusesARootPod(t *testing.T) {
	ns := restrictedNamespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "root"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	err := k8s.Create(ctx, pod, client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Fatalf("a root pod was not refused by Pod Security: %v", err)
	}
}

// Every pod field a Task may set (contract v4, Pods) keeps its pods within
// the restricted Pod Security Standard, with no warning.
func TestATaskUsingEveryPodFieldPassesRestrictedWithNoWarning(t *testing.T) {
	ns := restrictedNamespace(t)
	task := newTask(ns, "every-field", func(t *v1alpha1.Task) {
		t.Spec.NodeSelector = map[string]string{"pool": "batch"}
		t.Spec.Tolerations = []v1alpha1.Toleration{{Key: "dedicated", Operator: "Equal", Value: "batch", Effect: "NoSchedule"}}
		t.Spec.Affinity = &v1alpha1.Affinity{NodeAffinity: &v1alpha1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1alpha1.PreferredSchedulingTerm{{
			Weight: 10, Preference: v1alpha1.NodeSelectorTerm{MatchExpressions: []v1alpha1.NodeSelectorRequirement{{Key: "zone", Operator: "In", Values: []string{"a"}}}}}}}}
		t.Spec.ImagePullSecrets = []v1alpha1.LocalObjectReference{{Name: "registry"}}
		t.Spec.Volumes = []v1alpha1.Volume{
			{Name: "scripts", ConfigMap: &v1alpha1.ConfigMapVolumeSource{Name: "scripts", DefaultMode: ptr.To[int32](0o555)}},
			{Name: "creds", Secret: &v1alpha1.SecretVolumeSource{SecretName: "creds"}},
			{Name: "scratch", EmptyDir: &v1alpha1.EmptyDirVolumeSource{}},
			{Name: "data", PersistentVolumeClaim: &v1alpha1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}},
		}
		t.Spec.VolumeMounts = []v1alpha1.VolumeMount{{Name: "scripts", MountPath: "/scripts", ReadOnly: true},
			{Name: "creds", MountPath: "/creds", ReadOnly: true}, {Name: "scratch", MountPath: "/work"}, {Name: "data", MountPath: "/data"}}
		t.Spec.WorkingDir = "/work"
		t.Spec.SecurityContext = &v1alpha1.SecurityContext{RunAsUser: ptr.To[int64](1000), RunAsGroup: ptr.To[int64](1000), FSGroup: ptr.To[int64](2000)}
		t.Spec.NonRetryableExitCodes = []int32{64}
		t.Spec.Shell = "/scripts/run.sh"
	})
	must(t, k8s.Create(ctx, task))
	job := waitJobs(t, task, 1)[0]
	if w := admitPod(t, &job); len(w) != 0 {
		t.Fatalf("Pod Security warnings for a pod using every field: %v", w)
	}
	if got := job.Spec.Template.Spec; got.NodeSelector["pool"] != "batch" || len(got.Volumes) != 4 || *got.SecurityContext.FSGroup != 2000 {
		t.Fatalf("the fields did not reach the Job: %+v", got)
	}
}

// The pods of every Task in samples/ pass restricted with no warning.
func TestThePodsOfEverySampleTaskPassRestricted(t *testing.T) {
	ns := restrictedNamespace(t)
	// The node-pool sample names a PriorityClass of the cluster.
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "batch-low"}, Value: -10}
	if err := k8s.Create(ctx, pc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(testutil.RepoRoot(), "samples", "*.yaml"))
	must(t, err)
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		must(t, err)
		for _, doc := range strings.Split(string(data), "\n---\n") {
			task := &v1alpha1.Task{}
			if err := yaml.Unmarshal([]byte(doc), task); err != nil || task.Kind != "Task" {
				continue
			}
			task.Namespace, task.UID = ns, "sample-uid"
			job := jobs.Build(task, "0", 1, nil, nil, jobOpts)
			if w := admitPod(t, job); len(w) != 0 {
				t.Errorf("%s: Pod Security warnings for task/%s: %v", filepath.Base(f), task.Name, w)
			}
			n++
		}
	}
	if n < 6 {
		t.Fatalf("only %d sample Tasks found", n)
	}
}
