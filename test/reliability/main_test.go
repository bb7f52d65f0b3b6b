//go:build reliability

package reliability

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// The operator's identity, as config/default renders it.
const (
	operatorNamespace = "task-operator-system"
	serviceAccount    = "task-operator-controller-manager"
	leaseName         = "task-operator.batch.taskops.io"
)

// operatorUser is the user the API server sees the operator as.
const operatorUser = "system:serviceaccount:" + operatorNamespace + ":" + serviceAccount

// s is what every test uses.
var s *suite

type suite struct {
	// ws: RELIABILITY_CLUSTER_DIR, RELIABILITY_KEEP_CLUSTER,
	// RELIABILITY_MANAGER_BINARY.
	ws      *harness.Workspace
	cluster *harness.Cluster
	c       client.WithWatch
	cs      kubernetes.Interface
	bin     string
	// opKubeconfig holds the ServiceAccount's token: every operator of the
	// suite runs with the generated RBAC only.
	opKubeconfig string
	// rendered is config/default rendered by kustomize.
	rendered   []unstructured.Unstructured
	deployment *appsv1.Deployment
	logsDir    string
	fast       bool
	seed       int64

	mu      sync.Mutex
	rng     *rand.Rand
	ops     []*harness.Operator
	figures []string
	excused [][2]time.Time // see excuse
	canary  string         // the Secret value no operator log may hold
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "reliability: "+format+"\n", args...)
}

func runMain(m *testing.M) (code int) {
	flag.Parse()
	ws, err := harness.NewWorkspace("RELIABILITY", "reliability")
	if err != nil {
		logf("%v", err)
		return 1
	}
	e := &suite{
		ws:   ws,
		fast: os.Getenv("RELIABILITY_FAST") == "1" || testing.Short(),
		seed: time.Now().UnixNano(),
	}
	if v := os.Getenv("RELIABILITY_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			logf("RELIABILITY_SEED: %v", err)
			return 1
		}
		e.seed = n
	}
	e.rng = rand.New(rand.NewSource(e.seed))
	teardown := func() {
		e.stopOperators()
		if err := ws.Close(e.cluster, logf); err != nil {
			code = 1
		}
	}
	defer teardown()
	harness.CleanupOnSignal(logf, teardown)

	mode := "full"
	if e.fast {
		mode = "fast (RELIABILITY_FAST=1 or -short)"
	}
	logf("mode: %s; seed %d (RELIABILITY_SEED=%d repeats the random moments)", mode, e.seed, e.seed)
	t0 := time.Now()
	if err := e.setup(); err != nil {
		logf("setup failed: %v", err)
		return 1
	}
	logf("setup took %s (cluster in %s, operator logs in %s)", time.Since(t0).Round(time.Millisecond), ws.Dir, e.logsDir)
	s = e

	code = m.Run()

	e.stopOperators()
	e.mu.Lock()
	figures := append([]string(nil), e.figures...)
	canary := e.canary
	e.mu.Unlock()
	// The canary of the least-privilege scenario, in every operator log of
	// the whole run (those written after that scenario too).
	if canary != "" {
		logs, _ := filepath.Glob(filepath.Join(e.logsDir, "*.log"))
		for _, f := range logs {
			if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(canary)) {
				logf("FAIL: the canary Secret value is in operator log %s", f)
				code = 1
			}
		}
	}
	fmt.Fprintf(os.Stderr, "\nreliability: figures (%s mode, seed %d, %s in all):\n", mode, e.seed, time.Since(t0).Round(time.Second))
	for _, f := range figures {
		fmt.Fprintf(os.Stderr, "  %s\n", f)
	}
	return code
}

func (e *suite) setup() error {
	reuse := os.Getenv("RELIABILITY_REUSE_CLUSTER") == "1"
	// The Job controller's client limits are raised so it is not what the
	// scenarios measure (hundreds of Jobs start and finish in minutes).
	// A kwok node: the scenarios run hundreds of pods at a time and pick
	// their outcomes with simulation annotations (hack/kwok/README.md).
	cluster, err := harness.StartCluster(harness.ClusterOptions{
		Dir: e.ws.Dir, Reuse: reuse, Logf: logf, Node: "kwok",
		Env: []string{"KCM_QPS=" + envOr("KCM_QPS", "100"), "KCM_BURST=" + envOr("KCM_BURST", "200")},
	})
	if err != nil {
		return err
	}
	e.cluster, e.c = cluster, cluster.Client
	if e.cs, err = kubernetes.NewForConfig(cluster.Config); err != nil {
		return err
	}
	// This run's operator logs only.
	e.logsDir = filepath.Join(e.ws.Dir, "operators")
	if err := os.RemoveAll(e.logsDir); err != nil {
		return err
	}
	if err := os.MkdirAll(e.logsDir, 0o755); err != nil {
		return err
	}

	if e.bin, err = e.ws.ManagerBinary(logf); err != nil {
		return err
	}
	if err := e.installRBAC(); err != nil {
		return err
	}
	return e.operatorKubeconfig()
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// installRBAC renders config/default and creates what the manager needs to
// run as its ServiceAccount: namespace, ServiceAccount, roles and bindings
// (the CRD is already there; the Deployment and the metrics Service are
// kept for the Pod Security scenario, not created: the local cluster runs no
// Deployment controller and no container).
func (e *suite) installRBAC() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, e.cluster.Kubectl, "kustomize", filepath.Join(e.ws.Root, "config", "default")).Output()
	if err != nil {
		return fmt.Errorf("kubectl kustomize config/default: %w", err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if err == io.EOF {
				break
			}
			return fmt.Errorf("decoding config/default: %w", err)
		}
		if len(u.Object) == 0 {
			continue
		}
		e.rendered = append(e.rendered, u)
	}
	var created []string
	for _, u := range e.rendered {
		switch u.GetKind() {
		case "Deployment":
			d := &appsv1.Deployment{}
			if err := runtimeConvert(&u, d); err != nil {
				return err
			}
			e.deployment = d
			continue
		case "Service", "CustomResourceDefinition":
			continue
		}
		obj := u.DeepCopy()
		if err := e.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("reliability"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		created = append(created, u.GetKind()+"/"+u.GetName())
	}
	if e.deployment == nil {
		return fmt.Errorf("config/default renders no Deployment")
	}
	logf("installed from config/default: %s", strings.Join(created, ", "))
	return nil
}

// operatorKubeconfig writes a kubeconfig holding a token of the manager's
// ServiceAccount, and checks the API server sees it as that account.
func (e *suite) operatorKubeconfig() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var tr *authenticationv1.TokenRequest
	var err error
	for i := 0; i < 60; i++ { // the ServiceAccount was just created
		tr, err = e.cs.CoreV1().ServiceAccounts(operatorNamespace).CreateToken(ctx, serviceAccount,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(12 * 3600))}}, metav1.CreateOptions{})
		if err == nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("requesting a token for %s: %w", operatorUser, err)
	}
	raw, err := clientcmd.LoadFromFile(e.cluster.Kubeconfig)
	if err != nil {
		return err
	}
	cur := raw.Contexts[raw.CurrentContext]
	cl := raw.Clusters[cur.Cluster]
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: cl.Server, CertificateAuthorityData: cl.CertificateAuthorityData}
	kc.AuthInfos["manager"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["manager"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "manager", Namespace: operatorNamespace}
	kc.CurrentContext = "manager"
	e.opKubeconfig = filepath.Join(e.ws.Dir, "operator.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, e.opKubeconfig); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", e.opKubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("SelfSubjectReview with the operator's token: %w", err)
	}
	if got := review.Status.UserInfo.Username; got != operatorUser {
		return fmt.Errorf("the operator's token authenticates as %q, want %q", got, operatorUser)
	}
	logf("the operator runs as %s (token kubeconfig %s)", operatorUser, e.opKubeconfig)
	return nil
}

func runtimeConvert(u *unstructured.Unstructured, out any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)
}

func (e *suite) stopOperators() {
	e.mu.Lock()
	ops := append([]*harness.Operator(nil), e.ops...)
	e.mu.Unlock()
	for _, op := range ops {
		if op.Alive() {
			if err := op.Stop(); err != nil {
				logf("stopping operator %s: %v", op.Name, err)
			}
		}
	}
}

// schemeClient is a client with the test scheme for cfg.
func schemeClient(cfg *rest.Config) (client.Client, error) {
	return client.New(cfg, client.Options{Scheme: testutil.Scheme()})
}
