//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// Queues and capacity on the real node (contract v4, Task queues; Waiting
// for capacity is not a failure).

// A team queue of 2 runs five real Tasks at most two at a time, and a
// priority Task created last jumps the line.
func TestATeamQueueRunsAtMostTwoRealTasksAtOnceAndAPriorityTaskJumpsTheLine(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-queue")
	jobs := harness.RecordJobs(t, env.c, ns)
	create(t, testutil.NewTaskQueue(ns, "team", 2))
	names := []string{"build-1", "build-2", "build-3", "build-4"}
	// build-N sleeps 3N s, so two running builds never end together: two
	// places freed in one queue pass would admit the hotfix and the oldest
	// build at once, and their Jobs could be created in either order.
	for _, name := range names {
		create(t, testutil.NewTask(ns, name, testutil.Queue("team"),
			testutil.Shell(`echo "start $TASK_NAME"; sleep $((3 * ${TASK_NAME#build-})); echo "done $TASK_NAME"`)))
	}
	// Both places are taken and two builds wait before the hotfix comes.
	eventually(t, 60*time.Second, "2 running and 2 queued", func(ctx context.Context) (bool, string) {
		tq := &v1alpha1.TaskQueue{}
		if err := env.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "team"}, tq); err != nil {
			return false, err.Error()
		}
		return tq.Status.Running == 2 && tq.Status.Queued == 2, fmt.Sprintf("running %d queued %d", tq.Status.Running, tq.Status.Queued)
	})
	create(t, testutil.NewTask(ns, "hotfix", testutil.Queue("team"), testutil.Priority(100), testutil.Shell(`echo "hotfix applied"`)))
	queued := kubectl(t, 20*time.Second, "get", "tasks", "-n", ns)
	t.Logf("kubectl get tasks:\n%s", queued)
	if !strings.Contains(queued, "Queued") {
		t.Errorf("kubectl get tasks shows no Queued Task:\n%s", queued)
	}
	line := kubectlTask(t, 20*time.Second, "queue", "team", "-n", ns)
	t.Logf("kubectl task queue team:\n%s", line)

	for _, name := range append(names, "hotfix") {
		kubectlWait(t, ns, "condition=Ready", "task/"+name, 120*time.Second)
	}
	maxActive, order := jobs.MaxActive(), jobs.Order()
	t.Logf("Jobs created in order %v; at most %d active at once", order, maxActive)
	if maxActive > 2 {
		t.Fatalf("%d attempts were active at once; the queue admits 2", maxActive)
	}
	if len(order) != 5 || order[2] != "hotfix" {
		t.Fatalf("Jobs created in order %v: the hotfix should be the third, ahead of the waiting builds", order)
	}
	if logs := kubectlTask(t, 30*time.Second, "logs", "hotfix", "-n", ns); !strings.Contains(logs, "hotfix applied") {
		t.Fatalf("hotfix logs: %q", logs)
	}
	tq := kubectl(t, 20*time.Second, "get", "tq", "-n", ns)
	if !strings.Contains(tq, "MAX") || !strings.Contains(tq, "RUNNING") || !strings.Contains(tq, "QUEUED") {
		t.Fatalf("kubectl get tq columns:\n%s", tq)
	}
	t.Logf("kubectl get tq:\n%s", tq)
}

// A ResourceQuota that is used up (one pod allowed, and another Task's pod
// holds it) keeps an attempt waiting for capacity (WaitingForCapacity, the
// quota's refusal as the cause) instead of failing it with StartTimeout;
// capacityTimeoutSeconds bounds the wait when set; once the quota has room
// the attempt runs. (A quota whose whole limit is below what one pod asks
// can never make room: that is StartTimeout, see refused_test.go.)
func TestAnAttemptAResourceQuotaRefusesWaitsForCapacityInsteadOfFailing(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-quota")
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "one-pod"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("1")}}}
	create(t, quota)
	eventually(t, 30*time.Second, "the quota controller counts the namespace", func(ctx context.Context) (bool, string) {
		got := &corev1.ResourceQuota{}
		if err := env.c.Get(ctx, client.ObjectKeyFromObject(quota), got); err != nil {
			return false, err.Error()
		}
		_, ok := got.Status.Used[corev1.ResourcePods]
		return ok, fmt.Sprintf("%v", got.Status)
	})
	// holder's pod takes the quota's one place and keeps it.
	create(t, testutil.NewTask(ns, "holder", testutil.Shell(runsUntilStopped)))
	runningJob(t, ns, "holder")
	// patient's start timeout is also the time its pod has to start once
	// the quota has room: 20 s, since on a real node busy with the other
	// parallel tests a pod once took more than 5 s from creation to
	// Running, and the attempt then failed StartTimeout.
	create(t, testutil.NewTask(ns, "patient", testutil.StartTimeout(20), testutil.Shell(`echo "ran once there was room"`)))
	create(t, testutil.NewTask(ns, "bounded", testutil.StartTimeout(5), testutil.Shell("true"), testutil.CapacityTimeout(15)))

	eventually(t, 60*time.Second, "patient waits for capacity", func(ctx context.Context) (bool, string) {
		task, err := harness.GetTask(ctx, env.c, ns, "patient")
		if err != nil {
			return false, err.Error()
		}
		c := harness.Cond(task, v1alpha1.ConditionReady)
		return c.Reason == string(v1alpha1.ReasonWaitingForCapacity) && strings.Contains(c.Message, "exceeded quota"), c.Reason + ": " + c.Message
	})
	kubectlWait(t, ns, "condition=Failed", "task/bounded", 60*time.Second)
	bounded := mustGetTask(t, ns, "bounded")
	if !strings.Contains(bounded.Status.LastError, string(v1alpha1.AttemptCapacityTimeout)) {
		t.Fatalf("bounded: lastError %q, want CapacityTimeout", bounded.Status.LastError)
	}
	patient := mustGetTask(t, ns, "patient")
	if patient.Status.Phase != v1alpha1.PhasePending || strings.Contains(patient.Status.LastError, "StartTimeout") || patient.Status.Attempts != 1 {
		t.Fatalf("patient after %s: %s attempts=%d lastError=%q", 20*time.Second, patient.Status.Phase, patient.Status.Attempts, patient.Status.LastError)
	}
	t.Logf("patient waits: %s", harness.Cond(patient, v1alpha1.ConditionReady).Message)

	// Room in the quota: the same attempt runs.
	got := &corev1.ResourceQuota{}
	must(t, env.c.Get(ctxFor(t, 10*time.Second), client.ObjectKeyFromObject(quota), got))
	got.Spec.Hard[corev1.ResourcePods] = resource.MustParse("5")
	must(t, env.c.Update(ctxFor(t, 10*time.Second), got))
	kubectlWait(t, ns, "condition=Ready", "task/patient", 120*time.Second)
	if done := mustGetTask(t, ns, "patient"); done.Status.Attempts != 1 {
		t.Fatalf("patient took %d attempts, want 1: waiting is not failing", done.Status.Attempts)
	}
}
