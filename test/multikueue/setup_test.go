//go:build multikueue

package multikueue

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// The helpers of the tests: each test's queues in the three clusters, its
// Tasks, and where their Jobs' copies are.

// queues makes, for namespace ns, a ClusterQueue on the manager with
// managerCPU CPUs whose admission check is MultiKueue, and one on each
// worker with the CPUs workerCPU gives it (by worker), each with a
// LocalQueue "team" in ns; the workers get the namespace too (MultiKueue
// copies Jobs into the namespace of the same name).
func queues(t *testing.T, ns string, managerCPU int, workerCPU ...int) {
	t.Helper()
	cq := func(cpu int, checks bool) *unstructured.Unstructured {
		spec := harness.ClusterQueueSpec(ns, flavor, cpu)
		if checks {
			spec["admissionChecksStrategy"] = map[string]any{"admissionChecks": []any{map[string]any{"name": admissionCheck}}}
		}
		return harness.KueueObject("ClusterQueue", "", "cq-"+ns, map[string]any{"spec": spec})
	}
	lq := func() *unstructured.Unstructured {
		return harness.KueueObject("LocalQueue", ns, "team", map[string]any{"spec": map[string]any{"clusterQueue": "cq-" + ns}})
	}
	for i, w := range env.workers {
		create(t, w.c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		create(t, w.c, cq(workerCPU[i], false))
		create(t, w.c, lq())
	}
	create(t, env.c, cq(managerCPU, true))
	create(t, env.c, lq())
}

// create creates obj in the cluster of c, deleted at the end of the test.
func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
}

// The nodes a Task's pods may choose by label: every cluster has a kwok
// node (simulated pods, driven by the sim.taskops.io annotations); the
// manager and worker-1 also have a real one.
var (
	kwokNode = map[string]string{"type": "kwok"}
	realNode = map[string]string{"kubernetes.io/hostname": "real-node-0"}
)

// onNode makes the Task's pods run on the node with these labels.
func onNode(labels map[string]string) testutil.TaskOpt {
	return func(t *v1alpha1.Task) { t.Spec.NodeSelector = labels }
}

// dispatchedTask is a Task for LocalQueue "team", dispatched through
// MultiKueue, its pod requesting one CPU and running for seconds (kwok on
// the worker).
func dispatchedTask(ns, name string, seconds int, opts ...testutil.TaskOpt) *v1alpha1.Task {
	base := []testutil.TaskOpt{
		testutil.Label(v1alpha1.LabelKueueQueueName, "team"), testutil.Label(v1alpha1.LabelDispatch, v1alpha1.DispatchMultiKueue),
		testutil.PodAnnotations(harness.SimDuration, fmt.Sprint(seconds)), testutil.StartTimeout(60),
		testutil.Requests("cpu", "1"), onNode(kwokNode),
	}
	return testutil.NewTask(ns, name, append(base, opts...)...)
}

func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	return harness.CreateNamespace(t, env.c, prefix, nil, false, describe)
}

// describe logs, for a failed test, what each cluster has in ns.
func describe(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clusters := []struct {
		name string
		c    *harness.Cluster
	}{{"manager", env.manager}}
	for _, w := range env.workers {
		clusters = append(clusters, struct {
			name string
			c    *harness.Cluster
		}{w.name, w.cluster})
	}
	for _, cl := range clusters {
		for _, args := range [][]string{{"get", "tasks,jobs,workloads,pods", "-o", "wide"}, {"get", "events", "--sort-by=.lastTimestamp"}} {
			out, err := cl.c.RunKubectl(ctx, append([]string{"-n", ns}, args...)...)
			t.Logf("%s: kubectl -n %s %s (err=%v):\n%s", cl.name, ns, strings.Join(args, " "), err, out)
		}
	}
	t.Logf("operator log %s, manager's Kueue log %s", env.op.LogPath, env.kueue.Log)
}

func waitTask(t *testing.T, ns, name, what string, within time.Duration, ok func(*v1alpha1.Task) bool) *v1alpha1.Task {
	t.Helper()
	return harness.WaitTask(t, env.c, ns, name, what, within, ok)
}

func phase(p v1alpha1.TaskPhase) func(*v1alpha1.Task) bool {
	return func(t *v1alpha1.Task) bool { return t.Status.Phase == p }
}

// copies are the workers holding a Job of the Task, by worker name, and
// each one's Jobs; a worker that does not answer is left out.
func copies(ns, task string) map[string][]batchv1.Job {
	out := map[string][]batchv1.Job{}
	for _, w := range env.workers {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		jobs, err := harness.JobsOf(ctx, w.c, ns, task)
		cancel()
		if err == nil && len(jobs) > 0 {
			out[w.name] = jobs
		}
	}
	return out
}

// runningOn waits until exactly one worker holds a copy of the Task's Job
// and returns it.
func runningOn(t *testing.T, ns, task string) string {
	t.Helper()
	var on string
	harness.Eventually(t, 90*time.Second, task+": a copy on one worker", nil, func(context.Context) (bool, string) {
		c := copies(ns, task)
		for name := range c {
			on = name
		}
		return len(c) == 1, fmt.Sprintf("copies on %v", keys(c))
	})
	return on
}

func keys(m map[string][]batchv1.Job) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// workloadOf is the manager's Workload of a Job.
func workloadOf(t *testing.T, job *batchv1.Job) *unstructured.Unstructured {
	t.Helper()
	wls := &unstructured.UnstructuredList{}
	wls.SetAPIVersion(harness.KueueAPI)
	wls.SetKind("WorkloadList")
	if err := env.c.List(context.Background(), wls, client.InNamespace(job.Namespace), client.MatchingLabels{"kueue.x-k8s.io/job-uid": string(job.UID)}); err != nil || len(wls.Items) != 1 {
		t.Fatalf("the Workload of Job %s: %d, %v", job.Name, len(wls.Items), err)
	}
	return &wls.Items[0]
}

// managerJobs are the Task's Jobs on the manager.
func managerJobs(t *testing.T, ns, task string) []batchv1.Job {
	t.Helper()
	jobs, err := harness.JobsOf(context.Background(), env.c, ns, task)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func cancelTask(t *testing.T, ns, name string) {
	t.Helper()
	task, err := harness.GetTask(context.Background(), env.c, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(task.DeepCopy())
	task.Annotations = map[string]string{v1alpha1.AnnotationCancel: "stop-it"}
	if err := env.c.Patch(context.Background(), task, patch); err != nil {
		t.Fatal(err)
	}
}

// closeWorker leaves worker w no room for namespace ns: its ClusterQueue
// for ns gets a quota of 0 CPUs (what is admitted stays). Unlike occupy it
// needs only Kueue's ClusterQueue watch on the worker, not its Job
// integration.
func closeWorker(t *testing.T, w *worker, ns string) {
	t.Helper()
	cq := harness.KueueObject("ClusterQueue", "", "cq-"+ns, nil)
	patch := []byte(`{"spec":` + mustJSON(t, harness.ClusterQueueSpec(ns, flavor, 0)) + `}`)
	if err := w.c.Patch(context.Background(), cq, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("closing %s's queue for %s: %v", w.name, ns, err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// occupy takes cpu CPUs of a worker's ClusterQueue for namespace ns with
// a Job made directly on the worker (no Task), and waits until the
// worker's Kueue admitted it: the worker is full for the Tasks, and its
// Kueue is known to be working. The Job is deleted at the end of the
// test.
func occupy(t *testing.T, w *worker, ns string, cpu int) {
	t.Helper()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blocker-" + harness.RandSuffix(), Labels: map[string]string{v1alpha1.LabelKueueQueueName: "team"}},
		Spec: batchv1.JobSpec{
			Suspend: ptr.To(true),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{harness.SimDuration: "600"}},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, NodeSelector: kwokNode, Containers: []corev1.Container{{
					Name: "blocker", Image: "busybox:1.37",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(fmt.Sprint(cpu))}},
				}}},
			},
		},
	}
	create(t, w.c, job)
	harness.Eventually(t, 2*time.Minute, w.name+": "+job.Name+" admitted by its Kueue", nil, func(ctx context.Context) (bool, string) {
		if err := w.c.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err.Error()
		}
		return !ptr.Deref(job.Spec.Suspend, true), "suspended"
	})
}

// workerNamed is the worker called name.
func workerNamed(t *testing.T, name string) *worker {
	t.Helper()
	for _, w := range env.workers {
		if w.name == name {
			return w
		}
	}
	t.Fatalf("no worker %q", name)
	return nil
}

// otherThan is the worker that is not name.
func otherThan(name string) string {
	for _, w := range env.workers {
		if w.name != name {
			return w.name
		}
	}
	return ""
}
