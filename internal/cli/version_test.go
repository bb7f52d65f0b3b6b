package cli

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/internal/version"
)

func TestVersionPrintsThePluginsAndTheClustersVersions(t *testing.T) {
	code, out, _ := runCLI(t, "version", "--client")
	if code != ExitOK || out != "kubectl-task: "+version.Version+"\n" {
		t.Fatalf("version --client: code %d, %q", code, out)
	}

	// The CRD as install.yaml labels it, and an operator Deployment in
	// a namespace the plugin is not told about.
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	crd.SetName("tasks.batch.taskops.io")
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"app.kubernetes.io/version":"v9.8.7"}}}`))
	if err := k8s.Patch(suiteCtx, crd, patch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.Patch(suiteCtx, crd, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"app.kubernetes.io/version":null}}}`)))
	})
	ns := newNamespace(t)
	labels := map[string]string{"app.kubernetes.io/name": "task-operator", "control-plane": "controller-manager"}
	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "task-operator-controller-manager", Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "manager", Image: "registry.example.com:5000/task-operator:v9.8.6"}}}}},
	}
	if err := k8s.Create(suiteCtx, deploy); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, "version")
	want := []string{"kubectl-task: " + version.Version + "\n", "CRDs: v9.8.7\n", "operator: v9.8.6 (" + ns + "/task-operator-controller-manager, 0/0 replicas ready)\n"}
	for _, w := range want {
		if code != ExitOK || !strings.Contains(out, w) {
			t.Errorf("version: code %d, output lacks %q:\n%s%s", code, w, out, stderr)
		}
	}
}
