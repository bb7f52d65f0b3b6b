package workers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
)

const opNS = "task-operator-system"

func secret(cluster, version string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: opNS, Name: "reader-" + cluster, ResourceVersion: version,
		Labels: map[string]string{v1alpha1.LabelWorkerCluster: cluster}}, Data: map[string][]byte{KubeconfigKey: []byte("x")}}
}

func taskPod(ns, job, name string, code *int32, msg string) *corev1.Pod {
	st := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	if code != nil {
		st = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: *code, Message: msg}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			batchv1.JobNameLabel: job, v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, "other": "dropped"},
			Annotations: map[string]string{batchv1.JobCompletionIndexAnnotation: "0", "big": strings.Repeat("x", 1000)}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: jobs.ContainerName, Image: "busybox"}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{
			{Name: "sidecar", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 9}}},
			{Name: jobs.ContainerName, Image: "busybox", State: st}}},
	}
}

// readers are Readers whose kubeconfig Secrets are objs and whose workers
// are fake clientsets, one per cluster, made on first use.
func readers(t *testing.T, objs ...*corev1.Secret) (*Readers, map[string]*k8sfake.Clientset) {
	t.Helper()
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, o := range objs {
		b = b.WithObjects(o)
	}
	r := New(b.Build(), opNS)
	// Each Follow is a minute after the one before: the Secrets are read
	// every time.
	now := time.Now()
	r.now = func() time.Time { now = now.Add(time.Minute); return now }
	fakes := map[string]*k8sfake.Clientset{}
	r.newClient = func([]byte) (kubernetes.Interface, error) {
		c := k8sfake.NewClientset()
		fakes[fmt.Sprint(len(fakes))] = c
		return c, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = r.Start(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		started := r.ctx != nil
		r.mu.Unlock()
		if started {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Readers did not start")
		}
		time.Sleep(time.Millisecond)
	}
	return r, fakes
}

func TestWithoutASecretTheOperatorReadsNothingOnTheWorker(t *testing.T) {
	r, fakes := readers(t, secret("worker-1", "1"))
	if err := r.Follow(context.Background(), "team"); err != nil {
		t.Fatalf("Follow: %v", err)
	}
	if _, err := r.Ended("worker-2", "team", "job"); !errors.Is(err, ErrNoKubeconfig) {
		t.Fatalf("Ended: %v; want ErrNoKubeconfig", err)
	}
	if len(fakes) != 1 {
		t.Fatalf("%d worker clients made; want worker-1's only", len(fakes))
	}
	off := New(nil, "")
	if err := off.Follow(context.Background(), "team"); err != nil {
		t.Fatalf("Follow with no namespace for Secrets: %v; want nothing done", err)
	}
	if _, err := off.Ended("worker-1", "team", "job"); !errors.Is(err, ErrNoKubeconfig) {
		t.Fatalf("Ended with no namespace for Secrets: %v; want ErrNoKubeconfig", err)
	}
}

func TestTheEndedPodsOfAnAttemptAreKeptAfterTheWorkerDeletesThem(t *testing.T) {
	r, fakes := readers(t, secret("worker-1", "1"))
	ctx := context.Background()
	// The fake clientset's watch misses what happens between its list and
	// its watch: the pods are there before the watch begins, as for an
	// attempt that ends before the operator follows its namespace.
	w := k8sfake.NewClientset(
		taskPod("team", "t-0-1", "t-0-1-0-abc", new(int32(3)), "rows 4"),
		taskPod("team", "t-0-2", "t-0-2-0-def", nil, ""))
	r.newClient = func([]byte) (kubernetes.Interface, error) { fakes["0"] = w; return w, nil }
	if err := r.Follow(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	if err := r.Follow(ctx, "team"); err != nil { // the same Secret: the same client and watch
		t.Fatal(err)
	}
	if len(fakes) != 1 {
		t.Fatalf("%d clients; want 1", len(fakes))
	}
	var got []corev1.Pod
	for deadline := time.Now().Add(5 * time.Second); len(got) == 0; time.Sleep(5 * time.Millisecond) {
		if got, _ = r.Ended("worker-1", "team", "t-0-1"); time.Now().After(deadline) {
			t.Fatal("the ended pod was not seen")
		}
	}
	if err := w.CoreV1().Pods("team").Delete(ctx, "t-0-1-0-abc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := r.Ended("worker-1", "team", "t-0-1")
	if err != nil || len(got) != 1 {
		t.Fatalf("after the delete: %d pods, %v; want the ended one", len(got), err)
	}
	p := got[0]
	cs := p.Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.ExitCode != 3 || cs[0].State.Terminated.Message != "rows 4" {
		t.Fatalf("kept container statuses %+v; want the task container's, exit 3, its message", cs)
	}
	if p.Labels["other"] != "" || p.Annotations["big"] != "" || p.Annotations[batchv1.JobCompletionIndexAnnotation] != "0" || len(p.Spec.Containers) != 0 {
		t.Fatalf("kept pod %+v; want only what the status reads", p.ObjectMeta)
	}
	if running, err := r.Ended("worker-1", "team", "t-0-2"); len(running) != 0 || err != nil {
		t.Fatalf("a running attempt: %d pods, %v; want none, no error", len(running), err)
	}
}

func TestANewSecretVersionMakesANewClient(t *testing.T) {
	s := secret("worker-1", "1")
	r, fakes := readers(t, s)
	ctx := context.Background()
	if err := r.Follow(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	if err := r.Follow(ctx, "team"); err != nil || len(fakes) != 1 {
		t.Fatalf("the same Secret: %d clients, %v; want 1", len(fakes), err)
	}
	fresh := &corev1.Secret{}
	if err := r.secrets.Get(ctx, client.ObjectKeyFromObject(s), fresh); err != nil {
		t.Fatal(err)
	}
	fresh.Data[KubeconfigKey] = []byte("y")
	if err := r.secrets.(client.Client).Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if err := r.Follow(ctx, "team"); err != nil || len(fakes) != 2 {
		t.Fatalf("a changed Secret: %d clients, %v; want a second one", len(fakes), err)
	}
	if err := r.secrets.(client.Client).Delete(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if err := r.Follow(ctx, "team"); err != nil {
		t.Fatalf("the Secret deleted: %v", err)
	}
	if _, err := r.Ended("worker-1", "team", "x"); !errors.Is(err, ErrNoKubeconfig) {
		t.Fatalf("Ended after the Secret went: %v; want ErrNoKubeconfig", err)
	}
}

func TestEndedPodsKeepsTheNewestAttempts(t *testing.T) {
	e := newEndedPods(2)
	for i := range 3 {
		e.add(taskPod("team", fmt.Sprintf("job-%d", i), "p", new(int32(0)), ""))
	}
	if got := e.get("team", "job-0"); len(got) != 0 {
		t.Fatalf("the oldest attempt's pods are still kept: %d", len(got))
	}
	for _, j := range []string{"job-1", "job-2"} {
		if got := e.get("team", j); len(got) != 1 {
			t.Fatalf("%s: %d pods; want 1", j, len(got))
		}
	}
}

func TestAKubeconfigThatReadsFilesOrRunsCommandsIsRefused(t *testing.T) {
	const server = "https://127.0.0.1:6443"
	kubeconfig := func(user string) []byte {
		return []byte(`apiVersion: v1
kind: Config
clusters: [{name: w, cluster: {server: "` + server + `", certificate-authority-data: ""}}]
users: [{name: u, user: ` + user + `}]
contexts: [{name: c, context: {cluster: w, user: u}}]
current-context: c
`)
	}
	tests := []struct {
		name, user, want string
	}{
		{"an inline token", `{token: abc}`, ""},
		{"an exec plugin", `{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh}}`, "exec plugins are not allowed"},
		{"a token file", `{tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}`, "file paths are not allowed"},
		{"a client certificate file", `{client-certificate: /etc/cert.pem, client-key: /etc/key.pem}`, "file paths are not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := clientFor(kubeconfig(tt.user))
			if tt.want == "" && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("error %v; want %q", err, tt.want)
			}
		})
	}
	if _, err := clientFor(nil); err == nil {
		t.Fatal("an empty kubeconfig was taken")
	}
}

func TestAWatchTheWorkerForbidsGivesUpSaysWhyAndStartsAgainOnTheNextFollow(t *testing.T) {
	r, _ := readers(t, secret("worker-1", "1"))
	w := k8sfake.NewClientset()
	var lists atomic.Int32
	w.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "", errors.New("no RoleBinding"))
	})
	r.newClient = func([]byte) (kubernetes.Interface, error) { return w, nil }
	ctx := context.Background()
	if err := r.Follow(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	st := r.workers["worker-1"].watched["team"]
	r.mu.Unlock()
	select {
	case <-st.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the forbidden watch did not give up")
	}
	if _, err := r.Ended("worker-1", "team", "job"); !apierrors.IsForbidden(err) {
		t.Fatalf("Ended: %v; want the worker's Forbidden", err)
	}
	before := lists.Load()
	if err := r.Follow(ctx, "team"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); lists.Load() == before; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the next Follow did not watch again")
		}
	}
}
