//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// Stops are prompt for any script. Each stop path ends the pod of a plain
// `sleep 600` (no trap: a shell that ignores SIGTERM would hold its pod
// for the whole grace period, 30 s, if it were PID 1). The time measured
// is from the operator's decision (the Job's stop-time annotation) to the
// end of the pod's last process, as this host's /proc shows it
// (processWatch): the operator's Job patch, the Job controller's pod
// deletion, the kubelet's SIGTERM and the script's own end. The decision's
// timestamp has whole seconds (rounded down), so a measured time can be up
// to a second longer than the real one, never shorter.

// stopBound is how long after the stop decision a trap-less script may
// still run. A script that ignored SIGTERM would run for the whole 30 s
// grace period.
const stopBound = 5 * time.Second

// plainSleep ignores nothing and handles nothing: it ends at SIGTERM only
// because it is not PID 1 in its container.
const plainSleep = "sleep 600"

func TestAStoppedAttemptOfAPlainSleepEndsWithinSeconds(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-stops")
	for _, tc := range []struct {
		name string
		opts []testutil.TaskOpt
		// stop stops the running attempt the way a user or a timeout does.
		stop func(ctx context.Context, t *testing.T, task string)
		// reason is the stopped attempt's reason.
		reason v1alpha1.Reason
	}{{
		name: "cancel",
		stop: func(ctx context.Context, t *testing.T, task string) {
			kubectlTask(t, 30*time.Second, "cancel", task, "-n", ns)
		},
		reason: v1alpha1.AttemptCancelled,
	}, {
		name: "replace",
		opts: []testutil.TaskOpt{testutil.Concurrency(v1alpha1.ReplaceConcurrent)},
		stop: func(ctx context.Context, t *testing.T, task string) {
			kubectlTask(t, 30*time.Second, "trigger", task, "-n", ns)
		},
		reason: v1alpha1.AttemptReplaced,
	}, {
		// Two replicas that do not fit the node together: index 0 runs,
		// index 1 waits for capacity until capacityTimeoutSeconds stops the
		// attempt, running pod and all.
		name: "capacity-timeout",
		opts: []testutil.TaskOpt{testutil.Replicas(2), testutil.Requests("cpu", "1200m"),
			testutil.CapacityTimeout(60), // long enough for index 0 to get a node while other tests hold CPU
		},
		reason: v1alpha1.AttemptCapacityTimeout,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := "sleep-" + tc.name
			create(t, testutil.NewTask(ns, name, append([]testutil.TaskOpt{testutil.Shell(plainSleep)}, tc.opts...)...))
			job, procs := runningJob(t, ns, name)
			if tc.stop != nil {
				tc.stop(ctxFor(t, time.Minute), t, name)
			}
			took := stoppedPodEnds(t, ns, job, tc.reason, procs)
			t.Logf("%s: the pod of a trap-less %q ended %s after the stop decision", tc.name, plainSleep, harness.Secs(took))
		})
	}
}

// runningJob waits for the Task's first Job to have a Running pod and
// returns its name and a watch on its running pods' processes.
func runningJob(t *testing.T, ns, task string) (string, *processWatch) {
	t.Helper()
	var job string
	var running []corev1.Pod
	eventually(t, 90*time.Second, "a Running pod of task/"+task, func(ctx context.Context) (bool, string) {
		pods, err := harness.PodsOf(ctx, env.c, ns, task)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning {
				job, running = p.Labels[batchv1.JobNameLabel], pods
				return true, ""
			}
		}
		return false, fmt.Sprintf("pods %v", harness.PodPhases(pods))
	})
	return job, watchProcesses(t, running)
}

// stoppedPodEnds waits for the operator to stop jobName for reason, then
// for the watched processes of its pods to end. It fails the test when
// they ended later than stopBound after the stop decision and returns how
// long after it they did.
func stoppedPodEnds(t *testing.T, ns, jobName string, reason v1alpha1.Reason, procs *processWatch) time.Duration {
	t.Helper()
	var decided time.Time
	eventually(t, 90*time.Second, "job/"+jobName+" stopped for "+string(reason), func(ctx context.Context) (bool, string) {
		var job batchv1.Job
		if err := env.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobName}, &job); err != nil {
			return false, err.Error()
		}
		got := job.Annotations[v1alpha1.AnnotationStopReason]
		if got == "" {
			return false, "not stopped yet"
		}
		if got != string(reason) {
			t.Fatalf("job/%s stopped for %s, want %s", jobName, got, reason)
		}
		at, err := time.Parse(time.RFC3339, job.Annotations[v1alpha1.AnnotationStopTime])
		if err != nil {
			t.Fatalf("job/%s stop time: %v", jobName, err)
		}
		decided = at
		return true, ""
	})
	ended, ok := procs.endedBy(60 * time.Second)
	if !ok {
		t.Fatalf("the processes of job/%s still run 60 s after it was stopped", jobName)
	}
	took := ended.Sub(decided)
	if took > stopBound {
		t.Errorf("the processes of job/%s ended %s after the stop decision (%s), want at most %s: %s", jobName, harness.Secs(took), decided.Format(time.RFC3339), stopBound, podDeletions(t, ns, jobName, decided))
	}
	return took
}

// podDeletions says when the pods of a stopped Job were deleted, relative
// to the stop decision, to tell the Job controller's delay from the
// script's.
func podDeletions(t *testing.T, ns, jobName string, decided time.Time) string {
	var list corev1.PodList
	if err := env.c.List(ctxFor(t, 10*time.Second), &list, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: jobName}); err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name+" not deleted")
			continue
		}
		grace := time.Duration(ptr.Deref(p.DeletionGracePeriodSeconds, 0)) * time.Second
		out = append(out, fmt.Sprintf("%s deleted %s after the decision", p.Name, harness.Secs(p.DeletionTimestamp.Add(-grace).Sub(decided))))
	}
	if len(out) == 0 {
		return "its pods are gone"
	}
	return strings.Join(out, ", ")
}
