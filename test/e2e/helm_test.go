//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/internal/version"
	"github.com/taskops/task-operator/test/harness"
)

// The path a platform team takes with Helm: `helm install` of
// charts/task-operator (through Helm's own Go library) into a namespace
// they made restricted, with the release image on the real node. The
// operator becomes Available, a shell Task and an http Task succeed, and
// `helm uninstall` removes the operator and its RBAC but keeps the CRDs
// (helm.sh/resource-policy: keep), as docs/install.md says. The CRDs the
// suite installed are adopted by the release first, as a cluster moving to
// Helm does (Helm refuses objects it does not own). As in the kustomize
// test, the only change is KUBERNETES_SERVICE_HOST/PORT (extraEnv): there
// is no kube-proxy here.
//
// Not parallel: the operator process of TestMain is stopped meanwhile.
func TestTheHelmChartInstallsRunsTasksAndUninstallsKeepingTheCRDs(t *testing.T) {
	requireRealNode(t)
	state, err := env.cluster.State()
	if err != nil {
		t.Fatal(err)
	}
	crds := []string{"tasks.batch.taskops.io", "taskqueues.batch.taskops.io", "taskcalendars.batch.taskops.io"}
	waitNamespaceGone(t, deployNamespace)
	kubectl(t, 30*time.Second, "create", "namespace", deployNamespace)
	kubectl(t, 30*time.Second, "label", "namespace", deployNamespace, "pod-security.kubernetes.io/enforce=restricted")
	for _, crd := range crds {
		kubectl(t, 30*time.Second, "label", "crd", crd, "app.kubernetes.io/managed-by=Helm", "--overwrite")
		kubectl(t, 30*time.Second, "annotate", "crd", crd, "meta.helm.sh/release-name=task-operator", "meta.helm.sh/release-namespace="+deployNamespace, "--overwrite")
	}

	must(t, env.op.Stop())
	helm := helmConfig(t)
	uninstalled := false
	t.Cleanup(func() {
		if !uninstalled {
			_, _ = action.NewUninstall(helm).Run("task-operator")
		}
		undeploy(t)
		for _, crd := range crds {
			_, _ = env.runKubectl(context.Background(), "annotate", "crd", crd, "meta.helm.sh/release-name-", "meta.helm.sh/release-namespace-")
		}
		if _, err := env.op.Start(); err != nil {
			t.Errorf("restarting the operator process: %v", err)
		}
	})

	chrt, err := loader.Load(filepath.Join(env.ws.Root, "charts", "task-operator"))
	must(t, err)
	install := action.NewInstall(helm)
	install.ReleaseName, install.Namespace = "task-operator", deployNamespace
	install.Wait, install.Timeout = true, 150*time.Second
	start := time.Now()
	rel, err := install.Run(chrt, map[string]any{
		"extraEnv": []any{
			map[string]any{"name": "KUBERNETES_SERVICE_HOST", "value": state.BridgeIP},
			map[string]any{"name": "KUBERNETES_SERVICE_PORT", "value": state.APIServerPort},
		},
	})
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	t.Logf("helm install: release %s revision %d %s, Available %s after the install", rel.Name, rel.Version, rel.Info.Status, harness.Secs(time.Since(start)))
	pods := managerPods(t)
	if len(pods) != 1 || pods[0].Spec.Containers[0].Image != version.Image() {
		t.Fatalf("manager pods %v, want one running %s", harness.PodPhases(pods), version.Image())
	}
	// No GOMEMLIMIT in the chart's defaults: the operator sets the soft
	// limit from its container's memory limit (7/8 of the default 256Mi).
	if logs := kubectl(t, 20*time.Second, "logs", "-n", deployNamespace, pods[0].Name); !strings.Contains(logs, "Go soft memory limit set from the container's memory limit") || !strings.Contains(logs, "234881024") {
		t.Errorf("the operator's log does not say it set a soft memory limit of 234881024 bytes (7/8 of 256Mi):\n%s", logs)
	}

	ns := makeNamespace(t, "e2e-helm")
	srv := serveOnBridge(t)
	// The chart's MutatingAdmissionPolicy (this cluster serves v1) adds the
	// finalizer as the Task is created: the create response carries it, so
	// the operator has no patch to make for it. The API server applies a
	// new policy within moments: Tasks are created until one has it.
	probes := 0
	eventually(t, 30*time.Second, "a Task created with the finalizer", func(ctx context.Context) (bool, string) {
		probe := testutil.NewTask(ns, fmt.Sprintf("probe-%d", probes), testutil.Shell("true"))
		probes++
		if err := env.c.Create(ctx, probe); err != nil {
			return false, err.Error()
		}
		return slices.Contains(probe.Finalizers, v1alpha1.Finalizer), fmt.Sprintf("created with finalizers %v", probe.Finalizers)
	})
	t.Logf("the finalizer policy applied from probe %d on", probes)
	shell := testutil.NewTask(ns, "shell", testutil.Shell(`echo "run by the Helm release"`))
	create(t, shell)
	if !slices.Contains(shell.Finalizers, v1alpha1.Finalizer) {
		t.Errorf("Task shell was created with finalizers %v: the chart's policy did not add %s", shell.Finalizers, v1alpha1.Finalizer)
	}
	create(t, testutil.NewTask(ns, "http", testutil.HTTP(srv.url+"/deploy?task=http")))
	kubectlWait(t, ns, "condition=Ready", "task/shell", 90*time.Second)
	kubectlWait(t, ns, "condition=Ready", "task/http", 90*time.Second)
	if logs := kubectlTask(t, 30*time.Second, "logs", "shell", "-n", ns); !strings.Contains(logs, "run by the Helm release") {
		t.Errorf("kubectl task logs shell: %q", logs)
	}
	// `kubectl get tasks` says why in its REASON column (the Ready
	// condition's reason).
	if out := kubectl(t, 30*time.Second, "get", "task", "shell", "-n", ns); !strings.Contains(out, "REASON") || !strings.Contains(out, "Succeeded") {
		t.Errorf("kubectl get task shows no REASON column:\n%s", out)
	}
	// Tasks before the operator (docs/install.md, "Remove").
	kubectl(t, 90*time.Second, "delete", "tasks", "--all", "-n", ns, "--wait", "--timeout=80s")

	uninstall := action.NewUninstall(helm)
	uninstall.Wait, uninstall.Timeout = true, 90*time.Second
	res, err := uninstall.Run("task-operator")
	if err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	uninstalled = true
	t.Logf("helm uninstall: %s", strings.TrimSpace(res.Info))
	ctx := ctxFor(t, 30*time.Second)
	gone := []client.Object{
		&appsv1.Deployment{}, &corev1.ServiceAccount{}, &corev1.Service{},
	}
	names := []string{"task-operator-controller-manager", "task-operator-controller-manager", "task-operator-controller-manager-metrics"}
	for i, o := range gone {
		if err := env.c.Get(ctx, client.ObjectKey{Namespace: deployNamespace, Name: names[i]}, o); !apierrors.IsNotFound(err) {
			t.Errorf("after helm uninstall, %T %s: %v (want NotFound)", o, names[i], err)
		}
	}
	for _, name := range []string{"task-operator-manager", "task-operator-task-viewer", "task-operator-task-editor", "task-operator-taskqueue-admin"} {
		if err := env.c.Get(ctx, client.ObjectKey{Name: name}, &rbacv1.ClusterRole{}); !apierrors.IsNotFound(err) {
			t.Errorf("after helm uninstall, ClusterRole %s: %v (want NotFound)", name, err)
		}
	}
	// A Task created now gets no finalizer that no operator would remove.
	if err := env.c.Get(ctx, client.ObjectKey{Name: "task-operator-finalizer"}, &admissionregistrationv1.MutatingAdmissionPolicy{}); !apierrors.IsNotFound(err) {
		t.Errorf("after helm uninstall, MutatingAdmissionPolicy task-operator-finalizer: %v (want NotFound)", err)
	}
	for _, crd := range crds {
		if out, err := env.runKubectl(ctx, "get", "crd", crd, "-o", "name"); err != nil {
			t.Errorf("helm uninstall removed the CRD %s (it must keep it): %v\n%s", crd, err, out)
		}
	}
}

// helmConfig is Helm's action configuration for the local cluster, its
// releases stored as Secrets in the operator's namespace.
func helmConfig(t *testing.T) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig, ns := env.cluster.Kubeconfig, deployNamespace
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := new(action.Configuration)
	must(t, cfg.Init(flags, deployNamespace, "secret", func(format string, v ...any) { t.Logf("helm: "+format, v...) }))
	return cfg
}

// waitNamespaceGone waits until a namespace an earlier test deleted is
// gone, so it can be made again.
func waitNamespaceGone(t *testing.T, name string) {
	t.Helper()
	eventually(t, 120*time.Second, fmt.Sprintf("namespace %s to be gone", name), func(ctx context.Context) (bool, string) {
		var ns corev1.Namespace
		err := env.c.Get(ctx, client.ObjectKey{Name: name}, &ns)
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("phase %s", ns.Status.Phase)
	})
}
