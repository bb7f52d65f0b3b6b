package cli

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
)

func pod(ns, name, job, index string, containers ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{}},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
		},
	}
	if job != "" {
		p.Labels[batchv1.JobNameLabel] = job
	}
	if index != "" {
		p.Labels[batchv1.JobCompletionIndexAnnotation] = index
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "busybox"})
	}
	return p
}

// TestLogsFindsPodsOfNewestAttempt checks the lookup against the API
// server: status.lastJobName, then the pods labelled with that Job's name,
// by completion index. envtest runs no kubelet, so pods/log cannot be
// served there; streaming is tested with a fake clientset below.
func TestLogsFindsPodsOfNewestAttempt(t *testing.T) {
	ns, key, _ := newShellTask(t, "wide", 1)

	// No Job yet: a clear error.
	code, _, stderr := runCLI(t, "-n", ns, "logs", "wide")
	if code != ExitError {
		t.Fatalf("exit code %d, want 3", code)
	}
	assertContains(t, "stderr", stderr, "task/wide has no Job yet (phase: not yet processed by the operator)")

	setStatus(t, key, func(task *v1alpha1.Task) {
		inProgress(task, v1alpha1.PhaseRunning, 2)
		task.Status.LastJobName = "wide-abcde-0-2"
	})
	code, _, stderr = runCLI(t, "-n", ns, "logs", "wide")
	if code != ExitError {
		t.Fatalf("exit code %d, want 3", code)
	}
	assertContains(t, "stderr", stderr, "no pods found for job wide-abcde-0-2 of task/wide")

	for _, p := range []*corev1.Pod{
		pod(ns, "wide-abcde-0-2-1-zzzzz", "wide-abcde-0-2", "1", "task"),
		pod(ns, "wide-abcde-0-2-0-yyyyy", "wide-abcde-0-2", "0", "task"),
		pod(ns, "wide-abcde-0-1-0-xxxxx", "wide-abcde-0-1", "0", "task"), // the previous attempt
		pod(ns, "unrelated", "", "", "task"),
	} {
		if err := k8s.Create(suiteCtx, p); err != nil {
			t.Fatal(err)
		}
	}
	pods, job, err := podsOfNewestAttempt(suiteCtx, kube, getTask(t, key))
	if err != nil {
		t.Fatal(err)
	}
	if job != "wide-abcde-0-2" {
		t.Errorf("job %q", job)
	}
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	if got := strings.Join(names, ","); got != "wide-abcde-0-2-0-yyyyy,wide-abcde-0-2-1-zzzzz" {
		t.Errorf("pods %s", got)
	}

	// Through the command: envtest runs no kubelet and schedules nothing,
	// and the API server serves an empty log for a pod without a node. The
	// command says the pods have not started.
	code, stdout, stderr := runCLI(t, "-n", ns, "logs", "wide")
	if code != ExitOK || stdout != "" {
		t.Fatalf("exit code %d, want 0\nstdout:\n%q\nstderr:\n%s", code, stdout, stderr)
	}
	assertContains(t, "stderr", stderr,
		"note: pod/wide-abcde-0-2-0-yyyyy is Pending; its log may be empty",
		"note: pod/wide-abcde-0-2-1-zzzzz is Pending; its log may be empty")
}

// fakeLogs serves "<container> line 1\n<container> line 2" for every
// container, and an error for a container named "broken".
func fakeLogs(pods ...runtime.Object) *fake.Clientset {
	cs := fake.NewClientset(pods...)
	cs.PrependReactor("get", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetSubresource() != "log" {
			return false, nil, nil
		}
		opts := action.(k8stesting.GenericAction).GetValue().(*corev1.PodLogOptions)
		if opts.Container == "broken" {
			return true, nil, errors.New("container is waiting to start")
		}
		return true, &runtime.Unknown{Raw: []byte(opts.Container + " line 1\n" + opts.Container + " line 2")}, nil
	})
	return cs
}

func TestStreamLogs(t *testing.T) {
	one := pod("ns", "job-0-aaaaa", "job", "0", "task")
	two := pod("ns", "job-1-bbbbb", "job", "1", "task")
	multi := pod("ns", "job-0-ccccc", "job", "0", "task", "sidecar")
	multi.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	broken := pod("ns", "job-0-ddddd", "job", "0", "broken")
	broken.Status.Phase = corev1.PodPending
	broken.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "broken",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}

	cases := []struct {
		name       string
		pods       []*corev1.Pod
		opts       logsOptions
		wantOut    []string
		wantErr    string
		sortOutput bool
	}{
		{name: "one pod: no prefix", pods: []*corev1.Pod{one},
			wantOut: []string{"task line 1", "task line 2"}},
		{name: "several pods: pod prefix", pods: []*corev1.Pod{one, two},
			wantOut: []string{"[job-0-aaaaa] task line 1", "[job-0-aaaaa] task line 2", "[job-1-bbbbb] task line 1", "[job-1-bbbbb] task line 2"}},
		{name: "first container only", pods: []*corev1.Pod{multi},
			wantOut: []string{"task line 1", "task line 2"}},
		{name: "all containers: pod/container prefix", pods: []*corev1.Pod{multi}, opts: logsOptions{allContainers: true},
			wantOut: []string{"[job-0-ccccc/init] init line 1", "[job-0-ccccc/init] init line 2",
				"[job-0-ccccc/task] task line 1", "[job-0-ccccc/task] task line 2",
				"[job-0-ccccc/sidecar] sidecar line 1", "[job-0-ccccc/sidecar] sidecar line 2"}},
		{name: "follow several pods at once", pods: []*corev1.Pod{one, two}, opts: logsOptions{follow: true}, sortOutput: true,
			wantOut: []string{"[job-0-aaaaa] task line 1", "[job-0-aaaaa] task line 2", "[job-1-bbbbb] task line 1", "[job-1-bbbbb] task line 2"}},
		{name: "a failing container is reported, the others printed", pods: []*corev1.Pod{broken, two},
			wantOut: []string{"[job-1-bbbbb] task line 1", "[job-1-bbbbb] task line 2"},
			wantErr: "container is waiting to start"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var objs []runtime.Object
			var pods []corev1.Pod
			for _, p := range tc.pods {
				objs = append(objs, p)
				pods = append(pods, *p)
			}
			var stdout, stderr bytes.Buffer
			err := streamLogs(context.Background(), fakeLogs(objs...), pods, tc.opts, &stdout, &stderr, "job")
			lines := strings.Split(strings.TrimRight(stdout.String(), "\n"), "\n")
			if tc.sortOutput {
				sort.Strings(lines)
			}
			if got, want := strings.Join(lines, "\n"), strings.Join(tc.wantOut, "\n"); got != want {
				t.Errorf("stdout:\n%s\nwant:\n%s", got, want)
			}
			if tc.wantErr == "" {
				if err != nil || stderr.Len() > 0 {
					t.Errorf("err %v, stderr %q", err, stderr.String())
				}
				return
			}
			var ee *exitError
			if !errors.As(err, &ee) || ee.code != ExitError {
				t.Errorf("err %v, want exit code 3", err)
			}
			assertContains(t, "stderr", stderr.String(), "error: pod/job-0-ddddd container broken: ", tc.wantErr,
				"note: pod/job-0-ddddd is Pending (broken: ImagePullBackOff); its log may be empty")
		})
	}
}

func TestFindPodsFallsBackToLegacyLabel(t *testing.T) {
	legacy := pod("ns", "old-0-aaaaa", "", "", "task")
	legacy.Labels[legacyJobNameLabel] = "old"
	pods, err := findPods(context.Background(), fake.NewClientset(legacy), "ns", "old")
	if err != nil || len(pods) != 1 || pods[0].Name != "old-0-aaaaa" {
		t.Fatalf("pods %v, err %v", pods, err)
	}
}
