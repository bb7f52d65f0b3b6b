//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// Stops are prompt for any script. Each stop path ends the pod of a plain
// `sleep 600` (no trap: a shell that ignores SIGTERM would hold its pod
// for the whole grace period, 30 s, if it were PID 1). Two times are
// measured: from the kill (the pod's deletion, which the Job controller
// makes once the operator suspended the Job) to the container's end, which
// is what the script's handling of SIGTERM decides and must be within
// stopBound; and from the operator's decision (the Job's stop-time
// annotation) to the container's end, which adds the Job controller's
// and the kubelet's latency and is bounded by decisionBound, loose enough
// for a machine whose cores are busy with something else. Timestamps have
// whole seconds (rounded down), so a measured time can be up to a second
// longer than the real one.

// stopBound is how long a killed pod's plain `sleep` may take to end,
// as the test can see it: from the pod's deletion to its container's end
// when the kubelet's terminated state is seen, else to the pod being gone,
// which includes the kubelet noticing the deletion and the pod's removal
// (seen up to 6.5 s on an idle machine). A script that ignored SIGTERM
// would hold its pod for the whole 30 s grace period.
const stopBound = 10 * time.Second

// decisionBound is how long after the operator's stop decision the pod
// may end, the Job controller's and the kubelet's latency included.
const decisionBound = 20 * time.Second

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
		opts: []testutil.TaskOpt{testutil.Replicas(2), func(t *v1alpha1.Task) {
			t.Spec.CapacityTimeoutSeconds = ptr.To[int32](15)
			t.Spec.Resources = &v1alpha1.Resources{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1200m")}}
		}},
		reason: v1alpha1.AttemptCapacityTimeout,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			name := "sleep-" + tc.name
			create(t, testutil.NewTask(ns, name, append([]testutil.TaskOpt{testutil.Shell(plainSleep)}, tc.opts...)...))
			job := runningJob(t, ns, name)
			if tc.stop != nil {
				tc.stop(ctxFor(t, time.Minute), t, name)
			}
			took := stoppedPodEnds(t, ns, job, tc.reason)
			t.Logf("%s: the pod of a trap-less %q ended %s after the stop decision", tc.name, plainSleep, harness.Secs(took))
		})
	}
}

// runningJob waits for the Task's first Job to have a Running pod and
// returns its name.
func runningJob(t *testing.T, ns, task string) string {
	t.Helper()
	var job string
	eventually(t, 90*time.Second, "a Running pod of task/"+task, func(ctx context.Context) (bool, string) {
		pods, err := harness.PodsOf(ctx, env.c, ns, task)
		if err != nil {
			return false, err.Error()
		}
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning {
				job = p.Labels[batchv1.JobNameLabel]
				return true, ""
			}
		}
		return false, fmt.Sprintf("pods %v", harness.PodPhases(pods))
	})
	return job
}

// stoppedPodEnds waits for the operator to stop jobName for reason, then
// for every pod of it to end (gone, or its task container terminated). It
// fails the test when a pod's container ended later than stopBound after
// the pod's deletion, or later than decisionBound after the stop decision,
// and returns the time from the decision to the last end.
func stoppedPodEnds(t *testing.T, ns, jobName string, reason v1alpha1.Reason) time.Duration {
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
	// Per pod: when it was deleted (the kill) and when its container ended,
	// from the kubelet's own record when the pod is seen terminated, else
	// when the pod was seen gone.
	killed, ended := map[string]time.Time{}, map[string]time.Time{}
	eventually(t, 60*time.Second, "the pods of stopped job/"+jobName+" to end", func(ctx context.Context) (bool, string) {
		var list corev1.PodList
		if err := env.c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{batchv1.JobNameLabel: jobName}); err != nil {
			return false, err.Error()
		}
		now, present, waiting := time.Now(), map[string]bool{}, ""
		for _, p := range list.Items {
			present[p.Name] = true
			if _, seen := killed[p.Name]; !seen && p.DeletionTimestamp != nil {
				// The deletion timestamp is when the grace period ends;
				// the kill (SIGTERM) came that period earlier. Only the
				// first look counts: the kubelet's final delete (grace 0)
				// moves the timestamp to the container's end.
				grace := time.Duration(ptr.Deref(p.DeletionGracePeriodSeconds, 0)) * time.Second
				killed[p.Name] = p.DeletionTimestamp.Add(-grace)
			}
			if _, ok := ended[p.Name]; ok {
				continue
			}
			if at, ok := podEndedAt(&p); ok {
				ended[p.Name] = at
			} else {
				waiting = fmt.Sprintf("pod %s %s", p.Name, p.Status.Phase)
			}
		}
		for name := range killed {
			if _, ok := ended[name]; !ok && !present[name] {
				ended[name] = now // gone between two looks
			}
		}
		return waiting == "", waiting
	})
	var last time.Time
	for name, end := range ended {
		if end.After(last) {
			last = end
		}
		if kill, ok := killed[name]; ok && end.Sub(kill) > stopBound {
			t.Errorf("pod %s ended %s after it was deleted, want at most %s: the script did not end at SIGTERM", name, harness.Secs(end.Sub(kill)), stopBound)
		}
	}
	took := last.Sub(decided)
	if took > decisionBound {
		t.Errorf("the pods of job/%s ended %s after the stop decision (%s), want at most %s", jobName, harness.Secs(took), decided.Format(time.RFC3339), decisionBound)
	}
	for name, end := range ended {
		if kill, ok := killed[name]; ok {
			t.Logf("pod %s: deleted %s after the stop decision, its container ended %s after that", name, harness.Secs(kill.Sub(decided)), harness.Secs(end.Sub(kill)))
		}
	}
	return took
}

// podEndedAt is when a pod's task container ended, from the kubelet's
// record (whole seconds); ok is false while it runs.
func podEndedAt(p *corev1.Pod) (time.Time, bool) {
	for _, cs := range p.Status.ContainerStatuses {
		if term := cs.State.Terminated; term != nil {
			return term.FinishedAt.Time, true
		}
	}
	if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return time.Now(), true
	}
	return time.Time{}, false
}
