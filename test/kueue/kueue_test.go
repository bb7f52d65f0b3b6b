//go:build kueue

package kueue

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// --- Kueue objects -----------------------------------------------------------

const kueueAPI = harness.KueueAPI

var kueueObject = harness.KueueObject

func create(t *testing.T, obj client.Object) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := env.c.Create(ctx, obj); err != nil {
		t.Fatalf("creating %s %s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
	}
	t.Cleanup(func() { _ = env.c.Delete(context.Background(), obj) })
}

// kueueNamespace is a new namespace with its ClusterQueue of cpuQuota CPUs
// (clusterQueue) and the priority classes.
func kueueNamespace(t *testing.T, prefix string, cpuQuota int, preempt bool) string {
	t.Helper()
	ensurePriorityClasses(t)
	ns := newNamespace(t, prefix)
	clusterQueue(t, ns, cpuQuota, preempt)
	return ns
}

// clusterQueue makes a ResourceFlavor, a ClusterQueue with cpuQuota CPUs
// for namespace ns (preempting lower priorities when preempt), a LocalQueue
// "team" in ns, and the WorkloadPriorityClasses low and high.
func clusterQueue(t *testing.T, ns string, cpuQuota int, preempt bool) {
	t.Helper()
	flavor := "flavor-" + ns
	create(t, kueueObject("ResourceFlavor", "", flavor, map[string]any{"spec": map[string]any{}}))
	spec := harness.ClusterQueueSpec(ns, flavor, cpuQuota)
	if preempt {
		spec["preemption"] = map[string]any{"withinClusterQueue": "LowerPriority"}
	}
	create(t, kueueObject("ClusterQueue", "", "cq-"+ns, map[string]any{"spec": spec}))
	create(t, kueueObject("LocalQueue", ns, "team", map[string]any{"spec": map[string]any{"clusterQueue": "cq-" + ns}}))
}

func init() {
	// The priority classes are cluster-wide; every test uses the same two.
	priorityClasses = []*unstructured.Unstructured{
		kueueObject("WorkloadPriorityClass", "", "low", map[string]any{"value": int64(10), "description": "batch"}),
		kueueObject("WorkloadPriorityClass", "", "high", map[string]any{"value": int64(1000), "description": "urgent"}),
	}
}

var priorityClasses []*unstructured.Unstructured

func ensurePriorityClasses(t *testing.T) {
	t.Helper()
	for _, pc := range priorityClasses {
		if err := env.c.Create(context.Background(), pc.DeepCopy()); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
}

// kueueTask is a Task for LocalQueue "team" at a priority class, each pod
// requesting one CPU and running for seconds (kwok).
func kueueTask(ns, name, priorityClass string, seconds int) *v1alpha1.Task {
	return testutil.NewTask(ns, name,
		testutil.Label(v1alpha1.LabelKueueQueueName, "team"), testutil.Label(v1alpha1.LabelKueuePriorityClass, priorityClass),
		testutil.PodAnnotations(harness.SimDuration, fmt.Sprint(seconds)), testutil.StartTimeout(5),
		testutil.Requests("cpu", "1"))
}

func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	return harness.CreateNamespace(t, env.c, prefix, nil, false, describe)
}

func describe(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, args := range [][]string{{"get", "tasks,jobs,workloads,pods", "-o", "wide"}, {"get", "events", "--sort-by=.lastTimestamp"}} {
		out, err := env.cluster.RunKubectl(ctx, append([]string{"-n", ns}, args...)...)
		t.Logf("kubectl -n %s %s (err=%v):\n%s", ns, strings.Join(args, " "), err, out)
	}
	t.Logf("operator log %s, Kueue log %s", env.op.LogPath, env.kueueLog)
}

func getTask(t *testing.T, ns, name string) *v1alpha1.Task {
	t.Helper()
	task, err := harness.GetTask(context.Background(), env.c, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func waitTask(t *testing.T, ns, name, what string, ok func(*v1alpha1.Task) bool) *v1alpha1.Task {
	t.Helper()
	return harness.WaitTask(t, env.c, ns, name, what, 90*time.Second, ok)
}

func succeeded(t *v1alpha1.Task) bool { return t.Status.Phase == v1alpha1.PhaseSucceeded }

func jobOf(t *testing.T, ns, task string) *batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	if err := env.c.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelTask: task}); err != nil || len(list.Items) != 1 {
		t.Fatalf("Jobs of %s: %d, %v", task, len(list.Items), err)
	}
	return &list.Items[0]
}

// --- the tests ---------------------------------------------------------------

// A ClusterQueue of 2 CPUs admits 2 of 5 one-CPU Tasks at a time; the held
// ones wait for capacity with Kueue's reason, never StartTimeout (their
// start timeout is 5 s); a high-priority Task created last goes first.
func TestKueueAdmitsTwoOfFiveTasksAtATimeInPriorityOrder(t *testing.T) {
	t.Parallel()
	ns := kueueNamespace(t, "kueue-quota", 2, false)
	jobs := harness.RecordJobs(t, env.c, ns)
	// The two first finish apart, so places free one at a time.
	create(t, kueueTask(ns, "low-1", "low", 5))
	create(t, kueueTask(ns, "low-2", "low", 15))
	for _, name := range []string{"low-1", "low-2"} {
		waitTask(t, ns, name, "running", func(t *v1alpha1.Task) bool { return t.Status.Phase == v1alpha1.PhaseRunning })
	}
	for _, name := range []string{"low-3", "low-4"} {
		create(t, kueueTask(ns, name, "low", 2))
	}
	create(t, kueueTask(ns, "urgent", "high", 2))
	held := waitTask(t, ns, "low-3", "WaitingForCapacity with Kueue's reason", func(t *v1alpha1.Task) bool {
		c := harness.Cond(t, v1alpha1.ConditionReady)
		return c.Reason == string(v1alpha1.ReasonWaitingForCapacity) && strings.Contains(c.Message, "held by Kueue (Workload")
	})
	t.Logf("low-3 waits: %s", harness.Cond(held, v1alpha1.ConditionReady).Message)

	for _, name := range []string{"low-1", "low-2", "low-3", "low-4", "urgent"} {
		done := waitTask(t, ns, name, "Succeeded", succeeded)
		if done.Status.Attempts != 1 || strings.Contains(done.Status.LastError, "StartTimeout") {
			t.Errorf("%s: attempts %d, lastError %q", name, done.Status.Attempts, done.Status.LastError)
		}
	}
	order := jobs.StartOrder()
	t.Logf("Jobs started (unsuspended) in order %v; at most %d running at once", order, jobs.MaxRunning())
	if jobs.MaxRunning() > 2 {
		t.Fatalf("%d Jobs ran at once under a 2-CPU quota", jobs.MaxRunning())
	}
	if len(order) != 5 || order[2] != "urgent" {
		t.Fatalf("start order %v: the high-priority Task should be the third", order)
	}
}

// Cancelling a Task whose attempt Kueue admitted ends its pods, keeps its
// Job, releases its quota (the held Task starts) and Kueue never
// unsuspends it again.
func TestCancellingAKueueAdmittedTaskReleasesItsQuota(t *testing.T) {
	t.Parallel()
	ns := kueueNamespace(t, "kueue-cancel", 1, false)
	startKueueTask(t, ns, "long", 600)
	create(t, kueueTask(ns, "next", "low", 2))
	waitTask(t, ns, "next", "held", func(t *v1alpha1.Task) bool {
		return harness.Cond(t, v1alpha1.ConditionReady).Reason == string(v1alpha1.ReasonWaitingForCapacity)
	})

	long := getTask(t, ns, "long")
	patch := client.MergeFrom(long.DeepCopy())
	long.Annotations = map[string]string{v1alpha1.AnnotationCancel: "stop-it"}
	if err := env.c.Patch(context.Background(), long, patch); err != nil {
		t.Fatal(err)
	}
	waitTask(t, ns, "long", "Cancelled", func(t *v1alpha1.Task) bool {
		return harness.Cond(t, v1alpha1.ConditionReady).Reason == string(v1alpha1.ReasonCancelled)
	})
	waitTask(t, ns, "next", "Succeeded on the released quota", succeeded)

	// The Job stays suspended, or it finished: Kueue can resume it in the
	// moment between its suspension and its Workload's deactivation, and
	// the pod's exit on SIGTERM (143) then fails it through the pod
	// failure policy (seen once in 3 runs). A finished Job never runs
	// again either way.
	job := jobOf(t, ns, "long")
	if held := ptr.Deref(job.Spec.Suspend, false) || runs.JobFinished(job); !held || runs.AttemptOf(job, 1).Phase != runs.Stopped {
		t.Fatalf("the cancelled attempt's Job: suspend %v, finished %v, phase %s", ptr.Deref(job.Spec.Suspend, false), runs.JobFinished(job), runs.AttemptOf(job, 1).Phase)
	}
	wls := &unstructured.UnstructuredList{}
	wls.SetAPIVersion(kueueAPI)
	wls.SetKind("WorkloadList")
	if err := env.c.List(context.Background(), wls, client.InNamespace(ns), client.MatchingLabels{"kueue.x-k8s.io/job-uid": string(job.UID)}); err != nil || len(wls.Items) != 1 {
		t.Fatalf("the cancelled Job's Workload: %d, %v", len(wls.Items), err)
	}
	if active, _, _ := unstructured.NestedBool(wls.Items[0].Object, "spec", "active"); active {
		t.Fatal("the cancelled Job's Workload is still active")
	}
}

// A low-priority attempt Kueue preempts for a high-priority Task is
// suspended, runs again once the quota is free, and the Task succeeds on
// that same attempt: a preemption does not burn an attempt.
func TestAPreemptedAttemptIsRerunWithoutBurningAnAttempt(t *testing.T) {
	t.Parallel()
	ns := kueueNamespace(t, "kueue-preempt", 1, true)
	startKueueTask(t, ns, "batch", 8)
	create(t, kueueTask(ns, "urgent", "high", 2))

	harness.Eventually(t, 60*time.Second, "batch's Job suspended by Kueue (preempted)", nil, func(ctx context.Context) (bool, string) {
		job := jobOf(t, ns, "batch")
		a := runs.AttemptOf(job, 1)
		return a.Phase == runs.Active && a.Held, fmt.Sprintf("phase %s held %v", a.Phase, a.Held)
	})
	waitTask(t, ns, "urgent", "Succeeded", succeeded)
	done := waitTask(t, ns, "batch", "Succeeded after readmission", succeeded)
	if done.Status.Attempts != 1 {
		t.Fatalf("the preempted Task took %d attempts, want 1", done.Status.Attempts)
	}
}

// startKueueTask creates a low-priority Kueue Task whose pod runs seconds
// and waits until Kueue admitted it and it runs.
func startKueueTask(t *testing.T, ns, name string, seconds int) {
	t.Helper()
	create(t, kueueTask(ns, name, "low", seconds))
	waitTask(t, ns, name, "running", func(t *v1alpha1.Task) bool { return t.Status.Phase == v1alpha1.PhaseRunning })
}
