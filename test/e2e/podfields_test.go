//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// Pod fields and the run context on the real node (contract v4, Pods and
// failure classes): each outcome comes from what really happens in the
// container.

// A script shipped in a ConfigMap runs from its mount, in an emptyDir
// working directory that the fsGroup makes writable for UID 65532, and it
// sees its run context.
func TestAScriptFromAConfigMapRunsInAWritableEmptyDirWithItsRunContext(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-podfields")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scripts"}, Data: map[string]string{
		"run.sh": `#!/bin/sh
set -e
echo "uid=$(id -u) gid=$(id -g) pwd=$(pwd)"
echo hello > out.txt && echo "wrote $(cat out.txt) to $(pwd)/out.txt"
echo "context: name=$TASK_NAME ns=$TASK_NAMESPACE run=$TASK_RUN_ID attempt=$TASK_ATTEMPT index=$JOB_COMPLETION_INDEX"
[ "$TASK_ATTEMPT" -ge 2 ] || { echo "attempt $TASK_ATTEMPT fails on purpose" >&2; exit 1; }
`}}
	create(t, cm)
	create(t, testutil.NewTask(ns, "from-cm", testutil.Retries(1, 1, 1, 1), testutil.Shell("/scripts/run.sh"), func(task *v1alpha1.Task) {
		task.Spec.Volumes = []v1alpha1.Volume{
			{Name: "scripts", ConfigMap: &v1alpha1.ConfigMapVolumeSource{Name: "scripts", DefaultMode: ptr.To[int32](0o555)}},
			{Name: "work", EmptyDir: &v1alpha1.EmptyDirVolumeSource{}},
		}
		task.Spec.VolumeMounts = []v1alpha1.VolumeMount{{Name: "scripts", MountPath: "/scripts", ReadOnly: true}, {Name: "work", MountPath: "/work"}}
		task.Spec.WorkingDir = "/work"
		task.Spec.SecurityContext = &v1alpha1.SecurityContext{FSGroup: ptr.To[int64](65532)}
	}))
	kubectlWait(t, ns, "condition=Ready", "task/from-cm", 90*time.Second)
	task := mustGetTask(t, ns, "from-cm")
	if task.Status.Attempts != 2 {
		t.Fatalf("attempts %d, want 2 (the first fails on purpose)", task.Status.Attempts)
	}
	logs := kubectlTask(t, 30*time.Second, "logs", "from-cm", "-n", ns)
	for _, s := range []string{"uid=65532 gid=65532 pwd=/work", "wrote hello to /work/out.txt",
		"context: name=from-cm ns=" + ns + " run=0 attempt=2 index=0"} {
		if !strings.Contains(logs, s) {
			t.Errorf("attempt 2's log lacks %q:\n%s", s, logs)
		}
	}
	first := kubectlTask(t, 30*time.Second, "logs", "from-cm", "-n", ns, "--attempt", "1")
	if !strings.Contains(first, "run=0 attempt=1") {
		t.Errorf("attempt 1's log lacks its run context:\n%s", first)
	}
	t.Logf("the ConfigMap script ran twice; attempt 2 said:\n%s", logs)
}

// A cron run's pods know their slot; an exit code in nonRetryableExitCodes
// ends the run after one attempt although retries are left; a nodeSelector
// no node matches waits for capacity (not StartTimeout), until
// capacityTimeoutSeconds if set.
func TestCronContextNonRetryableExitCodesAndAnUnmatchedNodeSelector(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-classes")
	create(t, testutil.NewTask(ns, "cron", testutil.Schedule("@every 5s"),
		testutil.Shell(`echo "run=$TASK_RUN_ID slot=$TASK_SCHEDULED_TIME attempt=$TASK_ATTEMPT"`)))
	create(t, testutil.NewTask(ns, "bad-input", testutil.Retries(3, 1, 1, 1), testutil.Shell(`echo "bad input" >&2; exit 64`),
		func(task *v1alpha1.Task) { task.Spec.NonRetryableExitCodes = []int32{64, 65} }))
	nowhere := func(task *v1alpha1.Task) { task.Spec.NodeSelector = map[string]string{"pool": "does-not-exist"} }
	create(t, testutil.NewTask(ns, "nowhere", testutil.StartTimeout(5), nowhere))
	create(t, testutil.NewTask(ns, "nowhere-bounded", testutil.StartTimeout(5), nowhere, testutil.CapacityTimeout(8)))
	created := time.Now()

	kubectlWait(t, ns, "condition=Finished", "task/bad-input", 90*time.Second)
	bad := mustGetTask(t, ns, "bad-input")
	if bad.Status.Attempts != 1 {
		t.Errorf("bad-input: %d attempts, want 1 (exit 64 is not retryable)", bad.Status.Attempts)
	}
	expectCondition(t, bad, v1alpha1.ConditionFailed, metav1.ConditionTrue, string(v1alpha1.ReasonNotRetryable))
	if r := bad.Status.AttemptRecords; len(r) != 1 || r[0].ExitCode == nil || *r[0].ExitCode != 64 {
		t.Errorf("bad-input attempt records %+v, want one with exit code 64", r)
	}

	var slotRun *v1alpha1.RunRecord
	eventually(t, 60*time.Second, "a cron run to succeed", func(ctx context.Context) (bool, string) {
		task, err := harness.GetTask(ctx, env.c, ns, "cron")
		if err != nil {
			return false, err.Error()
		}
		for i := range task.Status.History {
			if task.Status.History[i].Result == v1alpha1.RunResultSucceeded {
				slotRun = &task.Status.History[i]
				return true, ""
			}
		}
		return false, fmt.Sprintf("history %d runs", len(task.Status.History))
	})
	slot, ok := runs.SlotOf(slotRun.RunID)
	if !ok {
		t.Fatalf("run %s is not a slot's run", slotRun.RunID)
	}
	logs := kubectlTask(t, 30*time.Second, "logs", "cron", "-n", ns, "--run", slotRun.RunID)
	if want := fmt.Sprintf("run=%s slot=%s attempt=1", slotRun.RunID, slot.Format(time.RFC3339)); !strings.Contains(logs, want) {
		t.Errorf("the cron run's log %q lacks %q", logs, want)
	}

	// Waiting for a node is not a failure: past its start timeout the
	// attempt waits, visibly, and only capacityTimeoutSeconds ends it.
	kubectlWait(t, ns, "condition=Failed", "task/nowhere-bounded", 60*time.Second)
	bounded := mustGetTask(t, ns, "nowhere-bounded")
	if !strings.Contains(bounded.Status.LastError, string(v1alpha1.AttemptCapacityTimeout)) || !strings.Contains(bounded.Status.LastError, "Unschedulable") {
		t.Errorf("nowhere-bounded: lastError %q, want CapacityTimeout naming Unschedulable", bounded.Status.LastError)
	}
	eventually(t, 30*time.Second, "task/nowhere waiting for capacity past its start timeout", func(ctx context.Context) (bool, string) {
		task, err := harness.GetTask(ctx, env.c, ns, "nowhere")
		if err != nil {
			return false, err.Error()
		}
		ready := harness.Cond(task, v1alpha1.ConditionReady)
		return time.Since(created) > 10*time.Second && ready.Reason == string(v1alpha1.ReasonWaitingForCapacity) &&
			strings.Contains(ready.Message, "Unschedulable"), fmt.Sprintf("phase %s, Ready %s: %s", task.Status.Phase, ready.Reason, ready.Message)
	})
	waiting := mustGetTask(t, ns, "nowhere")
	if waiting.Status.Phase != v1alpha1.PhasePending || waiting.Status.Attempts != 1 || waiting.Status.LastError != "" {
		t.Errorf("nowhere: phase %s, %d attempts, lastError %q; want Pending, 1 attempt, no error", waiting.Status.Phase, waiting.Status.Attempts, waiting.Status.LastError)
	}
}

// An http Task whose server answers 404 ends NotRetryable after one
// attempt, although maxRetry allows more; with retryAllFailures it is
// retried as before.
func TestAnHTTP404IsNotRetriedUnlessRetryAllFailures(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-http-404")
	srv := serveOnBridge(t)
	create(t, testutil.NewTask(ns, "missing", testutil.HTTP(srv.url+"/no-such-path"), testutil.Retries(2, 1, 1, 1)))
	create(t, testutil.NewTask(ns, "stubborn", testutil.HTTP(srv.url+"/no-such-path"), testutil.Retries(1, 1, 1, 1),
		func(task *v1alpha1.Task) { task.Spec.HTTP = &v1alpha1.HTTPSpec{RetryAllFailures: true} }))
	kubectlWait(t, ns, "condition=Finished", "task/missing", 90*time.Second)
	kubectlWait(t, ns, "condition=Finished", "task/stubborn", 90*time.Second)
	missing, stubborn := mustGetTask(t, ns, "missing"), mustGetTask(t, ns, "stubborn")
	expectCondition(t, missing, v1alpha1.ConditionFailed, metav1.ConditionTrue, string(v1alpha1.ReasonNotRetryable))
	if missing.Status.Attempts != 1 || !strings.Contains(missing.Status.LastError, "404") {
		t.Errorf("missing: %d attempts, lastError %q; want 1 attempt naming the 404", missing.Status.Attempts, missing.Status.LastError)
	}
	expectCondition(t, stubborn, v1alpha1.ConditionFailed, metav1.ConditionTrue, string(v1alpha1.ReasonRetriesExhausted))
	if stubborn.Status.Attempts != 2 {
		t.Errorf("stubborn: %d attempts, want 2 (retryAllFailures)", stubborn.Status.Attempts)
	}
}

// A 503 with Retry-After: 3 is retried no sooner than 3 s later, although
// the backoff says 1 s.
func TestAnHTTP503WithRetryAfterIsRetriedNoSoonerThanTheServerAsked(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-http-503")
	srv := serveOnBridge(t)
	create(t, testutil.NewTask(ns, "throttled", testutil.HTTP(srv.url+"/throttle?task=throttled"), testutil.Retries(2, 1, 60, 1)))
	kubectlWait(t, ns, "condition=Ready", "task/throttled", 90*time.Second)
	calls := srv.calls("throttled")
	if len(calls) != 2 {
		t.Fatalf("%d requests, want 2 (a 503, then the retry)", len(calls))
	}
	gap := calls[1].Sub(calls[0])
	if gap < 3*time.Second {
		t.Errorf("the retry came %s after the 503 with Retry-After: 3", gap)
	}
	task := mustGetTask(t, ns, "throttled")
	if task.Status.Attempts != 2 {
		t.Errorf("attempts %d, want 2", task.Status.Attempts)
	}
	t.Logf("503 with Retry-After: 3, backoff 1 s: the retry's request came %s later", harness.Secs(gap))
}
