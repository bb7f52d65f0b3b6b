// Package manifests_test checks the shipped kustomize configuration: it renders
// config/default with the project's kubectl (the kustomize that `make deploy`
// and `kubectl apply -k` use), applies the result to a real kube-apiserver
// (envtest) and checks the security standards on the rendered objects.
package manifests_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/internal/version"
)

// The names the rendered config/default must produce (the docs and the
// security standards name them).
const (
	namespace      = "task-operator-system"
	deploymentName = "task-operator-controller-manager"
	serviceAccount = "task-operator-controller-manager"
	metricsService = "task-operator-controller-manager-metrics"
	managerName    = "manager"
	// The role a Prometheus binds to scrape the metrics endpoint.
	metricsReaderRole = "task-operator-metrics-reader"
	// The role names controller-gen writes (Makefile: rbac:roleName=...).
	generatedRoleName = "task-operator-manager"
)

// The image config/manager/kustomization.yaml sets: the release image of
// this version, so a deployed operator's --runner-image is pinned too.
var defaultImage = version.Image()

// kubectl returns the project's kubectl (hack/k8s-binaries.sh builds it on
// first use), once per test binary.
var kubectl = sync.OnceValues(func() (string, error) {
	cmd := exec.Command(filepath.Join(testutil.RepoRoot(), "hack", "k8s-binaries.sh"), "kubectl")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("getting kubectl with hack/k8s-binaries.sh: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "kubectl"), nil
})

// render runs `kubectl kustomize dir` and parses the multi-document result.
func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k, err := kubectl()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(k, "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	objs, err := parse(out)
	if err != nil {
		t.Fatalf("parsing the output of kubectl kustomize %s: %v", dir, err)
	}
	if len(objs) == 0 {
		t.Fatalf("kubectl kustomize %s rendered nothing", dir)
	}
	return objs
}

func parse(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		m := map[string]any{}
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetName() == "" {
			return nil, fmt.Errorf("a document without kind or name:\n%s", doc)
		}
		objs = append(objs, u)
	}
}

var (
	defaultOnce sync.Once
	defaultObjs []*unstructured.Unstructured
)

// renderDefault renders config/default once per test binary.
func renderDefault(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	defaultOnce.Do(func() {
		defaultObjs = render(t, filepath.Join(testutil.RepoRoot(), "config", "default"))
	})
	if defaultObjs == nil {
		t.Fatal("rendering config/default failed earlier")
	}
	return defaultObjs
}

func find(objs []*unstructured.Unstructured, kind, ns, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetNamespace() == ns && o.GetName() == name {
			return o
		}
	}
	return nil
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// convert turns a rendered object into its typed form, failing on fields the
// type does not know (a typo in a manifest).
func convert(t *testing.T, u *unstructured.Unstructured, into runtime.Object) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}

func deployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	u := find(objs, "Deployment", namespace, deploymentName)
	if u == nil {
		t.Fatalf("no Deployment %s/%s rendered", namespace, deploymentName)
	}
	d := &appsv1.Deployment{}
	convert(t, u, d)
	return d
}

func managerContainer(t *testing.T, d *appsv1.Deployment) *corev1.Container {
	t.Helper()
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == managerName {
			return c
		}
	}
	t.Fatalf("Deployment %s has no container %q", d.Name, managerName)
	return nil
}

// flagValue is the value of --name=value in args, and whether it is there.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name {
			return "true", true
		}
	}
	return "", false
}

// expand resolves $(VAR) in s from the container's literal env values, the
// way the kubelet expands container args.
func expand(s string, c *corev1.Container) string {
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			s = strings.ReplaceAll(s, "$("+e.Name+")", e.Value)
		}
	}
	return s
}

// runnerImage is the --runner-image the manager container is started with.
func runnerImage(t *testing.T, objs []*unstructured.Unstructured) (runner, image string) {
	t.Helper()
	c := managerContainer(t, deployment(t, objs))
	v, ok := flagValue(c.Args, "runner-image")
	if !ok {
		t.Fatalf("manager args %q have no --runner-image", c.Args)
	}
	runner = expand(v, c)
	if strings.Contains(runner, "$(") {
		t.Fatalf("--runner-image=%s is left with an unresolved variable: %q (env %v)", v, runner, c.Env)
	}
	return runner, c.Image
}

func TestRenderedNames(t *testing.T) {
	objs := renderDefault(t)
	want := []struct{ kind, ns, name string }{
		{"Namespace", "", namespace},
		{"CustomResourceDefinition", "", "tasks.batch.taskops.io"},
		{"CustomResourceDefinition", "", "taskqueues.batch.taskops.io"},
		{"CustomResourceDefinition", "", "taskcalendars.batch.taskops.io"},
		{"ServiceAccount", namespace, serviceAccount},
		{"ClusterRole", "", generatedRoleName},
		{"ClusterRole", "", "task-operator-task-viewer"},
		{"ClusterRole", "", "task-operator-task-editor"},
		{"ClusterRole", "", "task-operator-taskqueue-admin"},
		{"ClusterRole", "", metricsReaderRole},
		{"Role", namespace, generatedRoleName},
		{"ClusterRoleBinding", "", "task-operator-manager"},
		{"RoleBinding", namespace, "task-operator-manager"},
		{"Deployment", namespace, deploymentName},
		{"Service", namespace, metricsService},
	}
	for _, w := range want {
		if find(objs, w.kind, w.ns, w.name) == nil {
			t.Errorf("no %s %q in namespace %q rendered", w.kind, w.name, w.ns)
		}
	}
	if len(objs) != len(want) {
		var got []string
		for _, o := range objs {
			got = append(got, o.GetKind()+" "+o.GetNamespace()+"/"+o.GetName())
		}
		t.Errorf("rendered %d objects, want %d: %v", len(objs), len(want), got)
	}
	for _, o := range objs {
		if ns := o.GetNamespace(); ns != "" && ns != namespace {
			t.Errorf("%s %s is in namespace %q, want %q", o.GetKind(), o.GetName(), ns, namespace)
		}
	}
}

func TestNamespaceEnforcesRestricted(t *testing.T) {
	u := find(renderDefault(t), "Namespace", "", namespace)
	if u == nil {
		t.Fatalf("no Namespace %s rendered", namespace)
	}
	for _, mode := range []string{"enforce", "warn"} {
		key := "pod-security.kubernetes.io/" + mode
		if got := u.GetLabels()[key]; got != "restricted" {
			t.Errorf("Namespace label %s = %q, want restricted", key, got)
		}
	}
}

// TestDeploymentPassesRestricted checks the fields the Pod Security Standard
// "restricted" asks for (TestApplyToAPIServer also has the API server's
// PodSecurity admission judge the pod), and the rest of the security
// standards: read-only root, probes, resources, leader election.
func TestDeploymentPassesRestricted(t *testing.T) {
	d := deployment(t, renderDefault(t))
	ps := d.Spec.Template.Spec
	psc := ps.SecurityContext
	if psc == nil {
		t.Fatal("the pod has no securityContext")
	}
	if !ptr.Deref(psc.RunAsNonRoot, false) {
		t.Error("pod runAsNonRoot is not true")
	}
	if ptr.Deref(psc.RunAsUser, -1) != 65532 || ptr.Deref(psc.RunAsGroup, -1) != 65532 {
		t.Errorf("pod runAsUser/runAsGroup = %v/%v, want 65532/65532", ptr.Deref(psc.RunAsUser, -1), ptr.Deref(psc.RunAsGroup, -1))
	}
	if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod seccompProfile = %v, want RuntimeDefault", psc.SeccompProfile)
	}
	if ps.HostNetwork || ps.HostPID || ps.HostIPC {
		t.Error("the pod uses a host namespace")
	}
	for _, v := range ps.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s is a hostPath", v.Name)
		}
	}
	if len(ps.InitContainers) != 0 || len(ps.EphemeralContainers) != 0 {
		t.Error("unexpected init or ephemeral containers: check them for restricted too")
	}
	if !ptr.Deref(ps.AutomountServiceAccountToken, true) {
		t.Error("automountServiceAccountToken is off: the manager needs its token")
	}
	if got := ptr.Deref(ps.TerminationGracePeriodSeconds, 30); got != 10 {
		t.Errorf("terminationGracePeriodSeconds = %d, want 10", got)
	}
	if len(ps.Containers) != 1 {
		t.Errorf("%d containers, want only %q", len(ps.Containers), managerName)
	}

	c := managerContainer(t, d)
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("the manager container has no securityContext")
	}
	if ptr.Deref(sc.AllowPrivilegeEscalation, true) {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if ptr.Deref(sc.Privileged, false) {
		t.Error("the container is privileged")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("capabilities = %+v, want drop [ALL] and no add", sc.Capabilities)
	}
	if !ptr.Deref(sc.ReadOnlyRootFilesystem, false) {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if ptr.Deref(sc.RunAsUser, 65532) != 65532 || !ptr.Deref(sc.RunAsNonRoot, true) {
		t.Error("the container overrides the pod's non-root user")
	}
	if sc.SeccompProfile != nil && sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container seccompProfile = %v", sc.SeccompProfile)
	}
	for _, p := range c.Ports {
		if p.HostPort != 0 {
			t.Errorf("port %s uses hostPort %d", p.Name, p.HostPort)
		}
	}

	if len(c.Command) != 1 || c.Command[0] != "/manager" {
		t.Errorf("command = %q, want [/manager]", c.Command)
	}
	for flag, want := range map[string]string{
		"leader-elect":              "true",
		"health-probe-bind-address": ":8081",
		"metrics-bind-address":      ":8443",
	} {
		if got, ok := flagValue(c.Args, flag); !ok || got != want {
			t.Errorf("--%s = %q (set: %v), want %q", flag, got, ok, want)
		}
	}
	// The Lease goes in the pod's own namespace, from the downward API.
	if v, ok := flagValue(c.Args, "leader-election-namespace"); ok {
		name, isVar := strings.CutPrefix(v, "$(")
		name = strings.TrimSuffix(name, ")")
		var fromPodNamespace bool
		for _, e := range c.Env {
			if isVar && e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
				e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
				fromPodNamespace = true
			}
		}
		if !fromPodNamespace && v != namespace {
			t.Errorf("--leader-election-namespace=%s is neither the pod's namespace nor %s", v, namespace)
		}
	}

	probe := func(what string, p *corev1.Probe, path string) {
		if p == nil || p.HTTPGet == nil {
			t.Errorf("no %s httpGet probe", what)
			return
		}
		port := p.HTTPGet.Port.IntValue()
		for _, cp := range c.Ports {
			if p.HTTPGet.Port.StrVal != "" && cp.Name == p.HTTPGet.Port.StrVal {
				port = int(cp.ContainerPort)
			}
		}
		if p.HTTPGet.Path != path || port != 8081 {
			t.Errorf("%s probe = %s on port %d, want %s on 8081", what, p.HTTPGet.Path, port, path)
		}
	}
	probe("liveness", c.LivenessProbe, "/healthz")
	probe("readiness", c.ReadinessProbe, "/readyz")

	for name, want := range map[string]string{
		"requests.cpu": "10m", "requests.memory": "64Mi", "limits.cpu": "500m", "limits.memory": "256Mi",
	} {
		list := c.Resources.Requests
		if strings.HasPrefix(name, "limits.") {
			list = c.Resources.Limits
		}
		q, ok := list[corev1.ResourceName(name[strings.Index(name, ".")+1:])]
		if !ok || q.String() != want {
			t.Errorf("resources %s = %v, want %s", name, q.String(), want)
		}
	}
}

func TestRunnerImageIsManagerImage(t *testing.T) {
	runner, image := runnerImage(t, renderDefault(t))
	if image != defaultImage {
		t.Errorf("manager image = %q, want %q", image, defaultImage)
	}
	if runner != image {
		t.Errorf("--runner-image = %q, want the manager's image %q", runner, image)
	}
}

// TestRunnerImageFollowsImageChanges changes the image the ways users do and
// checks that --runner-image follows each time.
func TestRunnerImageFollowsImageChanges(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cases := []struct {
		name string
		// edit changes the copy of config/ in root; returns the folder to render.
		edit func(t *testing.T, root string) string
		want string
	}{{
		// What `cd config/manager && kustomize edit set image
		// controller=example.com/x:v1` writes (kubebuilder's `make deploy`).
		name: "edit set image in config/manager",
		edit: func(t *testing.T, root string) string {
			p := filepath.Join(root, "config", "manager", "kustomization.yaml")
			editImages(t, p, "controller", map[string]any{"newName": "example.com/x", "newTag": "v1"})
			return filepath.Join(root, "config", "default")
		},
		want: "example.com/x:v1",
	}, {
		// An `images:` entry in config/default itself.
		name: "images in config/default",
		edit: func(t *testing.T, root string) string {
			p := filepath.Join(root, "config", "default", "kustomization.yaml")
			editImages(t, p, "ghcr.io/taskops/task-operator", map[string]any{"newName": "example.com/x", "newTag": "v1"})
			return filepath.Join(root, "config", "default")
		},
		want: "example.com/x:v1",
	}, {
		// An overlay of the user's (or `make deploy`'s temporary one, or Flux
		// or Argo CD image overrides) on top of config/default.
		name: "overlay with images",
		edit: func(t *testing.T, root string) string {
			return overlay(t, root, "newName: example.com/x\n  newTag: v1")
		},
		want: "example.com/x:v1",
	}, {
		name: "overlay with a digest",
		edit: func(t *testing.T, root string) string {
			return overlay(t, root, "newName: registry.local:5000/mirror/task-operator\n  digest: "+digest)
		},
		want: "registry.local:5000/mirror/task-operator@" + digest,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			copyDir(t, filepath.Join(testutil.RepoRoot(), "config"), filepath.Join(root, "config"))
			objs := render(t, tc.edit(t, root))
			runner, image := runnerImage(t, objs)
			if image != tc.want {
				t.Errorf("manager image = %q, want %q", image, tc.want)
			}
			if runner != image {
				t.Errorf("--runner-image = %q, want the manager's image %q", runner, image)
			}
		})
	}
}

// editImages sets the images: entry called name in the kustomization at p
// to the fields in set, adding the entry if needed.
func editImages(t *testing.T, p, name string, set map[string]any) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	k := map[string]any{}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	images, _ := k["images"].([]any)
	entry := map[string]any{"name": name}
	for i, im := range images {
		if m, ok := im.(map[string]any); ok && m["name"] == name {
			images = slices.Delete(images, i, i+1)
			break
		}
	}
	for f, v := range set {
		entry[f] = v
	}
	k["images"] = append(images, entry)
	out, err := yaml.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// overlay writes root/overlay/kustomization.yaml on top of config/default
// with one images: entry for the shipped image; fields are its YAML lines.
func overlay(t *testing.T, root, fields string) string {
	t.Helper()
	dir := filepath.Join(root, "overlay")
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n" +
		"resources:\n- ../config/default\n" +
		"images:\n- name: ghcr.io/taskops/task-operator\n  " + fields + "\n"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}

// rbacRules is every rule of every rendered Role and ClusterRole.
func rbacRules(t *testing.T, objs []*unstructured.Unstructured) map[string][]rbacv1.PolicyRule {
	t.Helper()
	rules := map[string][]rbacv1.PolicyRule{}
	for _, u := range ofKind(objs, "ClusterRole") {
		r := &rbacv1.ClusterRole{}
		convert(t, u, r)
		if r.AggregationRule != nil {
			t.Errorf("ClusterRole %s aggregates other roles", r.Name)
		}
		rules["ClusterRole "+r.Name] = r.Rules
	}
	for _, u := range ofKind(objs, "Role") {
		r := &rbacv1.Role{}
		convert(t, u, r)
		rules["Role "+r.Namespace+"/"+r.Name] = r.Rules
	}
	if len(rules) == 0 {
		t.Fatal("no roles rendered")
	}
	return rules
}

func TestRBACLeastPrivilege(t *testing.T) {
	readOnly := []string{"get", "list", "watch"}
	for role, rules := range rbacRules(t, renderDefault(t)) {
		for _, r := range rules {
			all := slices.Concat(r.APIGroups, r.Resources, r.Verbs, r.ResourceNames, r.NonResourceURLs)
			for _, s := range all {
				if strings.Contains(s, "*") {
					t.Errorf("%s: rule %+v has a wildcard", role, r)
				}
			}
			// Only the role a Prometheus binds reads a non-resource URL:
			// GET /metrics, which the manager's own endpoint asks about.
			scrape := role == "ClusterRole "+metricsReaderRole && slices.Equal(r.NonResourceURLs, []string{"/metrics"}) &&
				slices.Equal(r.Verbs, []string{"get"}) && len(r.Resources) == 0
			if len(r.NonResourceURLs) != 0 && !scrape {
				t.Errorf("%s: rule %+v grants non-resource URLs", role, r)
			}
			for _, v := range r.Verbs {
				if v == "escalate" || v == "bind" || v == "impersonate" {
					t.Errorf("%s: rule %+v grants %s", role, r, v)
				}
			}
			for _, res := range r.Resources {
				base, _, _ := strings.Cut(res, "/")
				core := slices.Contains(r.APIGroups, "")
				// Secrets: only listed, only in the operator's own
				// namespace (a Role), for the workers' read-only
				// kubeconfigs (internal/workers).
				if core && base == "secrets" && (!strings.HasPrefix(role, "Role ") || !slices.Equal(r.Verbs, []string{"list"})) {
					t.Errorf("%s: rule %+v mentions secrets", role, r)
				}
				if core && base == "pods" {
					// Pods are read (list) and so are logs (get), for an
					// attempt stopped while it ran; nothing else of pods.
					for _, v := range r.Verbs {
						if !slices.Contains(readOnly, v) || (res != "pods" && res != "pods/log") {
							t.Errorf("%s: rule %+v lets the manager %s %s", role, r, v, res)
						}
					}
				}
				if slices.Contains(r.APIGroups, "rbac.authorization.k8s.io") || slices.Contains(r.APIGroups, "apiextensions.k8s.io") {
					t.Errorf("%s: rule %+v touches RBAC or CRDs", role, r)
				}
			}
		}
	}
}

// TestServiceAccountIsBound checks that the Deployment runs as the rendered
// ServiceAccount, that every rendered role is bound to exactly it, and that
// every binding points at a rendered role (so the prefixed names line up).
func TestServiceAccountIsBound(t *testing.T) {
	objs := renderDefault(t)
	d := deployment(t, objs)
	sa := d.Spec.Template.Spec.ServiceAccountName
	if sa != serviceAccount {
		t.Errorf("the Deployment runs as ServiceAccount %q, want %q", sa, serviceAccount)
	}
	if find(objs, "ServiceAccount", d.Namespace, sa) == nil {
		t.Fatalf("the Deployment's ServiceAccount %s/%s is not rendered", d.Namespace, sa)
	}
	want := rbacv1.Subject{Kind: "ServiceAccount", Name: sa, Namespace: d.Namespace}

	bound := map[string]bool{}
	check := func(binding string, ref rbacv1.RoleRef, subjects []rbacv1.Subject, ns string) {
		if !slices.Equal(subjects, []rbacv1.Subject{want}) {
			t.Errorf("%s binds %+v, want only %+v", binding, subjects, want)
		}
		if ref.APIGroup != rbacv1.GroupName {
			t.Errorf("%s: roleRef.apiGroup = %q", binding, ref.APIGroup)
		}
		if find(objs, ref.Kind, ns, ref.Name) == nil {
			t.Errorf("%s refers to %s %q in namespace %q, which is not rendered", binding, ref.Kind, ref.Name, ns)
		}
		bound[ref.Kind+" "+ns+"/"+ref.Name] = true
	}
	for _, u := range ofKind(objs, "ClusterRoleBinding") {
		b := &rbacv1.ClusterRoleBinding{}
		convert(t, u, b)
		check("ClusterRoleBinding "+b.Name, b.RoleRef, b.Subjects, "")
	}
	for _, u := range ofKind(objs, "RoleBinding") {
		b := &rbacv1.RoleBinding{}
		convert(t, u, b)
		ns := b.Namespace
		if b.RoleRef.Kind == "ClusterRole" {
			ns = ""
		}
		check("RoleBinding "+b.Namespace+"/"+b.Name, b.RoleRef, b.Subjects, ns)
	}
	people := 0
	for _, u := range slices.Concat(ofKind(objs, "ClusterRole"), ofKind(objs, "Role")) {
		if forPeople(u.GetLabels()) {
			// The roles people bind (README, "Who can do what"): never the
			// manager's, bound through the built-in roles they aggregate into.
			people++
			if bound[u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName()] {
				t.Errorf("%s %s is for people, but the manager is bound to it", u.GetKind(), u.GetName())
			}
			continue
		}
		key := u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
		if u.GetName() == metricsReaderRole {
			// For the scraper (docs/install.md, "Metrics"), never the manager.
			if bound[key] {
				t.Errorf("%s is for Prometheus, but the manager is bound to it", key)
			}
			continue
		}
		if !bound[key] {
			t.Errorf("%s is not bound to the manager", key)
		}
	}
	if people != 3 {
		t.Errorf("%d ClusterRoles for people rendered, want 3 (task viewer, task editor, taskqueue admin)", people)
	}
}

// forPeople reports whether a role is aggregated into the built-in view,
// edit or admin roles: one for people, not for the manager.
func forPeople(labels map[string]string) bool {
	for _, k := range []string{"rbac.authorization.k8s.io/aggregate-to-view", "rbac.authorization.k8s.io/aggregate-to-edit", "rbac.authorization.k8s.io/aggregate-to-admin"} {
		if labels[k] == "true" {
			return true
		}
	}
	return false
}

func TestMetricsService(t *testing.T) {
	objs := renderDefault(t)
	u := find(objs, "Service", namespace, metricsService)
	if u == nil {
		t.Fatalf("no Service %s rendered", metricsService)
	}
	svc := &corev1.Service{}
	convert(t, u, svc)
	d := deployment(t, objs)
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not match the manager pod (labels %v)", k, v, d.Spec.Template.Labels)
		}
	}
	if len(svc.Spec.Selector) == 0 {
		t.Error("the Service selects nothing")
	}
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("ports = %+v, want one", svc.Spec.Ports)
	}
	p := svc.Spec.Ports[0]
	if p.Name != "https-metrics" || p.Port != 8443 {
		t.Errorf("port = %s %d, want https-metrics 8443", p.Name, p.Port)
	}
	target := p.TargetPort.IntValue()
	for _, cp := range managerContainer(t, d).Ports {
		if p.TargetPort.StrVal != "" && cp.Name == p.TargetPort.StrVal {
			target = int(cp.ContainerPort)
		}
	}
	if target != 8443 {
		t.Errorf("targetPort %s does not reach the manager's metrics port 8443", p.TargetPort.String())
	}
}

// startBareAPIServer starts a kube-apiserver + etcd (envtest) without the
// CRD, stopped when the test ends.
func startBareAPIServer(t *testing.T) *rest.Config {
	t.Helper()
	env, err := testutil.NewEnv()
	if err != nil {
		t.Fatal(err)
	}
	env.CRDDirectoryPaths, env.ErrorIfCRDPathMissing = nil, false
	cfg, stop, err := testutil.StartEnv(env)
	if err != nil {
		t.Fatalf("starting the API server: %v", err)
	}
	t.Cleanup(stop)
	return cfg
}

// TestApplyToAPIServer applies the rendered config/default to a real
// kube-apiserver: the Namespace for real, everything else with server-side
// dry-run. Then it creates the RBAC objects for real and asks the API server
// what the manager's ServiceAccount may do, and has PodSecurity admission
// judge the manager's pod in the restricted namespace.
func TestApplyToAPIServer(t *testing.T) {
	objs := renderDefault(t)

	// The CRD is one of the rendered objects: create it from the rendering,
	// not from config/crd/bases.
	cfg := startBareAPIServer(t)
	cfg, warn := testutil.WarnOn(cfg)
	c, err := client.New(cfg, client.Options{Scheme: testutil.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(2*time.Minute))
	defer cancel()

	ns := find(objs, "Namespace", "", namespace)
	if ns == nil {
		t.Fatalf("no Namespace %s rendered", namespace)
	}
	if err := c.Create(ctx, ns.DeepCopy()); err != nil {
		t.Fatalf("creating Namespace %s: %v", namespace, err)
	}
	for _, o := range objs {
		if o == ns {
			continue
		}
		what := fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName())
		if err := c.Create(ctx, o.DeepCopy(), client.DryRunAll); err != nil {
			t.Errorf("server-side dry-run create of %s: %v", what, err)
		}
		if w := warn.Take(); len(w) > 0 {
			t.Errorf("the API server warned about %s: %q", what, w)
		}
	}
	if t.Failed() {
		return
	}

	t.Run("RBAC", func(t *testing.T) {
		for _, o := range objs {
			switch o.GetKind() {
			case "ServiceAccount", "ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding":
				if err := c.Create(ctx, o.DeepCopy()); err != nil {
					t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
		}
		user := "system:serviceaccount:" + namespace + ":" + serviceAccount
		type access struct {
			verb, group, resource, sub, ns string
		}
		allowed := []access{
			{"create", "batch", "jobs", "", "default"},
			{"watch", "batch", "jobs", "", ""},
			{"list", "", "pods", "", "team-a"},
			{"get", "", "pods", "log", "team-a"},
			{"watch", "batch.taskops.io", "tasks", "", ""},
			{"patch", "batch.taskops.io", "tasks", "status", "team-a"},
			{"update", "batch.taskops.io", "tasks", "finalizers", "team-a"},
			{"create", "events.k8s.io", "events", "", "team-a"},
			{"get", "coordination.k8s.io", "leases", "", namespace},
			{"create", "coordination.k8s.io", "leases", "", namespace},
			{"update", "coordination.k8s.io", "leases", "", namespace},
			{"list", "", "secrets", "", namespace},
		}
		denied := []access{
			{"get", "", "secrets", "", "default"},
			{"list", "", "secrets", "", ""},
			{"list", "", "secrets", "", "default"},
			{"watch", "", "secrets", "", namespace},
			{"get", "", "secrets", "", namespace},
			{"create", "", "pods", "", "default"},
			{"delete", "", "pods", "", "default"},
			{"patch", "", "pods", "", namespace},
			{"create", "", "pods", "exec", "default"},
			{"create", "coordination.k8s.io", "leases", "", "default"},
			{"update", "coordination.k8s.io", "leases", "", "kube-system"},
			{"create", "batch.taskops.io", "tasks", "", "default"},
			{"update", "apiextensions.k8s.io", "customresourcedefinitions", "", ""},
			{"create", "rbac.authorization.k8s.io", "clusterrolebindings", "", ""},
		}
		ask := func(a access) bool {
			sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
				User:   user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
				ResourceAttributes: &authzv1.ResourceAttributes{
					Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.sub, Namespace: a.ns,
				},
			}}
			if err := c.Create(ctx, sar); err != nil {
				t.Fatalf("SubjectAccessReview: %v", err)
			}
			return sar.Status.Allowed
		}
		// The RBAC authorizer sees new roles and bindings through informers:
		// wait until every binding just created has reached it.
		deadline := time.Now().Add(testutil.Timeout(30 * time.Second))
		for !(ask(allowed[0]) && ask(allowed[len(allowed)-1])) {
			if time.Now().After(deadline) {
				t.Fatal("the manager's RBAC never took effect")
			}
			time.Sleep(100 * time.Millisecond) // polling interval, not a condition
		}
		for _, a := range allowed {
			if !ask(a) {
				t.Errorf("the manager may not %s %s/%s (group %q) in namespace %q, but needs to", a.verb, a.resource, a.sub, a.group, a.ns)
			}
		}
		for _, a := range denied {
			if ask(a) {
				t.Errorf("the manager may %s %s/%s (group %q) in namespace %q", a.verb, a.resource, a.sub, a.group, a.ns)
			}
		}
	})

	t.Run("PodSecurity", func(t *testing.T) {
		d := deployment(t, objs)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "manager-pod", Labels: d.Spec.Template.Labels},
			Spec:       *d.Spec.Template.Spec.DeepCopy(),
		}
		if err := c.Create(ctx, pod.DeepCopy(), client.DryRunAll); err != nil {
			t.Errorf("the manager's pod is refused in namespace %s: %v", namespace, err)
		}
		if w := warn.Take(); len(w) > 0 {
			t.Errorf("the API server warned about the manager's pod: %q", w)
		}

		// Control: the namespace really enforces restricted, so the check
		// above means something.
		bad := pod.DeepCopy()
		bad.Name = "not-restricted"
		bad.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true)
		err := c.Create(ctx, bad, client.DryRunAll)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PodSecurity") {
			t.Errorf("a pod allowing privilege escalation got %v, want PodSecurity to forbid it", err)
		}
		warn.Take()
	})
}
