//go:build reliability

package reliability

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// warningClient is an admin client that records the API server's warnings.
func warningClient(t *testing.T) (client.Client, *testutil.Warnings) {
	t.Helper()
	cfg, w := testutil.WarnOn(s.cluster.Config)
	c, err := schemeClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, w
}

// podFromTemplate is a pod as the Job controller would make it from a
// template (without the labels that tie it to the Job).
func podFromTemplate(ns, name string, tpl corev1.PodTemplateSpec) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: *tpl.ObjectMeta.DeepCopy(), Spec: *tpl.Spec.DeepCopy()}
	pod.Namespace, pod.Name = ns, name
	pod.Labels = withoutJobLabels(pod.Labels)
	return pod
}

func withoutJobLabels(l map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range l {
		if k == "controller-uid" || k == "job-name" || strings.HasPrefix(k, "batch.kubernetes.io/") {
			continue
		}
		out[k] = v
	}
	return out
}

// Scenario 11, Pod Security: every kind of Task runs in a namespace that
// enforces the restricted Pod Security Standard and warns about it, with
// zero warnings: the pods are admitted (the Tasks succeed, no FailedCreate),
// server-side dry runs of each Job and of a pod from its template get no
// warning, and the operator's log has no API warning. A shell Task on
// busybox (root by default) runs as a non-root UID. The manager
// Deployment's pod passes too, in its restricted namespace.
func TestS11PodSecurity(t *testing.T) {
	op := s.startOperator(t, "op", false)
	ns := s.newNamespace(t, "rel-pss", false)
	wc, warn := warningClient(t)
	ctx := ctxFor(t, 5*time.Minute)
	if err := wc.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "token"}, StringData: map[string]string{"token": "x"}}); err != nil {
		t.Fatal(err)
	}
	if err := wc.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "runner"}}); err != nil {
		t.Fatal(err)
	}
	tasks := []*v1alpha1.Task{
		testutil.NewTask(ns, "shell-busybox"), // the default image, busybox: root by default
		testutil.NewTask(ns, "shell-image", func(task *v1alpha1.Task) { task.Spec.Image = "docker.io/library/alpine:3.20" }),
		testutil.NewTask(ns, "shell-replicas", testutil.Replicas(3)),
		testutil.NewTask(ns, "shell-env-resources", func(task *v1alpha1.Task) {
			task.Spec.Env = []v1alpha1.EnvVar{
				{Name: "PLAIN", Value: ptr.To("x")},
				{Name: "SECRET", ValueFrom: &v1alpha1.EnvVarSource{SecretKeyRef: &v1alpha1.KeySelector{Name: "token", Key: "token"}}},
			}
			task.Spec.Resources = &v1alpha1.Resources{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
			}
			task.Spec.PodMetadata = &v1alpha1.PodMetadata{Labels: map[string]string{"team": "reliability"}}
		}),
		testutil.NewTask(ns, "shell-serviceaccount", func(task *v1alpha1.Task) { task.Spec.ServiceAccountName = "runner" }),
		testutil.NewTask(ns, "shell-deadline", testutil.ActiveDeadline(60)),
		testutil.NewTask(ns, "shell-cron", testutil.Schedule("@every 10s")),
		httpTask(ns, "http-literal", "https://example.com/", []v1alpha1.HTTPHeader{literalHeader("X-A", "b")}),
		httpTask(ns, "http-secret", "https://example.com/", []v1alpha1.HTTPHeader{secretHeader("Authorization", "token", "token")}),
	}
	for _, task := range tasks {
		if err := wc.Create(ctx, task); err != nil {
			t.Fatalf("creating Task %s: %v", task.Name, err)
		}
	}
	if w := warn.Take(); len(w) > 0 {
		t.Errorf("warnings creating the Tasks: %v", w)
	}
	// Control: the namespace enforces, and the warnings reach this client.
	rootPod := corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox:1.37"}}}
	if err := wc.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "root-pod"}, Spec: rootPod}, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
		t.Fatalf("control: a pod without a security context was not refused (err %v): the namespace does not enforce restricted", err)
	}
	if err := wc.Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "root-job"}, Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: rootPod}}}, client.DryRunAll); err != nil {
		t.Fatal(err)
	}
	if w := warn.Take(); len(w) == 0 {
		t.Fatalf("control: a Job whose pods break the restricted standard drew no warning: the warnings do not reach the test")
	}
	took := eventuallyTasks(t, 2*time.Minute, "every Task to succeed (the cron one: its first run)", note(op), ns, func(ctx context.Context, all map[string]*v1alpha1.Task) (bool, string) {
		var waiting []string
		for _, task := range all {
			ok := task.Status.Phase == v1alpha1.PhaseSucceeded
			if task.Spec.Schedule != nil {
				ok = task.Status.LastSuccessfulTime != nil
			}
			if !ok {
				waiting = append(waiting, task.Name+"="+string(task.Status.Phase))
			}
		}
		return len(waiting) == 0, "waiting for " + strings.Join(waiting, " ")
	})

	var jobList batchv1.JobList
	if err := s.c.List(ctx, &jobList, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := s.c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var warned []string
	checked := 0
	seenTask := map[string]bool{}
	for _, j := range jobList.Items {
		task := j.Labels[v1alpha1.LabelTask]
		if seenTask[task] {
			continue
		}
		seenTask[task] = true
		// The Job as a workload (Pod Security warns on pod templates) ...
		copyJob := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pss-" + j.Name[:min(len(j.Name), 50)]}, Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: withoutJobLabels(j.Spec.Template.Labels), Annotations: j.Spec.Template.Annotations}, Spec: *j.Spec.Template.Spec.DeepCopy()},
		}}
		if err := wc.Create(ctx, copyJob, client.DryRunAll); err != nil {
			t.Errorf("dry run of Job %s: %v", j.Name, err)
		}
		// ... and a pod from its template (enforced).
		if err := wc.Create(ctx, podFromTemplate(ns, "pss-"+j.Name[:min(len(j.Name), 50)], j.Spec.Template), client.DryRunAll); err != nil {
			t.Errorf("dry run of a pod of Job %s: %v", j.Name, err)
		}
		for _, w := range warn.Take() {
			warned = append(warned, j.Name+": "+w)
		}
		checked++
	}
	if len(warned) > 0 {
		t.Errorf("Pod Security warnings: %v", warned)
	}
	if checked != len(tasks) {
		t.Errorf("checked the Jobs of %d Tasks, want %d", checked, len(tasks))
	}
	nonRoot := 0
	for _, p := range pods.Items {
		psc := p.Spec.SecurityContext
		uid := int64(-1)
		if psc != nil && psc.RunAsUser != nil {
			uid = *psc.RunAsUser
		}
		for _, c := range p.Spec.Containers {
			if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
				uid = *c.SecurityContext.RunAsUser
			}
			csc := c.SecurityContext
			if csc == nil || csc.AllowPrivilegeEscalation == nil || *csc.AllowPrivilegeEscalation || csc.Capabilities == nil || len(csc.Capabilities.Drop) != 1 || csc.Capabilities.Drop[0] != "ALL" {
				t.Errorf("pod %s container %s: securityContext %+v", p.Name, c.Name, csc)
			}
		}
		if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || uid <= 0 || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("pod %s: securityContext %+v (uid %d): want runAsNonRoot, a non-zero UID and RuntimeDefault seccomp", p.Name, psc, uid)
			continue
		}
		nonRoot++
		if p.Labels[v1alpha1.LabelTask] == "shell-busybox" {
			if !strings.HasPrefix(p.Spec.Containers[0].Image, "busybox") || uid != 65532 {
				t.Errorf("busybox pod %s: image %s, uid %d; want busybox as 65532", p.Name, p.Spec.Containers[0].Image, uid)
			}
		}
		if sa := p.Labels[v1alpha1.LabelTask] == "shell-serviceaccount"; sa != (p.Spec.AutomountServiceAccountToken == nil || *p.Spec.AutomountServiceAccountToken) {
			t.Errorf("pod %s: automountServiceAccountToken %v (serviceAccountName %q)", p.Name, p.Spec.AutomountServiceAccountToken, p.Spec.ServiceAccountName)
		}
	}
	var events corev1.EventList
	if err := s.c.List(ctx, &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == "FailedCreate" || strings.Contains(e.Message, "PodSecurity") {
			t.Errorf("event %s on %s/%s: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
		}
	}
	opWarnings := bytes.Count(op.Log(), []byte("KubeAPIWarningLogger")) + bytes.Count(op.Log(), []byte("would violate PodSecurity"))
	if opWarnings > 0 {
		t.Errorf("the operator log has %d API warning(s)", opWarnings)
	}

	// The manager's own pod, in its namespace (enforce, warn and audit
	// restricted, as config/manager renders it).
	d := s.deployment
	mgrNS := &corev1.Namespace{}
	if err := s.c.Get(ctx, client.ObjectKey{Name: operatorNamespace}, mgrNS); err != nil {
		t.Fatal(err)
	}
	if mgrNS.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace %s: enforce=%q, want restricted", operatorNamespace, mgrNS.Labels["pod-security.kubernetes.io/enforce"])
	}
	dep := d.DeepCopy()
	dep.ResourceVersion, dep.UID = "", ""
	if err := wc.Create(ctx, dep, client.DryRunAll); err != nil {
		t.Errorf("dry run of the manager Deployment: %v", err)
	}
	if err := wc.Create(ctx, podFromTemplate(operatorNamespace, "manager-pss-check", d.Spec.Template), client.DryRunAll); err != nil {
		t.Errorf("dry run of the manager pod: %v", err)
	}
	mgrWarnings := warn.Take()
	if len(mgrWarnings) > 0 {
		t.Errorf("warnings for the manager Deployment/pod: %v", mgrWarnings)
	}
	figure(t, "%d Task types (shell busybox/other image/3 replicas/env+secret+resources+labels/serviceAccountName/activeDeadline/cron, http literal/Secret header) in an enforce+warn restricted namespace: all ran (%s); %d pods non-root (busybox as UID 65532), %d Pod Security warnings on Job and pod dry runs, %d in the operator log, %d for the manager Deployment and its pod",
		len(tasks), harness.Secs(took), nonRoot, len(warned), opWarnings, len(mgrWarnings))
}
