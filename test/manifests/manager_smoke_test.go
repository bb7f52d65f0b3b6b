package manifests_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// managerBinaryEnv names a built manager binary (e.g. bin/manager from
// `make build`) for TestManagerReplicasWithRenderedRBAC; without it the test
// builds ./cmd/manager itself.
const managerBinaryEnv = "TASK_OPERATOR_MANAGER_BINARY"

// TestManagerReplicasWithRenderedRBAC runs two manager processes with the
// rendered Deployment's args, as the rendered ServiceAccount (impersonated,
// so only the rendered RBAC applies), against a real API server. It checks
// that the RBAC is enough to elect a leader and run a Task, that exactly one
// replica leads, and that the standby takes over when the leader stops
// within the Deployment's termination grace period.
// managerSetup is a bare API server with everything config/default renders
// but the Deployment and the Service, and the manager binary with the
// Deployment's args and a kubeconfig of its ServiceAccount.
type managerSetup struct {
	bin, kubeconfig string
	args            []string
	c               client.Client
	ctx             context.Context
}

func setupManager(t *testing.T) *managerSetup {
	t.Helper()
	bin := os.Getenv(managerBinaryEnv)
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "manager")
		if err := harness.BuildManager(testutil.RepoRoot(), bin); err != nil {
			t.Fatal(err)
		}
	}
	if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	objs := renderDefault(t)
	d := deployment(t, objs)
	mc := managerContainer(t, d)

	cfg := startBareAPIServer(t)
	c, err := client.New(cfg, client.Options{Scheme: testutil.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(3*time.Minute))
	t.Cleanup(cancel)

	// Everything but the Deployment and the Service, for real.
	for _, o := range objs {
		if o.GetKind() == "Deployment" || o.GetKind() == "Service" {
			continue
		}
		if err := c.Create(ctx, o.DeepCopy()); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	waitFor(t, 30*time.Second, "the Task CRD to be served", func() bool {
		err := c.List(ctx, &unstructured.UnstructuredList{Object: map[string]any{
			"apiVersion": "batch.taskops.io/v1alpha1", "kind": "TaskList"}})
		return err == nil
	})

	kubeconfig := impersonatingKubeconfig(t, cfg.Host, cfg.CAData, cfg.CertData, cfg.KeyData,
		"system:serviceaccount:"+namespace+":"+serviceAccount,
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"})

	// The args as the kubelet passes them: $(VAR) from the container's env,
	// POD_NAMESPACE being the pod's namespace (downward API).
	var args []string
	for _, a := range mc.Args {
		for _, e := range mc.Env {
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace" {
				a = strings.ReplaceAll(a, "$("+e.Name+")", d.Namespace)
			}
		}
		a = expand(a, mc)
		if strings.Contains(a, "$(") {
			t.Fatalf("arg %q has an unresolved variable", a)
		}
		args = append(args, a)
	}
	return &managerSetup{bin: bin, kubeconfig: kubeconfig, args: args, c: c, ctx: ctx}
}

func TestManagerReplicasWithRenderedRBAC(t *testing.T) {
	m := setupManager(t)
	bin, kubeconfig, args, c, ctx := m.bin, m.kubeconfig, m.args, m.c, m.ctx
	replicas := []*replica{startReplica(t, bin, args, kubeconfig, 0), startReplica(t, bin, args, kubeconfig, 1)}
	lease := client.ObjectKey{Namespace: namespace, Name: "task-operator.batch.taskops.io"}
	holder := func() string {
		l := &coordv1.Lease{}
		if err := c.Get(ctx, lease, l); err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	waitFor(t, 60*time.Second, "both replicas ready and a leader elected", func() bool {
		return replicas[0].ready() && replicas[1].ready() && holder() != ""
	})
	leader := func() []int {
		var l []int
		for i, r := range replicas {
			if r.leads() {
				l = append(l, i)
			}
		}
		return l
	}
	waitFor(t, 10*time.Second, "a replica to log that it leads", func() bool { return len(leader()) > 0 })
	if l := leader(); len(l) != 1 {
		t.Fatalf("replicas %v lead, want exactly one", l)
	}
	first := leader()[0]

	// The metrics endpoint is HTTPS and asks the API server about each
	// scraper's token, with the manager's own rendered RBAC: no token and an
	// unknown one are refused, a ServiceAccount without the rendered
	// metrics-reader ClusterRole is forbidden, one bound to it scrapes.
	reader, other := scrapeTokens(ctx, t, c)
	// /readyz does not wait for the metrics server, which makes its
	// self-signed certificate first.
	waitFor(t, 30*time.Second, "the leader's metrics endpoint to answer", func() bool {
		code, _ := replicas[first].scrapeAs("")
		return code != 0
	})
	for _, s := range []struct {
		who, token string
		want       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a made-up token", "not-a-token", http.StatusUnauthorized},
		{"a ServiceAccount without metrics-reader", other, http.StatusForbidden},
		{"a ServiceAccount bound to metrics-reader", reader, http.StatusOK},
	} {
		if code, _ := replicas[first].scrapeAs(s.token); code != s.want {
			t.Errorf("GET %s with %s = %d, want %d", replicas[first].MetricsURL(), s.who, code, s.want)
		}
	}
	for _, r := range replicas {
		r.token = reader
	}

	// A Task runs: the leader adds its finalizer and makes its Job.
	task := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "batch.taskops.io/v1alpha1", "kind": "Task",
		"metadata": map[string]any{"name": "smoke", "namespace": "default"},
		"spec":     map[string]any{"type": "shell", "shell": "true"},
	}}
	if err := c.Create(ctx, task); err != nil {
		t.Fatalf("creating a Task: %v", err)
	}
	waitFor(t, 30*time.Second, "the Task's Job", func() bool {
		jobs := &batchv1.JobList{}
		return c.List(ctx, jobs, client.InNamespace("default"), client.MatchingLabels{"batch.taskops.io/task": "smoke"}) == nil &&
			len(jobs.Items) == 1
	})

	// Only the leader exports the gauges read from its cache: summed over
	// both replicas, each series is there once (a standby that exported
	// them too doubled every sum and fired every alert twice).
	checkGauges := func(leading int) {
		t.Helper()
		for i, r := range replicas {
			if !r.Alive() {
				continue
			}
			body := r.scrape()
			tasks := strings.Count(body, "\ntaskoperator_tasks{")
			lead := strings.Contains(body, "\ntaskoperator_leader 1\n")
			if i == leading && (tasks != 8 || !lead) {
				t.Errorf("leader %d exports %d taskoperator_tasks series (want 8, one per phase), taskoperator_leader 1: %v", i, tasks, lead)
			}
			if i != leading && (tasks != 0 || !strings.Contains(body, "\ntaskoperator_leader 0\n")) {
				t.Errorf("standby %d exports %d taskoperator_tasks series (want none) or no taskoperator_leader 0", i, tasks)
			}
		}
	}
	checkGauges(first)

	// The leader stops as the kubelet stops it; the standby takes over.
	old := holder()
	stopped := time.Now()
	if err := replicas[first].stop(10 * time.Second); err != nil {
		t.Errorf("stopping the leader: %v", err)
	}
	waitFor(t, 30*time.Second, "the standby to take over", func() bool {
		h := holder()
		return h != "" && h != old && replicas[1-first].leads()
	})
	t.Logf("the standby took over %s after the leader was told to stop", time.Since(stopped).Round(100*time.Millisecond))
	checkGauges(1 - first)

	// The new leader removes the Task's finalizer when it is deleted.
	if err := c.Delete(ctx, task); err != nil {
		t.Fatalf("deleting the Task: %v", err)
	}
	waitFor(t, 30*time.Second, "the Task to be gone", func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(task), task.DeepCopy()))
	})

	for i, r := range replicas {
		if bytes.Contains(bytes.ToLower(r.Log()), []byte("forbidden")) {
			t.Errorf("replica %d was refused a request:\n%s", i, tail(r.Log()))
		}
	}
}

func impersonatingKubeconfig(t *testing.T, host string, ca, cert, key []byte, user string, groups []string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: ca}
	kc.AuthInfos["manager"] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key,
		Impersonate: user, ImpersonateGroups: groups}
	kc.Contexts["manager"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "manager"}
	kc.CurrentContext = "manager"
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// replica is one manager process (harness.Operator) run with the rendered
// Deployment's args; token is the bearer token scrape sends.
type replica struct {
	*harness.Operator
	token string
}

// startReplica starts bin with args, its probe and metrics ports moved to
// free loopback ones, and waits for its /readyz.
func startReplica(t *testing.T, bin string, args []string, kubeconfig string, i int) *replica {
	t.Helper()
	var rest []string
	for _, a := range args {
		if !strings.HasPrefix(a, "--health-probe-bind-address=") && !strings.HasPrefix(a, "--metrics-bind-address=") {
			rest = append(rest, a)
		}
	}
	r := &replica{Operator: &harness.Operator{
		Bin: bin, Kubeconfig: kubeconfig, Name: fmt.Sprintf("replica-%d", i), Args: rest, Metrics: true, SecureMetrics: true,
		LogPath: filepath.Join(t.TempDir(), fmt.Sprintf("manager-%d.log", i)),
	}}
	t.Cleanup(func() {
		_ = r.Kill()
		if t.Failed() {
			t.Logf("replica %d log:\n%s", i, tail(r.Log()))
		}
	})
	if _, err := r.Start(); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *replica) leads() bool {
	return r.Alive() && bytes.Contains(r.Log(), []byte("Successfully acquired lease"))
}

// scrapeTokens binds a ServiceAccount monitoring/prometheus to the rendered
// metrics-reader ClusterRole and makes a token for it, and one for
// monitoring/app, which has no role.
func scrapeTokens(ctx context.Context, t *testing.T, c client.Client) (reader, other string) {
	t.Helper()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}); err != nil {
		t.Fatal(err)
	}
	return harness.MetricsTokens(ctx, t, c, "monitoring", metricsReaderRole)
}

// scrapeAs GETs the replica's /metrics with token ("": none).
func (r *replica) scrapeAs(token string) (int, string) {
	code, body := harness.Scrape(r.MetricsURL(), token)
	if code == 0 {
		return 0, ""
	}
	return code, body
}

func (r *replica) get(url string) int {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// scrape is the replica's /metrics body ("" when it does not answer), with
// a leading newline so every series starts after one.
func (r *replica) scrape() string {
	_, body := r.scrapeAs(r.token)
	return "\n" + body
}

func (r *replica) ready() bool {
	return r.get(r.ProbeURL("readyz")) == http.StatusOK && r.get(r.ProbeURL("healthz")) == http.StatusOK
}

// stop sends SIGTERM and waits up to grace for a clean exit, like the kubelet.
func (r *replica) stop(grace time.Duration) error {
	if err := r.Signal(syscall.SIGTERM, grace); err != nil {
		return fmt.Errorf("%w (terminationGracePeriodSeconds)", err)
	}
	return r.ExitErr()
}

func waitFor(t *testing.T, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(testutil.Timeout(timeout))
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(b []byte) string {
	const max = 8 << 10
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// A shard (--namespaces) acts on the Tasks of its namespaces only, with the
// rendered RBAC: the Task elsewhere keeps no status, even after a Task of
// the shard created later was acted on.
func TestAShardActsOnlyInItsNamespaces(t *testing.T) {
	m := setupManager(t)
	for _, ns := range []string{"shard-a", "shard-b"} {
		if err := m.c.Create(m.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	r := startReplica(t, m.bin, append(m.args, "--namespaces=shard-a", "--leader-election-id=task-operator-shard-a"), m.kubeconfig, 0)
	waitFor(t, 60*time.Second, "the shard ready and leading", func() bool { return r.ready() && r.leads() })
	for _, task := range []*v1alpha1.Task{testutil.NewTask("shard-b", "elsewhere"), testutil.NewTask("shard-a", "mine")} {
		if err := m.c.Create(m.ctx, task); err != nil {
			t.Fatal(err)
		}
	}
	acted := func(ns, name string) bool {
		var task v1alpha1.Task
		return m.c.Get(m.ctx, client.ObjectKey{Namespace: ns, Name: name}, &task) == nil && task.Status.ObservedGeneration > 0
	}
	waitFor(t, 30*time.Second, "the shard's Task acted on", func() bool { return acted("shard-a", "mine") })
	if err := m.c.Create(m.ctx, testutil.NewTask("shard-a", "later")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the shard's later Task acted on", func() bool { return acted("shard-a", "later") })
	if acted("shard-b", "elsewhere") {
		t.Error("the shard acted on a Task outside its namespaces")
	}
}
