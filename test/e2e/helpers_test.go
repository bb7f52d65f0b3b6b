//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// The simulated pods' annotations (hack/kwok/README.md).
const (
	simExitCode = "sim.taskops.io/exit-code"
	simMessage  = "sim.taskops.io/message"
	simRun      = "sim.taskops.io/run"
	simStart    = "sim.taskops.io/start"
	simDuration = "sim.taskops.io/duration"
)

const pollInterval = 250 * time.Millisecond

// eventually polls cond until it reports done, and fails the test at the
// deadline with what cond last said. It returns how long it took.
func eventually(t testing.TB, timeout time.Duration, what string, cond func(ctx context.Context) (done bool, detail string)) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	var detail string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var done bool
		done, detail = cond(ctx)
		cancel()
		if done {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last: %s%s", timeout, what, detail, operatorNote())
		}
		time.Sleep(pollInterval)
	}
}

// operatorNote adds, to a failure, that the operator is not running.
func operatorNote() string {
	if env.op.alive() {
		return ""
	}
	return fmt.Sprintf(" (the operator is NOT running: %v; see %s)", env.op.exitErr(), env.op.logPath)
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// kubectl runs the project's kubectl and fails the test when it fails.
func kubectl(t testing.TB, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := env.runKubectl(ctx, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, operatorNote())
	}
	return out
}

// kubectlWait runs `kubectl wait --for=FOR OBJ -n NS --timeout=T` and
// returns how long it blocked.
func kubectlWait(t testing.TB, ns, forArg, obj string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	kubectl(t, timeout+15*time.Second, "wait", "-n", ns, "--for="+forArg, obj, fmt.Sprintf("--timeout=%ds", int(timeout.Seconds())))
	return time.Since(start)
}

func randSuffix() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newNamespace creates a namespace that enforces (and warns about) the
// restricted Pod Security Standard, so every Job pod of the suite must pass
// it. It is deleted at the end of the test unless the test failed (then it
// is described in the log and kept for a post-mortem with E2E_KEEP_CLUSTER=1).
func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	if !env.op.alive() {
		t.Fatalf("the operator is not running (it exited: %v); see %s", env.op.exitErr(), env.op.logPath)
	}
	name := prefix + "-" + randSuffix()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name,
		Labels: map[string]string{
			"pod-security.kubernetes.io/enforce":         "restricted",
			"pod-security.kubernetes.io/enforce-version": "latest",
			"pod-security.kubernetes.io/warn":            "restricted",
			"pod-security.kubernetes.io/warn-version":    "latest",
		},
	}}
	if err := env.c.Create(ctxFor(t, 10*time.Second), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			describeNamespace(t, name)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := env.c.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
			t.Logf("deleting namespace %s: %v", name, err)
		}
	})
	return name
}

// describeNamespace logs the Tasks, Jobs, pods and events of a namespace.
func describeNamespace(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, args := range [][]string{
		{"get", "tasks,jobs,pods", "-o", "wide"},
		{"get", "tasks", "-o", "jsonpath={range .items[*]}{.metadata.name}: {.status.phase} attempts={.status.attempts} lastError={.status.lastError} conditions={.status.conditions}{\"\\n\"}{end}"},
		{"get", "events", "--sort-by=.lastTimestamp"},
	} {
		out, err := env.runKubectl(ctx, append([]string{"-n", ns}, args...)...)
		t.Logf("kubectl -n %s %s (err=%v):\n%s", ns, strings.Join(args, " "), err, out)
	}
	t.Logf("operator log: %s", env.op.logPath)
}

// taskOpt changes a Task under construction.
type taskOpt func(*v1alpha1.Task)

// shellTask is a one-shot shell Task.
func shellTask(ns, name string, opts ...taskOpt) *v1alpha1.Task {
	task := &v1alpha1.Task{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.TaskSpec{
			Type:  v1alpha1.TaskTypeShell,
			Shell: "echo e2e",
		},
	}
	for _, o := range opts {
		o(task)
	}
	return task
}

// podAnnotations sets spec.podMetadata.annotations from key, value pairs.
func podAnnotations(kv ...string) taskOpt {
	return func(task *v1alpha1.Task) {
		if task.Spec.PodMetadata == nil {
			task.Spec.PodMetadata = &v1alpha1.PodMetadata{}
		}
		if task.Spec.PodMetadata.Annotations == nil {
			task.Spec.PodMetadata.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			task.Spec.PodMetadata.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func retries(maxRetry, initialSeconds, maxSeconds, factor int32) taskOpt {
	return func(task *v1alpha1.Task) {
		task.Spec.MaxRetry = maxRetry
		task.Spec.Backoff = &v1alpha1.Backoff{InitialSeconds: initialSeconds, MaxSeconds: maxSeconds, Factor: factor}
	}
}

func startTimeout(seconds int32) taskOpt {
	return func(task *v1alpha1.Task) { task.Spec.StartTimeoutSeconds = ptr.To(seconds) }
}

func replicas(n int32) taskOpt {
	return func(task *v1alpha1.Task) { task.Spec.Replicas = n }
}

func create(t testing.TB, obj client.Object) {
	t.Helper()
	if err := env.c.Create(ctxFor(t, 10*time.Second), obj); err != nil {
		t.Fatalf("creating %s %s/%s: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), err)
	}
}

func getTask(ctx context.Context, ns, name string) (*v1alpha1.Task, error) {
	task := &v1alpha1.Task{}
	err := env.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, task)
	return task, err
}

func mustGetTask(t testing.TB, ns, name string) *v1alpha1.Task {
	t.Helper()
	task, err := getTask(ctxFor(t, 10*time.Second), ns, name)
	if err != nil {
		t.Fatalf("getting Task %s/%s: %v", ns, name, err)
	}
	return task
}

func cond(task *v1alpha1.Task, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(task.Status.Conditions, typ); c != nil {
		return *c
	}
	return metav1.Condition{Type: typ, Status: "<missing>"}
}

// expectCondition checks a condition's status and, when reason is not
// empty, its reason.
func expectCondition(t testing.TB, task *v1alpha1.Task, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := cond(task, typ)
	if c.Status != status || (reason != "" && c.Reason != reason) {
		t.Errorf("Task %s: condition %s = %s/%s (%q), want %s/%s", task.Name, typ, c.Status, c.Reason, c.Message, status, reason)
	}
	if c.Status != "<missing>" && c.ObservedGeneration != task.Generation {
		t.Errorf("Task %s: condition %s has observedGeneration %d, want %d", task.Name, typ, c.ObservedGeneration, task.Generation)
	}
}

func jobsOf(ctx context.Context, ns, task string) ([]batchv1.Job, error) {
	var list batchv1.JobList
	err := env.c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelTask: task})
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, err
}

func podsOf(ctx context.Context, ns, task string) ([]corev1.Pod, error) {
	var list corev1.PodList
	err := env.c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelTask: task})
	return list.Items, err
}

func jobCondition(job *batchv1.Job, typ batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == typ && job.Status.Conditions[i].Status == corev1.ConditionTrue {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// phaseIs is an eventually condition: the Task has reached phase.
func phaseIs(ns, name string, phase v1alpha1.TaskPhase) func(ctx context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		task, err := getTask(ctx, ns, name)
		if err != nil {
			return false, err.Error()
		}
		return task.Status.Phase == phase, fmt.Sprintf("phase %q, attempts %d, lastError %q", task.Status.Phase, task.Status.Attempts, task.Status.LastError)
	}
}

// jobKey is what makes an attempt: at most one Job may carry each.
type jobKey struct{ task, run, attempt string }

func keyOf(job *batchv1.Job) jobKey {
	l := job.Labels
	return jobKey{l[v1alpha1.LabelTask], l[v1alpha1.LabelRun], l[v1alpha1.LabelAttempt]}
}

// jobRecorder remembers every Job that ever existed in a namespace while it
// watched, so a duplicate created and deleted in between is seen too.
type jobRecorder struct {
	ns     string
	mu     sync.Mutex
	seen   map[types.UID]batchv1.Job
	cancel context.CancelFunc
	done   chan struct{}
}

func recordJobs(t *testing.T, ns string) *jobRecorder {
	ctx, cancel := context.WithCancel(context.Background())
	r := &jobRecorder{ns: ns, seen: map[types.UID]batchv1.Job{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ctx.Err() == nil {
			// A watch without a resourceVersion starts with an ADDED event
			// for every existing Job, so a re-watch misses nothing that
			// still exists.
			w, err := env.c.Watch(ctx, &batchv1.JobList{}, client.InNamespace(ns))
			if err != nil {
				time.Sleep(pollInterval)
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					continue
				}
				if job, ok := ev.Object.(*batchv1.Job); ok {
					r.add(job)
				}
			}
			w.Stop()
		}
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *jobRecorder) add(job *batchv1.Job) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[job.UID] = *job.DeepCopy()
}

func (r *jobRecorder) stop() {
	r.cancel()
	<-r.done
}

// all stops recording and returns every Job seen (plus a last listing).
func (r *jobRecorder) all(t testing.TB) []batchv1.Job {
	t.Helper()
	r.stop()
	var list batchv1.JobList
	if err := env.c.List(ctxFor(t, 10*time.Second), &list, client.InNamespace(r.ns)); err != nil {
		t.Fatalf("listing Jobs: %v", err)
	}
	for i := range list.Items {
		r.add(&list.Items[i])
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]batchv1.Job, 0, len(r.seen))
	for _, j := range r.seen {
		out = append(out, j)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// statusMonitor polls the Tasks of a namespace and records any step
// backwards: a run's attempts going down, or the history getting shorter.
type statusMonitor struct {
	mu       sync.Mutex
	last     map[string]v1alpha1.TaskStatus
	problems []string
	cancel   context.CancelFunc
	done     chan struct{}
}

func monitorStatus(t *testing.T, ns string) *statusMonitor {
	ctx, cancel := context.WithCancel(context.Background())
	m := &statusMonitor{last: map[string]v1alpha1.TaskStatus{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			var list v1alpha1.TaskList
			lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
			err := env.c.List(lctx, &list, client.InNamespace(ns))
			lcancel()
			if err == nil {
				m.observe(list.Items)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	t.Cleanup(m.stop)
	return m
}

func (m *statusMonitor) observe(tasks []v1alpha1.Task) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, task := range tasks {
		now := task.Status
		if old, ok := m.last[task.Name]; ok {
			if old.CurrentRun == now.CurrentRun && now.Attempts < old.Attempts {
				m.problems = append(m.problems, fmt.Sprintf("%s: attempts of run %q went from %d to %d", task.Name, now.CurrentRun, old.Attempts, now.Attempts))
			}
			if len(now.History) < len(old.History) {
				m.problems = append(m.problems, fmt.Sprintf("%s: history shrank from %d to %d runs", task.Name, len(old.History), len(now.History)))
			}
		}
		m.last[task.Name] = *now.DeepCopy()
	}
}

func (m *statusMonitor) stop() {
	m.cancel()
	<-m.done
}

// check stops the monitor and reports what it saw go backwards.
func (m *statusMonitor) check(t testing.TB) {
	t.Helper()
	m.stop()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range m.problems {
		t.Errorf("status went backwards: %s", p)
	}
}

// secs rounds a duration for the figures the tests log.
func secs(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}
