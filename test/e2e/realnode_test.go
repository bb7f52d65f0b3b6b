//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// What only a real kubelet shows: real exit codes, the kernel's OOM
// killer, a container whose Secret is missing. Each Task fails through
// what really happens in its container, and lastError must say so.
func TestRealFailuresReachLastError(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-real-fail")
	oom := testutil.Limits("memory", "16Mi")
	missingSecret := func(task *v1alpha1.Task) {
		task.Spec.Env = []v1alpha1.EnvVar{{Name: "PASSWORD", ValueFrom: &v1alpha1.EnvVarSource{SecretKeyRef: &v1alpha1.KeySelector{Name: "no-such-secret", Key: "password"}}}}
	}
	overLimitRange := testutil.Limits("cpu", "2")
	cases := []struct {
		name string
		opts []testutil.TaskOpt
		want []string // in lastError
	}{
		{"not-found", []testutil.TaskOpt{testutil.Shell("./migrate.sh --check")}, []string{"code 127", "not found"}},
		// dd's 64 MiB buffer is more than the 16 MiB limit allows: the
		// kernel kills it (137). containerd 1.6 adds the reason OOMKilled
		// only when its OOM event beats the exit event, so the reason is
		// logged, not required.
		{"oom", []testutil.TaskOpt{oom, testutil.Shell("dd if=/dev/zero of=/dev/null bs=64M count=1")}, []string{"code 137"}},
		// The missing Secret is named by the container's waiting reason
		// (CreateContainerConfigError) or, when the kubelet has not set it
		// yet on a busy machine, by its Warning event ("Error: secret ...
		// not found").
		{"no-secret", []testutil.TaskOpt{missingSecret, testutil.StartTimeout(startTimeoutOnABusyNode)}, []string{string(v1alpha1.AttemptStartTimeout), "no-such-secret"}},
		// The namespace's LimitRange allows at most 1 CPU per container:
		// a pod asking for 2 can never be created, so the attempt is
		// broken (StartTimeout with the LimitRange's words), not waiting
		// for capacity for ever.
		{"over-limitrange", []testutil.TaskOpt{overLimitRange, testutil.StartTimeout(startTimeoutOnABusyNode)}, []string{string(v1alpha1.AttemptStartTimeout), "no pod was created", "maximum cpu usage per Container is 1"}},
	}
	must(t, env.c.Create(ctxFor(t, 10*time.Second), &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "max-one-cpu"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer, Max: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}))
	for _, c := range cases {
		create(t, testutil.NewTask(ns, c.name, c.opts...))
	}
	for _, c := range cases {
		kubectlWait(t, ns, "condition=Failed", "task/"+c.name, 90*time.Second)
		task := mustGetTask(t, ns, c.name)
		for _, s := range c.want {
			if !strings.Contains(task.Status.LastError, s) {
				t.Errorf("Task %s: lastError %q does not contain %q", c.name, task.Status.LastError, s)
			}
		}
		t.Logf("Task %s: lastError %q", c.name, task.Status.LastError)
	}
}

// An http Task runs /task-runner from the release image (make image) in a
// real pod against a server on the node's bridge: a 2xx succeeds with the
// runner's summary in the history, a Secret-backed header reaches the
// server and is *** in the pod log, the status and the events; a header
// value the runner cannot send (a line break, from the Secret) is its exit
// code 2, NotRetryable after one attempt although maxRetry allows more.
func TestHTTPTaskRunsTheRunnerOfTheReleaseImage(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-http")
	const secret = "s3cr3t-token-e2e"
	srv := serveOnBridge(t)

	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"},
		StringData: map[string]string{"token": "Bearer " + secret, "broken": "line\nbreak"}})
	httpTask := func(name, key string, maxRetry int32) *v1alpha1.Task {
		task := testutil.NewTask(ns, name, testutil.Retries(maxRetry, 1, 1, 1))
		task.Spec.Type, task.Spec.Shell = v1alpha1.TaskTypeHTTP, ""
		task.Spec.URL = srv.url + "/deploy?task=" + name
		task.Spec.HTTP = &v1alpha1.HTTPSpec{
			Method: "POST",
			Body:   `{"service":"billing"}`,
			Headers: []v1alpha1.HTTPHeader{{Name: "Authorization", ValueFrom: &v1alpha1.HeaderValueSource{
				SecretKeyRef: v1alpha1.KeySelector{Name: "hook", Key: key}}}},
		}
		return task
	}
	create(t, httpTask("call", "token", 0))
	create(t, httpTask("broken", "broken", 2))

	kubectlWait(t, ns, "condition=Ready", "task/call", 90*time.Second)
	task := mustGetTask(t, ns, "call")
	if len(task.Status.History) != 1 || !strings.Contains(task.Status.History[0].Message, "200") {
		t.Errorf("history %+v, want one run whose message is the runner's summary with status 200", task.Status.History)
	}
	if got := srv.authorization("call"); got != "Bearer "+secret {
		t.Errorf("the server got Authorization %q, want the Secret's value", got)
	}
	logs := kubectlTask(t, 30*time.Second, "logs", "call", "-n", ns)
	if !strings.Contains(logs, "***") {
		t.Errorf("the runner's log does not show the masked header:\n%s", logs)
	}

	kubectlWait(t, ns, "condition=Failed", "task/broken", 90*time.Second)
	broken := mustGetTask(t, ns, "broken")
	expectCondition(t, broken, v1alpha1.ConditionFailed, metav1.ConditionTrue, string(v1alpha1.ReasonNotRetryable))
	if broken.Status.Attempts != 1 || !strings.Contains(broken.Status.LastError, "code 2") {
		t.Errorf("attempts %d, lastError %q; want 1 attempt ending with the runner's exit code 2", broken.Status.Attempts, broken.Status.LastError)
	}

	// The secret appears nowhere the operator or the runner write.
	everything := logs + kubectl(t, 20*time.Second, "get", "tasks", "-n", ns, "-o", "yaml") +
		kubectl(t, 20*time.Second, "get", "events", "-n", ns, "-o", "yaml")
	for _, name := range []string{"call", "broken"} {
		everything += kubectlTask(t, 30*time.Second, "logs", name, "-n", ns)
	}
	if strings.Contains(everything, secret) {
		t.Errorf("the Secret's value appears in a log, the status or an event")
	}
}

// An attempt its deadline ends keeps the last output it printed: at the
// deadline the operator reads the running pod's log, keeps it on the Job,
// and only then stops the attempt (a plain `sleep` ends at once when it is
// killed, so nothing would be left to read afterwards).
func TestAnAttemptKilledByItsDeadlineKeepsItsOutput(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-deadline")
	// 30 s: the deadline counts from the Job's start, and with the suite's
	// tests in parallel on a machine whose cores are busy the container
	// once had not started printing 10 s after the Job's creation.
	create(t, testutil.NewTask(ns, "slow", testutil.ActiveDeadline(30), testutil.Shell(`echo "step 1 of 2 done"; sleep 60; echo "never printed"`)))
	kubectlWait(t, ns, "condition=Failed", "task/slow", 120*time.Second)
	task := mustGetTask(t, ns, "slow")
	for _, s := range []string{string(v1alpha1.AttemptDeadlineExceeded), "step 1 of 2 done"} {
		if !strings.Contains(task.Status.LastError, s) {
			t.Errorf("lastError %q does not contain %q", task.Status.LastError, s)
		}
	}
	if strings.Contains(task.Status.LastError, "never printed") {
		t.Errorf("lastError %q has output the script never printed", task.Status.LastError)
	}
}

// The kubelet is killed (SIGKILL) while an attempt runs, and started again:
// the container lives on under its shim, the Task still ends Succeeded, with
// one Job and one attempt.
func TestKubeletKilledDuringAnAttempt(t *testing.T) {
	requireRealNode(t)
	ns := newNamespace(t, "e2e-kubelet")
	jobs := harness.RecordJobs(t, env.c, ns)
	create(t, testutil.NewTask(ns, "survivor", testutil.Shell(`echo started; sleep 6; echo finished`)))
	eventually(t, 60*time.Second, "the pod to run", func(ctx context.Context) (bool, string) {
		pods, err := harness.PodsOf(ctx, env.c, ns, "survivor")
		if err != nil {
			return false, err.Error()
		}
		return len(pods) == 1 && pods[0].Status.Phase == corev1.PodRunning, fmt.Sprintf("pods %v", harness.PodPhases(pods))
	})
	pid, _, err := env.cluster.ComponentPID("kubelet")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the kubelet to be gone", func(context.Context) (bool, string) {
		_, _, err := env.cluster.ComponentPID("kubelet")
		return err != nil, "still running"
	})
	t.Logf("killed the kubelet (pid %d) during the attempt", pid)
	if err := env.cluster.StartKubelet(context.Background()); err != nil {
		t.Fatal(err)
	}
	kubectlWait(t, ns, "condition=Ready", "task/survivor", 120*time.Second)
	task := mustGetTask(t, ns, "survivor")
	if task.Status.Attempts != 1 || task.Status.Phase != v1alpha1.PhaseSucceeded {
		t.Errorf("phase %q attempts %d; want Succeeded after 1 attempt", task.Status.Phase, task.Status.Attempts)
	}
	if all := jobs.All(t); len(all) != 1 {
		t.Errorf("%d Jobs were seen, want 1 (one attempt)", len(all))
	}
	if dups := jobs.Overlaps(); len(dups) > 0 {
		t.Errorf("two Jobs for one attempt: %v", dups)
	}
	if logs := kubectlTask(t, 30*time.Second, "logs", "survivor", "-n", ns); !strings.Contains(logs, "finished") {
		t.Errorf("kubectl task logs: %q, want the container's whole output", logs)
	}
}

// bridgeServer is an HTTP server on the real node's bridge address, which
// pods reach and nothing outside the machine does.
type bridgeServer struct {
	url  string
	mu   sync.Mutex
	auth map[string]string // task query parameter -> Authorization received
	// throttled holds, by task query parameter, when /throttle was called.
	throttled map[string][]time.Time
}

// calls is when /throttle was called for task.
func (s *bridgeServer) calls(task string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.throttled[task]...)
}

func (s *bridgeServer) authorization(task string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.auth[task]
}

// listenOnBridge listens on a free port of the real node's bridge
// address: pods reach it, nothing outside the machine does.
func listenOnBridge(t *testing.T) net.Listener {
	t.Helper()
	state, err := env.cluster.State()
	if err != nil {
		t.Fatal(err)
	}
	ip := state.BridgeIP
	if ip == "" {
		t.Fatal("the cluster has no BRIDGE_IP in cluster.json")
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func serveOnBridge(t *testing.T) *bridgeServer {
	t.Helper()
	l := listenOnBridge(t)
	s := &bridgeServer{url: "http://" + l.Addr().String(), auth: map[string]string{}, throttled: map[string][]time.Time{}}
	mux := http.NewServeMux()
	// /throttle answers 503 with Retry-After: 3 the first time for a task,
	// then 200.
	mux.HandleFunc("/throttle", func(w http.ResponseWriter, r *http.Request) {
		task := r.URL.Query().Get("task")
		s.mu.Lock()
		s.throttled[task] = append(s.throttled[task], time.Now())
		n := len(s.throttled[task])
		s.mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "3")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	})
	mux.HandleFunc("/deploy", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.mu.Lock()
		s.auth[r.URL.Query().Get("task")] = r.Header.Get("Authorization")
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"deployed":true,"echo":%s}`, strconv.Quote(r.Header.Get("Authorization")))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}
