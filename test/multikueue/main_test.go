//go:build multikueue

package multikueue

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/taskops/task-operator/test/harness"
)

// worker is one worker cluster: the MultiKueueCluster named name.
type worker struct {
	name    string
	cluster *harness.Cluster
	c       client.WithWatch
	kueue   *harness.Kueue
}

// env is what every test uses.
var env struct {
	ws      *harness.Workspace
	manager *harness.Cluster
	c       client.WithWatch // the manager's
	workers []*worker
	op      *harness.Operator
	kueue   *harness.Kueue // the manager's
}

// workerLostTimeout is how long the manager's Kueue keeps an attempt
// admitted on a worker it cannot reach (Kueue's default: 15 minutes).
const workerLostTimeout = 30 * time.Second

// kueueNamespace holds MultiKueue's kubeconfig Secrets on the manager.
const kueueNamespace = "kueue-system"

// admissionCheck is the manager's MultiKueue AdmissionCheck, which every
// test's ClusterQueue names.
const admissionCheck = "multikueue"

// flavor is the ResourceFlavor every ClusterQueue in every cluster uses.
const flavor = "default"

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "multikueue: "+format+"\n", args...) }

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) (code int) {
	// The clients' API warnings (a deleted ClusterQueue's, say) would go
	// to controller-runtime's logger, which complains, with a stack, that
	// none was set.
	ctrllog.SetLogger(logr.Discard())
	ws, err := harness.NewWorkspace("MULTIKUEUE", "multikueue")
	if err != nil {
		logf("%v", err)
		return 1
	}
	env.ws = ws
	var cleanups harness.Cleanups
	teardown := func() {
		cleanups.Run()
		for _, w := range env.workers {
			if ws.Keep {
				logf("MULTIKUEUE_KEEP_CLUSTER=1: %s keeps running; KUBECONFIG=%s; stop it with: hack/local-cluster.sh down --dir %s", w.name, w.cluster.Kubeconfig, w.cluster.Dir)
			} else if err := w.cluster.Down(); err != nil {
				logf("bringing %s down: %v", w.name, err)
				code = 1
			}
		}
		if err := ws.Close(env.manager, logf); err != nil {
			code = 1
		}
	}
	defer teardown()
	harness.CleanupOnSignal(logf, teardown)

	t0 := time.Now()
	if err := setUp(&cleanups); err != nil {
		logf("%v", err)
		return 1
	}
	logf("setup took %s (operator log %s, manager's Kueue log %s)", time.Since(t0).Round(time.Second), env.op.LogPath, env.kueue.Log)
	return m.Run()
}

// setUp brings up the three control planes, a Kueue in each (MultiKueue on
// the manager, reaching the workers through kubeconfig Secrets, with its
// Job webhooks registered there), and the operator on the manager; what it
// starts is stopped by cleanups.
func setUp(cleanups *harness.Cleanups) error {
	kueueBin, crds, err := harness.KueueBuild(env.ws.Root)
	if err != nil {
		return err
	}
	// The manager and worker-1 have a real node beside their kwok node,
	// so a Task really runs on a worker, and the same Task really runs on
	// the manager to compare (realnode_test.go); worker-2 is kwok only.
	// Tasks choose their node by its labels (kwokNode, realNode).
	start := func(dir, node string) (*harness.Cluster, error) {
		c, err := harness.StartCluster(harness.ClusterOptions{Dir: dir, Logf: logf, Node: node})
		if err != nil {
			return nil, err
		}
		return c, c.InstallKueueCRDs(crds)
	}
	if env.manager, err = start(env.ws.Dir, "both"); err != nil {
		return err
	}
	env.c = env.manager.Client
	for i := 1; i <= 2; i++ {
		w := &worker{name: fmt.Sprintf("worker-%d", i)}
		node := "kwok"
		if i == 1 {
			node = "both"
		}
		if w.cluster, err = start(env.ws.Dir+"-"+w.name, node); err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		env.workers = append(env.workers, w)
		w.c = w.cluster.Client
		if err := apply(w.c, harness.KueueObject("ResourceFlavor", "", flavor, map[string]any{"spec": map[string]any{}})); err != nil {
			return err
		}
		if w.kueue, err = harness.StartKueue(harness.KueueOptions{Bin: kueueBin, Kubeconfig: w.cluster.Kubeconfig, Dir: filepath.Join(w.cluster.Dir, "kueue")}); err != nil {
			return fmt.Errorf("Kueue on %s: %w", w.name, err)
		}
		cleanups.Add(w.kueue.Stop)
	}
	if err := multiKueueSetup(); err != nil {
		return err
	}
	// worker-1 lets the operator read its Task pods (output_test.go);
	// worker-2 does not.
	if err := giveReader(env.workers[0]); err != nil {
		return fmt.Errorf("the read-only kubeconfig of %s: %w", env.workers[0].name, err)
	}
	env.kueue, err = harness.StartKueue(harness.KueueOptions{Bin: kueueBin, Kubeconfig: env.manager.Kubeconfig, Dir: filepath.Join(env.ws.Dir, "kueue"),
		Config: fmt.Sprintf("namespace: %s\nmultiKueue:\n  gcInterval: 10s\n  origin: task-operator-test\n  workerLostTimeout: %s\n", kueueNamespace, workerLostTimeout)})
	if err != nil {
		return fmt.Errorf("Kueue on the manager: %w", err)
	}
	cleanups.Add(env.kueue.Stop)
	// Kueue's Job webhook, as an installed Kueue has it: it sets
	// spec.managedBy on a Job created for a MultiKueue queue.
	unregister, err := env.kueue.RegisterWebhooks(env.manager, harness.KueueWebhookManifests(crds), "/mutate-batch-v1-job", "/validate-batch-v1-job")
	if err != nil {
		return fmt.Errorf("Kueue's Job webhooks on the manager: %w", err)
	}
	cleanups.Add(unregister)
	if err := waitActive(); err != nil {
		return err
	}

	bin, err := env.ws.ManagerBinary(logf)
	if err != nil {
		return err
	}
	env.op = &harness.Operator{Bin: bin, Kubeconfig: env.manager.Kubeconfig, LogPath: filepath.Join(env.ws.Dir, "operator.log"), Name: "multikueue",
		Args: []string{"--worker-kubeconfig-namespace=" + operatorNamespace}}
	if _, err := env.op.Start(); err != nil {
		return fmt.Errorf("starting the operator: %w", err)
	}
	cleanups.Add(func() { _ = env.op.Stop() })
	return nil
}

// multiKueueSetup makes, on the manager, what MultiKueue dispatches
// through: a kubeconfig Secret and a MultiKueueCluster per worker, a
// MultiKueueConfig listing both, the AdmissionCheck naming it, and the
// ResourceFlavor.
func multiKueueSetup() error {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kueueNamespace}},
		harness.KueueObject("ResourceFlavor", "", flavor, map[string]any{"spec": map[string]any{}}),
	}
	var names []any
	for _, w := range env.workers {
		kubeconfig, err := os.ReadFile(w.cluster.Kubeconfig)
		if err != nil {
			return err
		}
		objs = append(objs,
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: kueueNamespace, Name: w.name}, Data: map[string][]byte{"kubeconfig": kubeconfig}},
			harness.KueueObject("MultiKueueCluster", "", w.name, map[string]any{"spec": map[string]any{
				"clusterSource": map[string]any{"kubeConfig": map[string]any{"locationType": "Secret", "location": w.name}}}}))
		names = append(names, w.name)
	}
	objs = append(objs,
		harness.KueueObject("MultiKueueConfig", "", "workers", map[string]any{"spec": map[string]any{"clusters": names}}),
		harness.KueueObject("AdmissionCheck", "", admissionCheck, map[string]any{"spec": map[string]any{
			"controllerName": "kueue.x-k8s.io/multikueue",
			"parameters":     map[string]any{"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "workers"}}}))
	for _, o := range objs {
		if err := apply(env.c, o); err != nil {
			return err
		}
	}
	return nil
}

// waitActive waits until the manager's Kueue reaches both workers and
// its AdmissionCheck is Active.
func waitActive() error {
	active := func(kind, name string) (bool, string) {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(harness.KueueAPI)
		u.SetKind(kind)
		if err := env.c.Get(context.Background(), client.ObjectKey{Name: name}, u); err != nil {
			return false, err.Error()
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Active" {
				return m["status"] == "True", fmt.Sprintf("%s %s: Active %v %v: %v", kind, name, m["status"], m["reason"], m["message"])
			}
		}
		return false, kind + " " + name + ": no Active condition yet"
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		ok, detail := active("AdmissionCheck", admissionCheck)
		for _, w := range env.workers {
			wok, wdetail := active("MultiKueueCluster", w.name)
			ok, detail = ok && wok, detail+"; "+wdetail
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("MultiKueue not active after 90 s: %s", detail)
		}
		time.Sleep(harness.PollInterval) // polling interval, not a condition
	}
}

// apply creates obj, or leaves it when it exists.
func apply(c client.Client, obj client.Object) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
		return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}
