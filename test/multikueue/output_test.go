//go:build multikueue

package multikueue

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/results"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// Output from the workers: worker-1 gives the operator a read-only
// kubeconfig (config/samples/multicluster/worker-output-reader.yaml, as a
// platform team would apply it), worker-2 none.

// operatorNamespace holds, on the manager, the workers' read-only
// kubeconfig Secrets (--worker-kubeconfig-namespace).
const operatorNamespace = "task-operator-system"

// readerSample is the worker-side RBAC users apply.
var readerSample = filepath.Join("..", "..", "config", "samples", "multicluster", "worker-output-reader.yaml")

// giveReader applies the sample's cluster-wide part on w (its Namespace,
// ServiceAccount and ClusterRole) and puts a kubeconfig for that
// ServiceAccount, with a token, in a labelled Secret on the manager.
func giveReader(w *worker) error {
	objs, _, err := readerObjects()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var sa *corev1.ServiceAccount
	for _, o := range objs {
		if err := apply(w.c, o); err != nil {
			return err
		}
		if s, ok := o.(*corev1.ServiceAccount); ok {
			sa = s
		}
	}
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}
	if err := w.c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return fmt.Errorf("a token for %s/%s on %s: %w", sa.Namespace, sa.Name, w.name, err)
	}
	admin, err := clientcmd.LoadFromFile(w.cluster.Kubeconfig)
	if err != nil {
		return err
	}
	cl := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	kc := clientcmdapi.NewConfig()
	kc.Clusters[w.name] = &clientcmdapi.Cluster{Server: cl.Server, CertificateAuthorityData: cl.CertificateAuthorityData}
	kc.AuthInfos["reader"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts[w.name] = &clientcmdapi.Context{Cluster: w.name, AuthInfo: "reader"}
	kc.CurrentContext = w.name
	data, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: operatorNamespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: operatorNamespace, Name: w.name + "-reader",
			Labels: map[string]string{v1alpha1.LabelWorkerCluster: w.name}}, Data: map[string][]byte{"kubeconfig": data}},
	} {
		if err := apply(env.c, o); err != nil {
			return err
		}
	}
	return nil
}

// readerObjects are the sample's objects but its RoleBinding, and that
// RoleBinding (for one namespace, team-a).
func readerObjects() ([]client.Object, *rbacv1.RoleBinding, error) {
	data, err := os.ReadFile(readerSample)
	if err != nil {
		return nil, nil, err
	}
	us, err := testutil.DecodeManifests(data)
	if err != nil {
		return nil, nil, err
	}
	var objs []client.Object
	var binding *rbacv1.RoleBinding
	for _, u := range us {
		var o client.Object
		switch u.GetKind() {
		case "Namespace":
			o = &corev1.Namespace{}
		case "ServiceAccount":
			o = &corev1.ServiceAccount{}
		case "ClusterRole":
			o = &rbacv1.ClusterRole{}
		case "RoleBinding":
			binding = &rbacv1.RoleBinding{}
			o = binding
		default:
			return nil, nil, fmt.Errorf("%s: unexpected %s", readerSample, u.GetKind())
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, o); err != nil {
			return nil, nil, err
		}
		if o != binding {
			objs = append(objs, o)
		}
	}
	if binding == nil {
		return nil, nil, fmt.Errorf("%s: no RoleBinding", readerSample)
	}
	return objs, binding, nil
}

// bindReader lets the reader read pods in namespace ns on w: the sample's
// RoleBinding, in ns.
func bindReader(t *testing.T, w *worker, ns string) {
	t.Helper()
	_, binding, err := readerObjects()
	if err != nil {
		t.Fatal(err)
	}
	binding.Namespace = ns
	create(t, w.c, binding)
}

// outputTask is a Task whose pod, on a kwok node, ends with exit code
// code and prints text, then hands back the result rows.
func outputTask(ns, name string, code int, text, rows string, opts ...testutil.TaskOpt) *v1alpha1.Task {
	msg := results.Append(text+"\n", map[string]string{"rows": rows}, nil)
	return testutil.NewTask(ns, name, append([]testutil.TaskOpt{
		testutil.PodAnnotations(harness.SimExitCode, fmt.Sprint(code), harness.SimMessage, msg),
		testutil.Requests("cpu", "1"), testutil.StartTimeout(60), onNode(kwokNode),
		func(t *v1alpha1.Task) { t.Spec.Results = []v1alpha1.ResultSpec{{Name: "rows"}} },
	}, opts...)...)
}

// remote makes a Task dispatched through MultiKueue to LocalQueue team.
func remote(t *v1alpha1.Task) {
	t.Labels = map[string]string{v1alpha1.LabelKueueQueueName: "team", v1alpha1.LabelDispatch: v1alpha1.DispatchMultiKueue}
}

// podName stands for the pod's name in a record's message: the local and
// the remote pod cannot have the same.
var podName = regexp.MustCompile(`pod \S+ exited`)

// jobName stands for the Job's name in lastError ("job <name>)"): it
// carries a hash of the Task's UID.
var jobName = regexp.MustCompile(`job \S+\)`)

// same is a message with the pod's and the Job's names left out.
func same(msg string) string {
	return jobName.ReplaceAllString(podName.ReplaceAllString(msg, "pod P exited"), "job J)")
}

// A Task that ran on worker-1, whose reader may read its namespace there,
// has the same attempt record (exit code, results, output tail) and
// status.results as the same Task run on the manager's own node: one that
// fails with exit 3 and one that succeeds, each handing back rows.
func TestAnAttemptOnAWorkerWithAReaderHasTheRecordOfALocalOne(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "mk-output")
	local := newNamespace(t, "mk-output-local")
	queues(t, ns, 4, 2, 0) // worker-2 has no room: the attempts go to worker-1
	bindReader(t, workerNamed(t, "worker-1"), ns)

	for _, tc := range outcomes {
		create(t, env.c, outputTask(ns, tc.name, tc.code, "loaded the batch", "1234", remote))
		create(t, env.c, outputTask(local, tc.name, tc.code, "loaded the batch", "1234"))
	}
	for _, tc := range outcomes {
		sameRecords(t, tc, waitTask(t, ns, tc.name, string(tc.want)+" on a worker", 2*time.Minute, phase(tc.want)),
			waitTask(t, local, tc.name, string(tc.want)+" locally", 2*time.Minute, phase(tc.want)))
	}
}

// outcomes are the two Tasks each output test runs remotely and locally:
// one that fails with exit 3, one that succeeds; both hand back rows=1234.
var outcomes = []outcome{{"fails", 3, v1alpha1.PhaseFailed}, {"succeeds", 0, v1alpha1.PhaseSucceeded}}

type outcome struct {
	name string
	code int
	want v1alpha1.TaskPhase
}

// sameRecords checks that the Task r that ran on worker-1 has the record
// of the same Task l run locally: exit code, results, message and
// lastError (pod and Job names aside), plus the worker named.
func sameRecords(t *testing.T, tc outcome, r, l *v1alpha1.Task) {
	t.Helper()
	rr, lr := r.Status.AttemptRecords[0], l.Status.AttemptRecords[0]
	t.Logf("%s: on %s: exitCode %d results %v message %q lastError %q; locally: exitCode %d results %v message %q lastError %q",
		tc.name, rr.Cluster, ptr.Deref(rr.ExitCode, -1), rr.Results, rr.Message, r.Status.LastError,
		ptr.Deref(lr.ExitCode, -1), lr.Results, lr.Message, l.Status.LastError)
	if rr.Cluster != "worker-1" {
		t.Fatalf("%s ran on %q; want worker-1", tc.name, rr.Cluster)
	}
	if ptr.Deref(rr.ExitCode, -1) != int32(tc.code) || ptr.Deref(lr.ExitCode, -1) != int32(tc.code) {
		t.Errorf("%s: exit code %d on the worker, %d locally; want %d", tc.name, ptr.Deref(rr.ExitCode, -1), ptr.Deref(lr.ExitCode, -1), tc.code)
	}
	if rr.Results["rows"] != "1234" || fmt.Sprint(rr.Results) != fmt.Sprint(lr.Results) {
		t.Errorf("%s: results %v on the worker, %v locally; want rows=1234 in both", tc.name, rr.Results, lr.Results)
	}
	if same(withoutWorker(rr.Message)) != same(lr.Message) || !strings.HasSuffix(rr.Message, "ran on worker cluster worker-1") {
		t.Errorf("%s: message %q on the worker, %q locally; want the same, and the worker named", tc.name, rr.Message, lr.Message)
	}
	if same(withoutWorker(r.Status.LastError)) != same(l.Status.LastError) {
		t.Errorf("%s: lastError %q on the worker, %q locally; want the same", tc.name, r.Status.LastError, l.Status.LastError)
	}
	if tc.code == 0 && (r.Status.Results["rows"] != "1234" || fmt.Sprint(r.Status.Results) != fmt.Sprint(l.Status.Results)) {
		t.Errorf("status.results %v on the worker, %v locally", r.Status.Results, l.Status.Results)
	}
}

// withoutWorker is a remote record's message without the worker's name at
// its end.
func withoutWorker(msg string) string {
	return strings.TrimSuffix(strings.TrimSuffix(msg, "ran on worker cluster worker-1"), "; ")
}

// A worker the operator has no kubeconfig for (worker-2) is not read: the
// record says where the output is and how to have it here; the operator
// never watched anything there. And where worker-1 does not let the
// reader read the namespace, the record says the worker refused.
func TestWithoutAReaderTheRecordSaysWhereTheOutputIsAndHowToHaveIt(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t, "mk-no-reader")
	queues(t, ns, 4, 0, 2) // worker-1 has no room: worker-2
	create(t, env.c, outputTask(ns, "elsewhere", 0, "done", "7", remote))
	done := waitTask(t, ns, "elsewhere", "Succeeded", 2*time.Minute, phase(v1alpha1.PhaseSucceeded))
	rec := done.Status.AttemptRecords[0]
	t.Logf("record: %+v", rec)
	if rec.Cluster != "worker-2" || !strings.Contains(rec.Message, "kubectl --context worker-2") ||
		!strings.Contains(rec.Message, "read-only kubeconfig Secret labelled "+v1alpha1.LabelWorkerCluster+"=worker-2") || len(rec.Results) != 0 {
		t.Fatalf("record %+v; want worker-2, its logs command, how to have the output here, no results", rec)
	}
	if ptr.Deref(rec.ExitCode, -1) != 0 {
		t.Fatalf("exitCode %v; want 0 (from the mirrored condition, without reading pods)", rec.ExitCode)
	}
	log, err := os.ReadFile(env.op.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "watching Task pods on a worker cluster") && strings.Contains(line, "worker-2") {
			t.Fatalf("the operator watched worker-2, which gave it no kubeconfig: %s", line)
		}
	}

	refused := newNamespace(t, "mk-refused")
	queues(t, refused, 4, 2, 0) // worker-1, no RoleBinding in this namespace
	create(t, env.c, outputTask(refused, "forbidden", 0, "done", "7", remote))
	done = waitTask(t, refused, "forbidden", "Succeeded", 2*time.Minute, phase(v1alpha1.PhaseSucceeded))
	rec = done.Status.AttemptRecords[0]
	t.Logf("record: %+v", rec)
	if rec.Cluster != "worker-1" || !strings.Contains(rec.Message, "the worker does not let the operator read pods in this namespace") {
		t.Fatalf("record %+v; want worker-1 named and its refusal", rec)
	}
}
