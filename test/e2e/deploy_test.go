//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/internal/version"
	"github.com/taskops/task-operator/test/harness"
)

const (
	deployNamespace = "task-operator-system"
	deployLease     = "task-operator.batch.taskops.io"
)

// The path a user takes with the release's install.yaml (`make release`:
// kustomize build config/default, what `make deploy` applies too: the CRDs, the
// generated RBAC, the ServiceAccount, the restricted namespace, the
// Deployment with its probes and leader election, the metrics Service)
// applied with the release image of `make image`, on the real node. Two
// replicas: it reaches Available, runs a Task, and when the leader's pod is
// deleted the other replica takes over and runs the next one. The only
// change is an overlay that points the pods at the API server on the node's
// bridge (KUBERNETES_SERVICE_HOST/PORT): there is no kube-proxy here.
//
// Not parallel: the operator process of TestMain is stopped meanwhile, so
// only the deployed one acts. Last, the uninstall docs/install.md gives:
// the Tasks first, then kubectl delete -f install.yaml, after which
// nothing it made is left (the CRDs are restored for the other tests).
func TestInstallYamlRunsTasksFailsOverAndUninstallsCompletely(t *testing.T) {
	requireRealNode(t)
	state, err := env.cluster.State()
	if err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(env.ws.Root, "tmp", "e2e-deploy")
	must(t, os.RemoveAll(overlay))
	must(t, os.MkdirAll(overlay, 0o755))
	// The release's install.yaml, as `make release` writes it.
	render := exec.Command("go", "run", "./hack/release", "manifests", "-version", version.Version, "-out", overlay)
	render.Dir = env.ws.Root
	if out, err := render.CombinedOutput(); err != nil {
		t.Fatalf("rendering install.yaml: %v\n%s", err, out)
	}
	writeOverlay(t, overlay, "install.yaml", version.Version, 2, state)

	// The operator process stands down while the deployed one runs.
	must(t, env.op.Stop())
	// Cleanups run last-registered first, each even if one before failed
	// the test: the operator process restarts whatever the undo said.
	t.Cleanup(func() {
		if _, err := env.op.Start(); err != nil {
			t.Errorf("restarting the operator process: %v", err)
		}
	})
	t.Cleanup(func() {
		undeploy(t)
		restoreCRDs(t) // the uninstall deleted them
	})

	start := time.Now()
	kubectl(t, 60*time.Second, "apply", "--server-side", "--force-conflicts", "-k", overlay)
	kubectl(t, 150*time.Second, "-n", deployNamespace, "wait", "--for=condition=Available", "deployment/task-operator-controller-manager", "--timeout=140s")
	kubectl(t, 150*time.Second, "-n", deployNamespace, "rollout", "status", "deployment/task-operator-controller-manager", "--timeout=140s")
	t.Logf("install.yaml with 2 replicas Available %s after the apply", harness.Secs(time.Since(start)))
	pods := managerPods(t)
	if len(pods) != 2 {
		t.Fatalf("manager pods %v, want 2", harness.PodPhases(pods))
	}
	for _, p := range pods {
		if img := p.Spec.Containers[0].Image; img != version.Image() {
			t.Errorf("manager pod %s runs %s, want the release image %s", p.Name, img, version.Image())
		}
	}

	ns := makeNamespace(t, "e2e-deployed")
	create(t, testutil.NewTask(ns, "first", testutil.Shell(`echo "run by the deployed operator"`)))
	kubectlWait(t, ns, "condition=Ready", "task/first", 90*time.Second)
	if logs := kubectlTask(t, 30*time.Second, "logs", "first", "-n", ns); !strings.Contains(logs, "run by the deployed operator") {
		t.Errorf("kubectl task logs first: %q", logs)
	}

	leader := leaderPod(t, pods)
	scrapeLikePrometheus(t, leader, ns)

	deleted := time.Now()
	must(t, env.c.Delete(ctxFor(t, 10*time.Second), &leader))
	t.Logf("deleted the leader's pod %s", leader.Name)
	create(t, testutil.NewTask(ns, "second", testutil.Shell(`echo "after the failover"`)))
	kubectlWait(t, ns, "condition=Ready", "task/second", 120*time.Second)
	t.Logf("a Task created after the leader's pod was deleted was Ready %s later", harness.Secs(time.Since(deleted)))
	if now := leaderPod(t, managerPods(t)); now.Name == leader.Name {
		t.Errorf("the Lease still names the deleted pod %s", leader.Name)
	}

	// Uninstall as docs/install.md says: the Tasks first, while the
	// operator runs (their finalizers need it), then `kubectl delete -f
	// install.yaml`, which removes everything it made, the CRDs included.
	kubectl(t, 120*time.Second, "delete", "tasks", "--all", "--all-namespaces", "--wait", "--timeout=110s")
	kubectl(t, 150*time.Second, "delete", "-f", filepath.Join(overlay, "install.yaml"), "--wait", "--timeout=140s")
	for _, args := range [][]string{
		{"get", "crd", "tasks.batch.taskops.io"}, {"get", "crd", "taskqueues.batch.taskops.io"},
		{"get", "namespace", deployNamespace}, {"get", "clusterrole", "task-operator-manager"}, {"get", "clusterrole", "task-operator-task-viewer"},
	} {
		out, err := env.runKubectl(ctxFor(t, 20*time.Second), args...)
		if err == nil || !strings.Contains(out, "NotFound") {
			t.Errorf("after kubectl delete -f install.yaml, kubectl %s: %s", strings.Join(args, " "), out)
		}
	}
}

// scrapeLikePrometheus reaches the leader's metrics endpoint as a
// Prometheus in the cluster does, on the pod's IP: HTTPS with a
// ServiceAccount's token. Without a token it is refused; with the token of a
// ServiceAccount bound to install.yaml's metrics-reader ClusterRole it gets
// the per-Task series of the Task that ran in ns, labelled with ns.
func scrapeLikePrometheus(t *testing.T, leader corev1.Pod, ns string) {
	t.Helper()
	mon := makeNamespace(t, "e2e-monitoring")
	token, _ := harness.MetricsTokens(ctxFor(t, 30*time.Second), t, env.c, mon, "task-operator-metrics-reader")
	url := "https://" + net.JoinHostPort(leader.Status.PodIP, "8443") + "/metrics"
	get := func(token string) (int, string) { return harness.Scrape(url, token) }
	// Polled: the pod's /readyz does not wait for the metrics server.
	eventually(t, 30*time.Second, "a scrape without a token to be refused (401)", func(context.Context) (bool, string) {
		code, body := get("")
		return code == http.StatusUnauthorized, fmt.Sprintf("status %d, %.200s", code, body)
	})
	want := `taskoperator_task_last_run_success{namespace="` + ns + `",task="first"} 1`
	eventually(t, 30*time.Second, "an authorized scrape with the Task's series", func(context.Context) (bool, string) {
		code, body := get(token)
		return code == http.StatusOK && strings.Contains(body, want), fmt.Sprintf("status %d, %.300s", code, body)
	})
	t.Logf("GET %s: 401 without a token; 200 with a metrics-reader token, with %s", url, want)
}

func managerPods(t *testing.T) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	must(t, env.c.List(ctxFor(t, 10*time.Second), &list, client.InNamespace(deployNamespace),
		client.MatchingLabels{"control-plane": "controller-manager"}))
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// leaderPod is the manager pod the leader Lease names (its holder identity
// starts with the pod's hostname, which is its name).
func leaderPod(t *testing.T, pods []corev1.Pod) corev1.Pod {
	t.Helper()
	var found corev1.Pod
	eventually(t, 60*time.Second, "a manager pod to hold the Lease", func(ctx context.Context) (bool, string) {
		var lease coordinationv1.Lease
		if err := env.c.Get(ctx, client.ObjectKey{Namespace: deployNamespace, Name: deployLease}, &lease); err != nil {
			return false, err.Error()
		}
		holder := ""
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		for _, p := range pods {
			if strings.HasPrefix(holder, p.Name) {
				found = p
				return true, ""
			}
		}
		return false, fmt.Sprintf("holder %q, pods %v", holder, harness.PodPhases(pods))
	})
	return found
}

// undeploy removes what the test deployed, except the CRD (the other tests
// use it): the operator's namespace and its cluster-wide RBAC. It waits for
// the manager pods to be gone, so no two operators ever act at once.
func undeploy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(90*time.Second))
	defer cancel()
	for _, args := range [][]string{
		{"delete", "namespace", deployNamespace, "--ignore-not-found", "--wait=false"},
		{"delete", "clusterrole,clusterrolebinding", "-l", "app.kubernetes.io/part-of=task-operator", "--ignore-not-found"},
	} {
		if out, err := env.runKubectl(ctx, args...); err != nil {
			t.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	eventually(t, 90*time.Second, "the deployed operator's pods to be gone", func(ctx context.Context) (bool, string) {
		var list corev1.PodList
		err := env.c.List(ctx, &list, client.InNamespace(deployNamespace))
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err.Error()
		}
		return len(list.Items) == 0, fmt.Sprintf("pods %v", harness.PodPhases(list.Items))
	})
}
