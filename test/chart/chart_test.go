// Package chart tests the Helm chart (charts/task-operator) with Helm's own
// library: it lints, and its default render is install.yaml's objects
// (kustomize build config/default) apart from Helm's labels, so the two
// install paths cannot drift.
package chart

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/version"
)

const (
	chartDir  = "../../charts/task-operator"
	namespace = "task-operator-system"
)

func load(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// render renders the chart as `helm template <release> -n
// task-operator-system --set ...` would, and returns its objects by
// kind/namespace/name.
func render(t *testing.T, release string, values map[string]any) map[string]*unstructured.Unstructured {
	t.Helper()
	return renderFor(t, chartutil.DefaultCapabilities, release, values)
}

// renderFor is render against a cluster of the given capabilities (the
// API versions it serves).
func renderFor(t *testing.T, caps *chartutil.Capabilities, release string, values map[string]any) map[string]*unstructured.Unstructured {
	t.Helper()
	c := load(t)
	vals, err := chartutil.ToRenderValues(c, values, chartutil.ReleaseOptions{Name: release, Namespace: namespace, IsInstall: true, Revision: 1}, caps)
	if err != nil {
		t.Fatal(err)
	}
	files, err := engine.Render(c, vals)
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]*unstructured.Unstructured{}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, o := range parse(t, name, files[name]) {
			// Helm sets the release namespace on namespaced objects
			// that name none.
			if o.GetNamespace() == "" && namespaced(o.GetKind()) {
				o.SetNamespace(namespace)
			}
			objs[key(o)] = o
		}
	}
	return objs
}

func namespaced(kind string) bool {
	switch kind {
	case "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Namespace", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding":
		return false
	}
	return true
}

func parse(t *testing.T, name, text string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(text, "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, doc)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

func key(o *unstructured.Unstructured) string {
	return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
}

func kustomizeDefault(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), "../../config/default")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]*unstructured.Unstructured{}
	for _, o := range parse(t, "kustomize build config/default", string(raw)) {
		objs[key(o)] = o
	}
	return objs
}

// helmOnly are the labels and annotations the chart adds to what
// install.yaml has.
var helmOnly = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "helm.sh/resource-policy"}

func withoutHelm(o *unstructured.Unstructured) map[string]any {
	o = o.DeepCopy()
	labels, annotations := o.GetLabels(), o.GetAnnotations()
	for _, k := range helmOnly {
		delete(labels, k)
		delete(annotations, k)
	}
	o.SetLabels(labels)
	o.SetAnnotations(annotations)
	return o.Object
}

func TestTheChartsDefaultsRenderInstallYamlsObjects(t *testing.T) {
	chartObjs := render(t, "task-operator", nil)
	want := kustomizeDefault(t)
	for k, w := range want {
		if w.GetKind() == "Namespace" {
			// Helm installs into an existing namespace (or one
			// --create-namespace makes); docs/install.md labels it.
			continue
		}
		got, ok := chartObjs[k]
		if !ok {
			t.Errorf("the chart does not render %s", k)
			continue
		}
		if d := cmp.Diff(withoutHelm(w), withoutHelm(got)); d != "" {
			t.Errorf("%s differs from install.yaml's (-install.yaml +chart):\n%s", k, d)
		}
	}
	for k := range chartObjs {
		if _, ok := want[k]; !ok {
			t.Errorf("the chart's defaults render %s, which install.yaml does not have", k)
		}
	}
}

// TestTheChartLints is `helm lint --strict` through Helm's library: a
// warning fails as an error does.
func TestTheChartLints(t *testing.T) {
	l := action.NewLint()
	l.Strict = true
	l.Namespace = namespace
	res := l.Run([]string{chartDir}, nil)
	for _, m := range res.Messages {
		t.Logf("helm lint: %s", m)
	}
	for _, err := range res.Errors {
		t.Errorf("helm lint --strict: %v", err)
	}
}

// TestTheSchemaRejectsWhatTheChartDoesNotRead: values.schema.json closes
// the keys the chart owns, so a stray block (the botched edit that once
// replaced fullnameOverride) or a typo fails the install instead of being
// ignored, and the defaults pass it.
func TestTheSchemaRejectsWhatTheChartDoesNotRead(t *testing.T) {
	c := load(t)
	for _, tc := range []struct {
		name   string
		values string
		want   string // in the error; "" for valid values
	}{
		{"the defaults", ``, ""},
		{"every key the chart reads", `
fullnameOverride: ops
nameOverride: tasks
finalizerPolicy: {enabled: false, namespaces: [team-a]}
metrics: {secure: false, readers: [{namespace: monitoring, name: prometheus-k8s}], serviceMonitor: {enabled: true, interval: 1m}}
`, ""},
		{"a stray top-level block", `
fullfinalizerPolicy:
  enabled: true
  namespaces: []
`, "fullfinalizerPolicy"},
		{"a typo in a block the chart owns", `
finalizerPolicy:
  namespace: [team-a]
`, "namespace"},
		{"a wrong type", `replicas: "2"`, "replicas"},
		{"a flag without its dashes", `extraArgs: [max-concurrent-reconciles=64]`, "extraArgs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var vals map[string]any
			if err := yaml.Unmarshal([]byte(tc.values), &vals); err != nil {
				t.Fatal(err)
			}
			_, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{Name: "ops", Namespace: namespace, IsInstall: true}, chartutil.DefaultCapabilities)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("valid values refused: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("values accepted; want an error naming %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error does not name %q: %v", tc.want, err)
			default:
				t.Logf("%v", err)
			}
		})
	}
}

func TestTheChartIsTheReleaseVersion(t *testing.T) {
	for k, o := range kustomizeDefault(t) {
		if o.GetKind() == "CustomResourceDefinition" && o.GetLabels()["app.kubernetes.io/version"] != version.Release {
			t.Errorf("%s is labelled version %q, want %s (config/crd/kustomization.yaml)", k, o.GetLabels()["app.kubernetes.io/version"], version.Release)
		}
	}
	c := load(t)
	if c.Metadata.AppVersion != version.Release || "v"+c.Metadata.Version != version.Release {
		t.Errorf("Chart.yaml has version %s and appVersion %s; the release is %s (internal/version)", c.Metadata.Version, c.Metadata.AppVersion, version.Release)
	}
	// The icon, image and links of Artifact Hub's annotations name the
	// release too.
	raw, err := os.ReadFile(chartDir + "/Chart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range regexp.MustCompile(`v[0-9]+\.[0-9]+\.[0-9]+[^/\s]*`).FindAllString(string(raw), -1) {
		if v != version.Release {
			t.Errorf("Chart.yaml names %s; the release is %s", v, version.Release)
		}
	}
}

// TestTheChartListsItsCRDsForArtifactHub: the artifacthub.io/crds
// annotation lists exactly the CRDs the chart installs.
func TestTheChartListsItsCRDsForArtifactHub(t *testing.T) {
	var listed []struct{ Kind, Version, Name string }
	if err := yaml.Unmarshal([]byte(load(t).Metadata.Annotations["artifacthub.io/crds"]), &listed); err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, l := range listed {
		got = append(got, l.Name+" "+l.Kind+" "+l.Version)
	}
	for _, o := range kustomizeDefault(t) {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		vs, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		for _, v := range vs {
			want = append(want, o.GetName()+" "+kind+" "+v.(map[string]any)["name"].(string))
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("artifacthub.io/crds in Chart.yaml differs from the CRDs (-installed +listed):\n%s", d)
	}
}

func TestTheChartsValuesShapeWhatTheyName(t *testing.T) {
	objs := render(t, "ops", map[string]any{
		"replicas":            2,
		"extraArgs":           []any{"--max-concurrent-reconciles=64"},
		"nodeSelector":        map[string]any{"pool": "system"},
		"priorityClassName":   "system-cluster-critical",
		"podDisruptionBudget": map[string]any{"enabled": true},
		"networkPolicy":       map[string]any{"enabled": true},
		"crds":                map[string]any{"keep": false},
		"image":               map[string]any{"repository": "registry.example.com/task-operator", "tag": "v9.9.9"},
		"metrics": map[string]any{"serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "kps"}},
			"readers": []any{map[string]any{"namespace": "monitoring", "name": "prometheus-k8s"}}},
		"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "kps"}},
	})
	kinds := map[string]int{}
	names := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		names[o.GetKind()+"/"+o.GetName()] = true
		if n := o.GetName(); o.GetKind() != "CustomResourceDefinition" && !strings.HasPrefix(n, "ops-task-operator") {
			t.Errorf("%s is not named for the release", key(o))
		}
		if _, kept := o.GetAnnotations()["helm.sh/resource-policy"]; kept {
			t.Errorf("%s keeps the resource policy with crds.keep=false", key(o))
		}
	}
	// Every binding names a role and a ServiceAccount the chart renders.
	for _, o := range objs {
		if k := o.GetKind(); k != "RoleBinding" && k != "ClusterRoleBinding" {
			continue
		}
		ref, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
		kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
		if !names[kind+"/"+ref] {
			t.Errorf("%s binds %s %s, which the chart does not render", key(o), kind, ref)
		}
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		if ref == "ops-task-operator-metrics-reader" {
			if len(subjects) != 1 || fmt.Sprint(subjects[0]) != "map[kind:ServiceAccount name:prometheus-k8s namespace:monitoring]" {
				t.Errorf("metrics.readers bound %v, want monitoring/prometheus-k8s", subjects)
			}
			continue
		}
		for _, s := range subjects {
			sa := s.(map[string]any)
			if !names["ServiceAccount/"+sa["name"].(string)] || sa["namespace"] != namespace {
				t.Errorf("%s binds %v, which the chart does not render", key(o), sa)
			}
		}
	}
	deploy := objs["Deployment/"+namespace+"/ops-task-operator-controller-manager"]
	if deploy == nil {
		t.Fatalf("no Deployment; rendered %v", slices.Sorted(maps.Keys(objs)))
	}
	replicas, _, _ := unstructured.NestedFieldNoCopy(deploy.Object, "spec", "replicas")
	sa, _, _ := unstructured.NestedString(deploy.Object, "spec", "template", "spec", "serviceAccountName")
	pc, _, _ := unstructured.NestedString(deploy.Object, "spec", "template", "spec", "priorityClassName")
	ns, _, _ := unstructured.NestedStringMap(deploy.Object, "spec", "template", "spec", "nodeSelector")
	containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	args := strings.Join(toStrings(c["args"]), " ")
	env := c["env"].([]any)
	runner := env[1].(map[string]any)["value"]
	checks := []struct {
		what string
		ok   bool
	}{
		{"replicas", fmt.Sprint(replicas) == "2"},
		{"serviceAccountName", names["ServiceAccount/"+sa]},
		{"priorityClassName", pc == "system-cluster-critical"},
		{"nodeSelector", ns["pool"] == "system"},
		{"image", c["image"] == "registry.example.com/task-operator:v9.9.9" && runner == c["image"]},
		{"extraArgs", strings.Contains(args, "--max-concurrent-reconciles=64") && strings.Contains(args, "--leader-elect")},
		{"podDisruptionBudget", kinds["PodDisruptionBudget"] == 1},
		{"networkPolicy", kinds["NetworkPolicy"] == 1},
		{"crds", kinds["CustomResourceDefinition"] == 3},
	}
	for _, ck := range checks {
		if !ck.ok {
			t.Errorf("value %s did not reach the objects", ck.what)
		}
	}
	sm := objs["ServiceMonitor/"+namespace+"/ops-task-operator-controller-manager-metrics"]
	if sm == nil || sm.GetLabels()["release"] != "kps" {
		t.Fatalf("no ServiceMonitor with the release label: %v", sm)
	}
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if honor := endpoints[0].(map[string]any)["honorLabels"]; honor != true {
		t.Error("the ServiceMonitor must honor the Tasks' namespace label (honorLabels: true)")
	}
	rule := objs["PrometheusRule/"+namespace+"/ops-task-operator"]
	if rule == nil || rule.GetLabels()["release"] != "kps" {
		t.Fatalf("no PrometheusRule with the release label; rendered %v", slices.Sorted(maps.Keys(objs)))
	}
	raw, _ := yaml.Marshal(rule.Object)
	if !strings.Contains(string(raw), "{{ $labels.namespace }}") {
		t.Errorf("the rules' own templates must reach Prometheus as written:\n%s", raw)
	}

	// metrics.secure=false: plain HTTP on 8080, everywhere the port is named.
	plain := render(t, "task-operator", map[string]any{"metrics": map[string]any{"secure": false, "serviceMonitor": map[string]any{"enabled": true}},
		"networkPolicy": map[string]any{"enabled": true}})
	for _, k := range []string{"Deployment/" + namespace + "/task-operator-controller-manager", "Service/" + namespace + "/task-operator-controller-manager-metrics",
		"ServiceMonitor/" + namespace + "/task-operator-controller-manager-metrics", "NetworkPolicy/" + namespace + "/task-operator-controller-manager"} {
		raw, _ := yaml.Marshal(plain[k].Object)
		if s := string(raw); plain[k] == nil || !strings.Contains(s, "http-metrics") || strings.Contains(s, "https") || strings.Contains(s, "8443") {
			t.Errorf("metrics.secure=false: %s still names the HTTPS port:\n%s", k, s)
		}
	}
	if args := fmt.Sprint(plain["Deployment/"+namespace+"/task-operator-controller-manager"].Object); !strings.Contains(args, "--metrics-secure=false") {
		t.Error("metrics.secure=false does not pass --metrics-secure=false")
	}

	none := render(t, "task-operator", map[string]any{"crds": map[string]any{"install": false}})
	for k := range none {
		if strings.HasPrefix(k, "CustomResourceDefinition/") {
			t.Errorf("crds.install=false still renders %s", k)
		}
	}
}

func toStrings(v any) []string {
	var out []string
	for _, s := range v.([]any) {
		out = append(out, s.(string))
	}
	sort.Strings(out)
	return out
}

// The shipped ServiceMonitor (config/prometheus) and the chart's keep the
// Tasks' namespace label (honorLabels), select the metrics Service, and
// scrape it as it serves: HTTPS with Prometheus' own token.
func TestTheShippedServiceMonitorHonorsTheTasksNamespaceLabel(t *testing.T) {
	raw, err := os.ReadFile("../../config/prometheus/servicemonitor.yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs := parse(t, "servicemonitor.yaml", string(raw))
	if len(objs) != 1 {
		t.Fatalf("%d objects", len(objs))
	}
	endpoints, _, _ := unstructured.NestedSlice(objs[0].Object, "spec", "endpoints")
	selector, _, _ := unstructured.NestedStringMap(objs[0].Object, "spec", "selector", "matchLabels")
	svc := kustomizeDefault(t)["Service/"+namespace+"/task-operator-controller-manager-metrics"]
	for k, v := range selector {
		if svc.GetLabels()[k] != v {
			t.Errorf("the ServiceMonitor selects %s=%s, which the metrics Service does not have", k, v)
		}
	}
	if len(endpoints) != 1 {
		t.Fatalf("endpoints %v, want one", endpoints)
	}
	ep := endpoints[0].(map[string]any)
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if ep["honorLabels"] != true || ep["port"] != ports[0].(map[string]any)["name"] || ep["scheme"] != "https" ||
		ep["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
		t.Errorf("endpoint %v: want the Service's port %v, honorLabels: true, scheme https with the pod's token", ep, ports[0])
	}
}

// The finalizer policy is rendered where the cluster serves
// MutatingAdmissionPolicy v1 (not in install.yaml, which must install on
// older clusters too), binds its own policy, adds exactly the operator's
// finalizer on CREATE, and with finalizerPolicy.namespaces only there.
func TestTheFinalizerPolicyRendersWhereTheClusterServesIt(t *testing.T) {
	caps := chartutil.DefaultCapabilities.Copy()
	caps.APIVersions = append(caps.APIVersions, "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy")
	name := "ops-task-operator-finalizer"
	objs := renderFor(t, caps, "ops", nil)
	policy, binding := objs["MutatingAdmissionPolicy//"+name], objs["MutatingAdmissionPolicyBinding//"+name]
	if policy == nil || binding == nil {
		t.Fatalf("no policy or binding %s; rendered %v", name, slices.Sorted(maps.Keys(objs)))
	}
	if ref, _, _ := unstructured.NestedString(binding.Object, "spec", "policyName"); ref != name {
		t.Errorf("the binding names policy %q", ref)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(binding.Object, "spec", "matchResources"); found {
		t.Error("the default binding selects namespaces")
	}
	mutations, _, _ := unstructured.NestedSlice(policy.Object, "spec", "mutations")
	expr, _, _ := unstructured.NestedString(mutations[0].(map[string]any), "applyConfiguration", "expression")
	if !strings.Contains(expr, `finalizers: ["`+v1alpha1.Finalizer+`"]`) {
		t.Errorf("the policy does not add %s: %s", v1alpha1.Finalizer, expr)
	}
	ops, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConstraints", "resourceRules")
	if fmt.Sprint(ops) != "[map[apiGroups:[batch.taskops.io] apiVersions:[*] operations:[CREATE] resources:[tasks]]]" {
		t.Errorf("the policy matches %v, want Task creates only", ops)
	}

	// The sample for install.yaml users is the same policy.
	text, err := os.ReadFile("../../config/samples/policies/add-finalizer.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range parse(t, "add-finalizer.yaml", string(text)) {
		rendered := objs[o.GetKind()+"//"+name]
		if rendered == nil {
			t.Fatalf("the sample has %s, the chart does not", key(o))
		}
		spec, _, _ := unstructured.NestedMap(o.Object, "spec")
		want, _, _ := unstructured.NestedMap(rendered.Object, "spec")
		if o.GetKind() == "MutatingAdmissionPolicyBinding" {
			spec["policyName"] = name
		}
		if d := cmp.Diff(want, spec); d != "" {
			t.Errorf("the sample's %s differs from the chart's (-chart +sample):\n%s", o.GetKind(), d)
		}
	}

	objs = renderFor(t, caps, "ops", map[string]any{"finalizerPolicy": map[string]any{"namespaces": []any{"team-a", "team-b"}}})
	sel, _, _ := unstructured.NestedSlice(objs["MutatingAdmissionPolicyBinding//"+name].Object, "spec", "matchResources", "namespaceSelector", "matchExpressions")
	if fmt.Sprint(sel) != "[map[key:kubernetes.io/metadata.name operator:In values:[team-a team-b]]]" {
		t.Errorf("finalizerPolicy.namespaces selects %v", sel)
	}
	objs = renderFor(t, caps, "ops", map[string]any{"finalizerPolicy": map[string]any{"enabled": false}})
	if objs["MutatingAdmissionPolicy//"+name] != nil {
		t.Error("finalizerPolicy.enabled=false still renders the policy")
	}
}
