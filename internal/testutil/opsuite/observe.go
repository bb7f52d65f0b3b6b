package opsuite

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

// Observing: waiting for what the operator does, reading it, checking it.

// Eventually polls check (testutil.Eventually) for up to 20 s, failing the
// test with the last thing check said when the deadline passes.
func Eventually(t *testing.T, what string, check func() (bool, string)) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, 50*time.Millisecond, what, func(context.Context) (bool, string) { return check() })
}

// GetTask reads the stored Task.
func GetTask(t *testing.T, task *v1alpha1.Task) *v1alpha1.Task { return get(t, task, &v1alpha1.Task{}) }

// WaitTask waits until the stored Task satisfies ok.
func WaitTask(t *testing.T, task *v1alpha1.Task, what string, ok func(*v1alpha1.Task) bool) *v1alpha1.Task {
	t.Helper()
	return waitFor(t, task, what, ok, func(got *v1alpha1.Task) string { return "status " + StatusSummary(got) })
}

// get reads the stored version of obj into into.
func get[T client.Object](t *testing.T, obj, into T) T {
	t.Helper()
	Must(t, K8s.Get(Ctx, client.ObjectKeyFromObject(obj), into))
	return into
}

// waitFor waits until the stored version of obj satisfies ok; show says
// what it was when it did not.
func waitFor[T client.Object](t *testing.T, obj T, what string, ok func(T) bool, show func(T) string) T {
	t.Helper()
	var got T
	Eventually(t, what, func() (bool, string) {
		got = reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
		if err := K8s.Get(Ctx, client.ObjectKeyFromObject(obj), got); err != nil {
			return false, err.Error()
		}
		return ok(got), show(got)
	})
	return got
}

func StatusSummary(t *v1alpha1.Task) string {
	s := t.Status
	conds := ""
	for _, c := range s.Conditions {
		conds += fmt.Sprintf(" %s=%s(%s)", c.Type, c.Status, c.Reason)
	}
	return fmt.Sprintf("phase=%s run=%s attempts=%d active=%d lastError=%q%s", s.Phase, s.CurrentRun, s.Attempts, len(s.Active), s.LastError, conds)
}

func PhaseIs(p v1alpha1.TaskPhase) func(*v1alpha1.Task) bool {
	return func(t *v1alpha1.Task) bool {
		return t.Status.Phase == p && t.Status.ObservedGeneration == t.Generation
	}
}

// JobsOf lists the Task's Jobs from the API server, by name.
func JobsOf(t *testing.T, task *v1alpha1.Task) []batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	Must(t, K8s.List(Ctx, &list, client.InNamespace(task.Namespace), testutil.TaskLabel(task)))
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// WaitJobs waits until the Task has n Jobs and returns them.
func WaitJobs(t *testing.T, task *v1alpha1.Task, n int) []batchv1.Job {
	t.Helper()
	var js []batchv1.Job
	Eventually(t, fmt.Sprintf("%d Job(s) of %s", n, task.Name), func() (bool, string) {
		js = JobsOf(t, task)
		return len(js) == n, fmt.Sprintf("%d Jobs", len(js))
	})
	return js
}

// EventsOf drains recorder (a hand-driven reconciler's events) and
// returns the events of reason.
func EventsOf(recorder *events.FakeRecorder, reason v1alpha1.Reason) []string {
	var out []string
	for len(recorder.Events) > 0 {
		if e := <-recorder.Events; strings.Contains(e, string(reason)) {
			out = append(out, e)
		}
	}
	return out
}

// WaitJobsAtOnce is WaitJobs for what the operator promises to do on the
// event itself (testutil.AtOnce): a bound that a wait for a recheck fails.
func WaitJobsAtOnce(t *testing.T, task *v1alpha1.Task, n int) []batchv1.Job {
	t.Helper()
	var js []batchv1.Job
	testutil.Promptly(t, testutil.AtOnce, 50*time.Millisecond, fmt.Sprintf("%d Job(s) of %s", n, task.Name), func(context.Context) (bool, string) {
		js = JobsOf(t, task)
		return len(js) == n, fmt.Sprintf("%d Jobs", len(js))
	})
	return js
}

// JobOf finds the Job of one run and attempt.
func JobOf(t *testing.T, task *v1alpha1.Task, run string, attempt int) *batchv1.Job {
	t.Helper()
	for _, j := range JobsOf(t, task) {
		if j.Labels[v1alpha1.LabelRun] == run && j.Labels[v1alpha1.LabelAttempt] == strconv.Itoa(attempt) {
			return &j
		}
	}
	t.Fatalf("no Job for run %s attempt %d", run, attempt)
	return nil
}

func Condition(t *v1alpha1.Task, typ string) *metav1.Condition {
	return meta.FindStatusCondition(t.Status.Conditions, typ)
}

// AssertConditions checks Ready, Failed, Reconciling and Stalled against a
// row of the contract's table, and that each has observedGeneration.
func AssertConditions(t *testing.T, task *v1alpha1.Task, ready, failed, reconciling, stalled metav1.ConditionStatus) {
	t.Helper()
	want := map[string]metav1.ConditionStatus{
		v1alpha1.ConditionReady: ready, v1alpha1.ConditionFailed: failed,
		v1alpha1.ConditionReconciling: reconciling, v1alpha1.ConditionStalled: stalled,
	}
	for typ, status := range want {
		c := Condition(task, typ)
		if c == nil {
			t.Fatalf("Condition %s missing: %s", typ, StatusSummary(task))
		}
		if c.Status != status {
			t.Fatalf("Condition %s = %s, want %s: %s", typ, c.Status, status, StatusSummary(task))
		}
		if c.ObservedGeneration != task.Generation {
			t.Fatalf("Condition %s has observedGeneration %d, want %d", typ, c.ObservedGeneration, task.Generation)
		}
	}
}

func GetJob(t *testing.T, job *batchv1.Job) *batchv1.Job {
	t.Helper()
	got := &batchv1.Job{}
	Must(t, K8s.Get(Ctx, client.ObjectKeyFromObject(job), got))
	return got
}

// AssertKstatus checks the verdict health tools (Flux, kpt, cli-utils)
// read from the Task, with the kstatus library itself.
func AssertKstatus(t *testing.T, task *v1alpha1.Task, want kstatus.Status) {
	t.Helper()
	got, msg, err := testutil.Kstatus(task)
	Must(t, err)
	if got != want {
		t.Fatalf("kstatus %s (%s), want %s: %s", got, msg, want, StatusSummary(task))
	}
}

// WaitNextSchedule waits until the Task's status.nextScheduleTime is want.
func WaitNextSchedule(t *testing.T, task *v1alpha1.Task, want time.Time) {
	t.Helper()
	WaitTask(t, task, "nextScheduleTime "+want.Format(time.RFC3339), func(x *v1alpha1.Task) bool {
		return x.Status.NextScheduleTime != nil && x.Status.NextScheduleTime.Time.Equal(want)
	})
}

// WatchClient is a client that can watch, for harness.RecordJobs.
func WatchClient(t *testing.T) client.WithWatch {
	t.Helper()
	wc, err := client.NewWithWatch(RestConfig, client.Options{Scheme: testutil.Scheme()})
	Must(t, err)
	return wc
}

// GetQueue reads the stored TaskQueue.
func GetQueue(t *testing.T, q *v1alpha1.TaskQueue) *v1alpha1.TaskQueue {
	return get(t, q, &v1alpha1.TaskQueue{})
}

// WaitQueue waits until the stored TaskQueue satisfies ok.
func WaitQueue(t *testing.T, q *v1alpha1.TaskQueue, what string, ok func(*v1alpha1.TaskQueue) bool) *v1alpha1.TaskQueue {
	t.Helper()
	return waitFor(t, q, what, ok, func(got *v1alpha1.TaskQueue) string {
		return fmt.Sprintf("running=%d queued=%d admitted=%v", got.Status.Running, got.Status.Queued, got.Status.Admitted)
	})
}

func QueuedAs(reason v1alpha1.Reason) func(*v1alpha1.Task) bool {
	return func(t *v1alpha1.Task) bool {
		c := Condition(t, v1alpha1.ConditionReady)
		return t.Status.Phase == v1alpha1.PhaseQueued && len(t.Status.Queued) == 1 && c != nil && c.Reason == string(reason)
	}
}

// WaitManualCache waits until the hand-driven reconcilers' cache holds the
// object at key (read into obj) as ok says.
func WaitManualCache(t *testing.T, what string, key client.ObjectKey, obj client.Object, ok func() bool) {
	t.Helper()
	Eventually(t, what+" in the manual cache", func() (bool, string) {
		err := ManualClient.Get(Ctx, key, obj)
		return err == nil && ok(), ErrString(err)
	})
}

func ErrString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
