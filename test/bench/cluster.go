package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// clusterSettings are the knobs one session's control plane starts with.
type clusterSettings struct {
	kcmQPS, kcmBurst int
	nodePods         int
}

func (s clusterSettings) String() string {
	return fmt.Sprintf("kube-controller-manager --kube-api-qps=%d --kube-api-burst=%d", s.kcmQPS, s.kcmBurst)
}

// cluster is a running local control plane (hack/local-cluster.sh).
type cluster struct {
	root, dir  string
	kubeconfig string
	settings   clusterSettings
	cfg        *rest.Config
	cs         *kubernetes.Clientset
	c          client.Client // the load generator: no client-side rate limit
	audit      string        // the API server's audit log; "" when it writes none
}

var scheme = testutil.Scheme()

// benchPodGC is the finished pods a session's cluster keeps before the pod
// garbage collector deletes the oldest: more than any session makes. At
// kube-controller-manager's default (12,500) the scale session's queue
// step crossed it (10,000 pods of the bursts before it, then its own), so
// its measured lines ran beside hundreds of pod deletes that the
// un-queued baseline before them did not: a step measured against a
// baseline taken under a lighter load.
const benchPodGC = 1_000_000

// upCluster starts a fresh control plane in dir (harness.StartCluster:
// `down` first, so every session starts from an empty etcd, then `up` with
// the session's settings, and the Task CRD).
func upCluster(ctx context.Context, o *options, s clusterSettings) (*cluster, error) {
	env := []string{
		"KCM_QPS=" + strconv.Itoa(s.kcmQPS),
		"KCM_BURST=" + strconv.Itoa(s.kcmBurst),
		"LOCAL_CLUSTER_NODE_PODS=" + strconv.Itoa(s.nodePods),
		"LOCAL_CLUSTER_POD_GC_THRESHOLD=" + strconv.Itoa(benchPodGC),
	}
	if o.auditPolicy != "" {
		env = append(env, "LOCAL_CLUSTER_AUDIT_POLICY="+o.auditPolicy)
	}
	start := time.Now()
	hc, err := harness.StartCluster(harness.ClusterOptions{
		Dir: o.clusterDir, Env: env, Log: o.log, Logf: o.logf,
		Node: "kwok", // scale: thousands of simulated pods on a kwok node
	})
	if err != nil {
		return nil, fmt.Errorf("starting the local cluster (see %s): %w", o.logPath, err)
	}
	c := &cluster{root: o.root, dir: o.clusterDir, kubeconfig: hc.Kubeconfig, settings: s}
	cfg := rest.CopyConfig(hc.Config)
	cfg.QPS = -1 // no client-side limit: the load generator measures the API server
	cfg.UserAgent = "task-operator-bench"
	cfg.Timeout = 60 * time.Second
	c.cfg = cfg
	if c.cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if a := filepath.Join(o.clusterDir, "logs/audit.log"); fileExists(a) {
		c.audit = a
	}
	if o.serverVersion == "" {
		o.serverVersion = c.serverVersion()
	}
	if o.finalizerPolicy {
		if err := c.applyFile(ctx, filepath.Join(o.root, "config/samples/policies/add-finalizer.yaml")); err != nil {
			return nil, fmt.Errorf("installing the finalizer policy: %w", err)
		}
		if err := c.waitFinalizerPolicy(ctx); err != nil {
			return nil, err
		}
	}
	o.logf("cluster ready in %.0f s (%s, node pods %d, audit log: %v)", time.Since(start).Seconds(), s, s.nodePods, c.audit != "")
	return c, ctx.Err()
}

// downCluster stops the local cluster in the benchmark's folder.
func downCluster(o *options) error {
	return harness.DownCluster(o.root, o.clusterDir, o.log)
}

func (c *cluster) down(_ context.Context, o *options) {
	if o.keep {
		o.logf("leaving the cluster up (-keep): KUBECONFIG=%s", c.kubeconfig)
		return
	}
	if err := downCluster(o); err != nil {
		o.logf("stopping the local cluster: %v", err)
	}
}

func (c *cluster) ensureNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// The namespace's default ServiceAccount is made by a controller; Jobs
	// need none (the pods have no token), but wait for it all the same so
	// no admission plugin sees a half-made namespace.
	return poll(ctx, 60*time.Second, 200*time.Millisecond, func() (bool, error) {
		_, err := c.cs.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// apiMetrics scrapes the API server's /metrics.
func (c *cluster) apiMetrics(ctx context.Context) (metrics, error) {
	return harness.APIServerMetrics(ctx, c.cs.Discovery().RESTClient())
}

func (c *cluster) serverVersion() string {
	v, err := c.cs.Discovery().ServerVersion()
	if err != nil {
		return "unknown"
	}
	return v.GitVersion
}

// poll calls cond every interval until it is true, it fails, or timeout
// passes.
func poll(ctx context.Context, timeout, interval time.Duration, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// sleepUntil waits until t (or the context ends).
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// applyFile creates the objects of a YAML file.
func (c *cluster) applyFile(ctx context.Context, path string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, doc := range strings.Split(string(raw), "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.c.Create(ctx, u); err != nil {
			return fmt.Errorf("%s: creating %s %s: %w", path, u.GetKind(), u.GetName(), err)
		}
	}
	return nil
}

// waitFinalizerPolicy waits until the API server applies the finalizer
// policy (it loads a new policy within moments), by creating probe Tasks
// in a namespace of their own until one is created with the finalizer,
// then deletes that namespace's Tasks' finalizers and the namespace.
func (c *cluster) waitFinalizerPolicy(ctx context.Context) error {
	const ns = "bench-policy-probe"
	if err := c.ensureNamespace(ctx, ns); err != nil {
		return err
	}
	var probes []*v1alpha1.Task
	var last error
	err := poll(ctx, 30*time.Second, 200*time.Millisecond, func() (bool, error) {
		t := testutil.NewTask(ns, fmt.Sprintf("probe-%d", len(probes)), testutil.Shell("true"))
		if last = c.c.Create(ctx, t); last != nil {
			return false, ctx.Err() // the CRD may not be served yet: try again
		}
		probes = append(probes, t)
		return slices.Contains(t.Finalizers, v1alpha1.Finalizer), nil
	})
	for _, t := range probes { // no operator runs yet to remove it
		_ = c.c.Patch(ctx, t, noFinalizers)
	}
	_ = c.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err != nil {
		return fmt.Errorf("the finalizer policy did not apply within 30 s: %w (last create: %v)", err, last)
	}
	return nil
}

// session is a cluster with the operator running and the benchmark's
// watch on one namespace: what a scenario that only adds Tasks needs.
type session struct {
	cl *cluster
	op *operator
	tr *tracker
}

// startSession brings up a cluster with settings s, the namespace ns, the
// operator (its log named label) and the tracker. The caller ends the
// session (end), also when it returns an error: what did start stops.
func startSession(ctx context.Context, o *options, s clusterSettings, ns, label string) (ss *session, err error) {
	ss = &session{}
	if ss.cl, err = upCluster(ctx, o, s); err != nil {
		return ss, err
	}
	if err = ss.cl.ensureNamespace(ctx, ns); err != nil {
		return ss, err
	}
	if ss.op, err = startOperator(ctx, o, ss.cl, operatorSettings{}, label); err != nil {
		return ss, err
	}
	ss.tr, err = startTracker(ctx, ss.cl, ns, true)
	return ss, err
}

// end stops what startSession started, newest first.
func (ss *session) end(ctx context.Context, o *options) {
	if ss == nil {
		return
	}
	if ss.tr != nil {
		ss.tr.close()
	}
	if ss.op != nil {
		ss.op.stop(o)
	}
	if ss.cl != nil {
		ss.cl.down(ctx, o)
	}
}
