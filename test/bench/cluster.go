package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
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

var scheme = runtime.NewScheme()

func init() {
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		panic(err)
	}
}

// clusterScript runs hack/local-cluster.sh CMD --dir DIR with env added.
func clusterScript(ctx context.Context, root, dir string, env []string, logw io.Writer, cmd string) (string, error) {
	c := exec.CommandContext(ctx, filepath.Join(root, "hack/local-cluster.sh"), cmd, "--dir", dir)
	c.Dir = root
	c.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	c.Stdout = &out
	c.Stderr = logw
	err := c.Run()
	return out.String(), err
}

// upCluster starts a fresh control plane in dir: `down` first, so every
// session starts from an empty etcd, then `up` with the session's settings.
func upCluster(ctx context.Context, o *options, s clusterSettings) (*cluster, error) {
	env := []string{
		"KCM_QPS=" + strconv.Itoa(s.kcmQPS),
		"KCM_BURST=" + strconv.Itoa(s.kcmBurst),
		"LOCAL_CLUSTER_NODE_PODS=" + strconv.Itoa(s.nodePods),
		// Scale: thousands of simulated pods on a kwok node.
		"LOCAL_CLUSTER_NODE=kwok",
	}
	if o.auditPolicy != "" {
		env = append(env, "LOCAL_CLUSTER_AUDIT_POLICY="+o.auditPolicy)
	}
	if _, err := clusterScript(ctx, o.root, o.clusterDir, nil, o.log, "down"); err != nil {
		return nil, fmt.Errorf("local-cluster.sh down: %w", err)
	}
	start := time.Now()
	if _, err := clusterScript(ctx, o.root, o.clusterDir, env, o.log, "up"); err != nil {
		// An interrupted up may leave components behind; down finds them.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		_, _ = clusterScript(dctx, o.root, o.clusterDir, nil, o.log, "down")
		return nil, fmt.Errorf("local-cluster.sh up (see %s): %w", o.logPath, err)
	}
	c := &cluster{root: o.root, dir: o.clusterDir, kubeconfig: filepath.Join(o.clusterDir, "kubeconfig"), settings: s}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		return nil, err
	}
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
	o.logf("cluster up in %.0f s (%s, node pods %d, audit log: %v)", time.Since(start).Seconds(), s, s.nodePods, c.audit != "")
	if err := c.installCRD(ctx); err != nil {
		return nil, fmt.Errorf("installing the Task CRD: %w", err)
	}
	return c, nil
}

func (c *cluster) down(ctx context.Context, o *options) {
	if o.keep {
		o.logf("leaving the cluster up (-keep): KUBECONFIG=%s", c.kubeconfig)
		return
	}
	// A fresh context: the session's may be cancelled already (Ctrl-C).
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if _, err := clusterScript(dctx, o.root, o.clusterDir, nil, o.log, "down"); err != nil {
		o.logf("local-cluster.sh down: %v", err)
	}
}

// installCRD creates the Task CRD from config/crd/bases and waits until
// Tasks can be listed.
func (c *cluster) installCRD(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(c.root, "config/crd/bases/*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRD in config/crd/bases: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("%s: %w", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := c.c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("%s: %w", f, err)
			}
		}
	}
	// The client's REST mapper learns about the new type on first use.
	return poll(ctx, 60*time.Second, 250*time.Millisecond, func() (bool, error) {
		err := c.c.List(ctx, &v1alpha1.TaskList{}, client.InNamespace("default"), client.Limit(1))
		return err == nil, nil
	})
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
	raw, err := c.cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scraping the API server's /metrics: %w", err)
	}
	return parseMetrics(bytes.NewReader(raw))
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

func trimOutput(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 400 {
		s = s[len(s)-400:]
	}
	return s
}
