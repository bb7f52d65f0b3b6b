//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/notify"
	"github.com/taskops/task-operator/internal/notify/sender"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// webhook is a notification receiver on the real node's bridge: pods reach
// it, nothing outside the machine does. /hook/<name> records what arrives;
// /down/<name> records it and answers 503.
type webhook struct {
	url string
	mu  sync.Mutex
	got map[string][]received
}

type received struct {
	body string
	auth string
}

func (w *webhook) of(name string) []received {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]received(nil), w.got[name]...)
}

func webhookOnBridge(t *testing.T) *webhook {
	t.Helper()
	l := listenOnBridge(t)
	w := &webhook{url: "http://" + l.Addr().String(), got: map[string][]received{}}
	record := func(r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		name := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
		w.mu.Lock()
		w.got[name] = append(w.got[name], received{body: string(b), auth: r.Header.Get("Authorization")})
		w.mu.Unlock()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/hook/", func(rw http.ResponseWriter, r *http.Request) { record(r); fmt.Fprint(rw, "ok") })
	mux.HandleFunc("/down/", func(rw http.ResponseWriter, r *http.Request) {
		record(r)
		http.Error(rw, "down for maintenance", http.StatusServiceUnavailable)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return w
}

// notified waits until the Task's newest run records its notification as
// ended and returns the Task.
func notified(t *testing.T, ns, name string, want v1alpha1.NotificationState) *v1alpha1.Task {
	t.Helper()
	var task *v1alpha1.Task
	eventually(t, 120*time.Second, "the notification of "+name+" to be "+string(want), func(ctx context.Context) (bool, string) {
		task = &v1alpha1.Task{}
		if err := env.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, task); err != nil {
			return false, err.Error()
		}
		if len(task.Status.History) == 0 {
			return false, "no run recorded"
		}
		h := task.Status.History[0]
		return h.Notification == want, fmt.Sprintf("run %s %s, notification %q", h.RunID, h.Result, h.Notification)
	})
	return task
}

// jobsNamed is the name of the notification Job of task.
func jobsNamed(t *testing.T, ns, task string) string {
	t.Helper()
	for _, j := range notificationJobsIn(t, ns) {
		if j.Labels[v1alpha1.LabelTask] == task {
			return j.Name
		}
	}
	t.Fatalf("no notification Job of %s", task)
	return ""
}

func notificationJobsIn(t *testing.T, ns string) []batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	must(t, env.c.List(ctxFor(t, 20*time.Second), &list, client.InNamespace(ns), client.HasLabels{v1alpha1.LabelNotification}))
	return list.Items
}

// Notifications on a real node: a failed run posts one JSON document with
// a Secret-backed Authorization header, a success posts one Slack message
// to a URL kept in a Secret, and a webhook that keeps answering 503 is
// tried 3 times, after which the notification is Failed and the Task's
// result stands. The secrets are *** wherever the operator or the sender
// write.
func TestNotificationsReachAWebhookOnTheBridge(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-notify")
	hook := webhookOnBridge(t)
	const token = "Bearer s3cr3t-notify-e2e-token"
	const slackPath = "/hook/slack-T0SECRETPATH0"
	create(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hooks"},
		StringData: map[string]string{"token": token, "slack": hook.url + slackPath}})
	secretRef := func(key string) *v1alpha1.HeaderValueSource {
		return &v1alpha1.HeaderValueSource{SecretKeyRef: v1alpha1.KeySelector{Name: "hooks", Key: key}}
	}

	fails := testutil.NewTask(ns, "fails", testutil.Shell(`echo "report failed"; exit 3`))
	fails.Spec.Notify = []v1alpha1.Notification{{On: []v1alpha1.NotifyOn{v1alpha1.NotifyOnFailed}, URL: hook.url + "/hook/fails",
		Headers: []v1alpha1.HTTPHeader{{Name: "Authorization", ValueFrom: secretRef("token")}}}}
	succeeds := testutil.NewTask(ns, "succeeds", testutil.Shell(`echo "report ready"`))
	succeeds.Spec.Notify = []v1alpha1.Notification{{On: []v1alpha1.NotifyOn{v1alpha1.NotifyOnSucceeded, v1alpha1.NotifyOnFailed},
		URLFrom: secretRef("slack"), Format: v1alpha1.NotifyFormatSlack}}
	down := testutil.NewTask(ns, "down", testutil.Shell(`exit 3`))
	down.Spec.Notify = []v1alpha1.Notification{{On: []v1alpha1.NotifyOn{v1alpha1.NotifyOnFailed}, URL: hook.url + "/down/down"}}
	for _, task := range []*v1alpha1.Task{fails, succeeds, down} {
		create(t, task)
	}

	// The failed run: one JSON document with the right fields.
	got := notified(t, ns, "fails", v1alpha1.NotificationSent)
	if got.Status.Phase != v1alpha1.PhaseFailed {
		t.Errorf("fails: phase %s", got.Status.Phase)
	}
	posts := hook.of("fails")
	if len(posts) != 1 {
		t.Fatalf("fails: %d requests, want exactly 1", len(posts))
	}
	var doc notify.Document
	must(t, json.Unmarshal([]byte(posts[0].body), &doc))
	if doc.Kind != notify.DocumentKind || doc.Event != v1alpha1.NotifyOnFailed || doc.Namespace != ns || doc.Task != "fails" ||
		doc.RunID != "0" || doc.Result != v1alpha1.RunResultFailed || doc.Reason != v1alpha1.ReasonRetriesExhausted ||
		doc.Attempts != 1 || doc.StartTime == "" || doc.CompletionTime == "" || !strings.Contains(doc.Message, "code 3") {
		t.Errorf("fails: document %+v", doc)
	}
	if posts[0].auth != token {
		t.Errorf("fails: Authorization arrived as %q, want the Secret's value", posts[0].auth)
	}

	// The success: one Slack message, to the URL from the Secret.
	notified(t, ns, "succeeds", v1alpha1.NotificationSent)
	slack := hook.of(strings.TrimPrefix(slackPath, "/hook/"))
	if len(slack) != 1 {
		t.Fatalf("succeeds: %d Slack messages, want exactly 1", len(slack))
	}
	var msg map[string]string
	must(t, json.Unmarshal([]byte(slack[0].body), &msg))
	if len(msg) != 1 || !strings.Contains(msg["text"], ns+"/succeeds: run 0 succeeded") {
		t.Errorf("succeeds: Slack body %s", slack[0].body)
	}

	// The webhook down: 3 tries, NotificationFailed, the result unchanged.
	got = notified(t, ns, "down", v1alpha1.NotificationFailed)
	// Each try shows in the sender's log, and each reached the webhook.
	downLog := kubectl(t, 30*time.Second, "logs", "job/"+jobsNamed(t, ns, "down"), "-n", ns)
	if tries, n := strings.Count(downLog, "attempt "), len(hook.of("down")); tries != sender.MaxAttempts || n != sender.MaxAttempts {
		t.Errorf("down: the sender logged %d tries and the webhook got %d requests, want %d of each:\n%s", tries, n, sender.MaxAttempts, downLog)
	}
	if got.Status.Phase != v1alpha1.PhaseFailed || got.Status.History[0].Result != v1alpha1.RunResultFailed ||
		got.Status.History[0].Reason != v1alpha1.ReasonRetriesExhausted {
		t.Errorf("down: the failed notification changed the Task: %s %+v", got.Status.Phase, got.Status.History[0])
	}
	events := kubectl(t, 20*time.Second, "get", "events", "-n", ns, "-o", "yaml")
	for _, want := range []string{string(v1alpha1.EventNotificationSent), string(v1alpha1.EventNotificationFailed)} {
		if !strings.Contains(events, "reason: "+want) {
			t.Errorf("no %s event", want)
		}
	}
	if n := len(notificationJobsIn(t, ns)); n != 3 {
		t.Errorf("%d notification Jobs, want one per run: 3", n)
	}

	// The secrets: nowhere in the status, the events, or any log.
	everything := events + kubectl(t, 20*time.Second, "get", "tasks,jobs", "-n", ns, "-o", "yaml")
	for _, j := range notificationJobsIn(t, ns) {
		logs := kubectl(t, 30*time.Second, "logs", "job/"+j.Name, "-n", ns)
		if j.Labels[v1alpha1.LabelTask] != "down" && !strings.Contains(logs, "***") {
			t.Errorf("the log of %s shows no masked value:\n%s", j.Name, logs)
		}
		everything += logs
	}
	for _, secret := range []string{"s3cr3t-notify-e2e-token", "T0SECRETPATH0"} {
		if strings.Contains(everything, secret) {
			t.Errorf("%q appears in a log, the status or an event", secret)
		}
	}
}

// The operator is killed (SIGKILL) after a run's attempt started and kept
// down until the run has ended: the restarted operator sends the run's
// notification, and there is exactly one notification Job and one request.
func TestOperatorKilledBetweenARunsEndAndItsNotification(t *testing.T) {
	requireRealNode(t)
	ns := newNamespace(t, "e2e-notify-kill")
	restartOperatorAfter(t)
	hook := webhookOnBridge(t)
	jobs := harness.RecordJobs(t, env.c, ns)
	task := testutil.NewTask(ns, "told-once", testutil.Shell(`sleep 2; echo "nightly failed"; exit 3`))
	task.Spec.Notify = []v1alpha1.Notification{{On: []v1alpha1.NotifyOn{v1alpha1.NotifyOnFailed}, URL: hook.url + "/hook/told-once"}}
	create(t, task)
	eventually(t, 60*time.Second, "the attempt's Job", func(ctx context.Context) (bool, string) {
		return len(jobs.All(t)) == 1, fmt.Sprintf("%d Jobs", len(jobs.All(t)))
	})
	if err := env.op.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	eventually(t, 90*time.Second, "the attempt's Job to fail while the operator is down", func(ctx context.Context) (bool, string) {
		for _, j := range jobs.All(t) {
			for _, c := range j.Status.Conditions {
				if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
					return true, ""
				}
			}
		}
		return false, "not failed yet"
	})
	if n := len(notificationJobsIn(t, ns)); n != 0 {
		t.Fatalf("%d notification Jobs while the operator was down", n)
	}
	if _, err := env.op.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("operator down %s, across the run's end", harness.Secs(time.Since(killed)))
	notified(t, ns, "told-once", v1alpha1.NotificationSent)
	// Passes after the notification was sent must not send it again.
	if err := env.op.Signal(syscall.SIGKILL, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := env.op.Start(); err != nil {
		t.Fatal(err)
	}
	kubectlWait(t, ns, "condition=Finished", "task/told-once", 30*time.Second)
	var noteJobs int
	for _, j := range jobs.All(t) {
		if j.Labels[v1alpha1.LabelNotification] != "" {
			noteJobs++
		}
	}
	if noteJobs != 1 || len(hook.of("told-once")) != 1 {
		t.Errorf("%d notification Jobs and %d requests, want exactly 1 of each", noteJobs, len(hook.of("told-once")))
	}
}

// A CI job that deletes its Task 1 s after `kubectl wait` saw it finish
// still delivers the notification, exactly once: the finalizer keeps the
// notification Job until it has sent, then lets the Task go (Deleted).
func TestATaskDeletedRightAfterItFinishedStillNotifiesOnce(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-notify-delete")
	hook := webhookOnBridge(t)
	task := testutil.NewTask(ns, "ci-step", testutil.Shell(`echo "step done"`))
	task.Spec.Notify = []v1alpha1.Notification{{On: []v1alpha1.NotifyOn{v1alpha1.NotifyOnSucceeded}, URL: hook.url + "/hook/ci-step"}}
	create(t, task)
	kubectlWait(t, ns, "condition=Finished", "task/ci-step", 90*time.Second)
	// The scenario itself, not a wait for a condition: the delete comes
	// 1 s after the run was seen finished.
	time.Sleep(time.Second)
	kubectl(t, 30*time.Second, "delete", "-n", ns, "task/ci-step", "--wait=false")
	gone := eventually(t, 3*time.Minute, "the deleted Task to be gone", func(ctx context.Context) (bool, string) {
		_, err := harness.GetTask(ctx, env.c, ns, "ci-step")
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		return false, fmt.Sprintf("%v", err)
	})
	if n := len(hook.of("ci-step")); n != 1 {
		t.Fatalf("the webhook got %d notifications of the deleted Task, want exactly 1", n)
	}
	events := kubectl(t, 20*time.Second, "get", "events", "-n", ns, "--field-selector", "reason="+string(v1alpha1.EventDeleted), "-o", "jsonpath={.items[*].message}")
	if !strings.Contains(events, "deleted") {
		t.Errorf("no Deleted event naming what was cleaned up: %q", events)
	}
	t.Logf("deleted %s after it finished; gone %s after the delete, with its notification sent once; Deleted: %s",
		harness.Secs(time.Second), harness.Secs(gone), events)
}
