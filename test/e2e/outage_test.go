//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

// A policy webhook restarts for 20 s (failurePolicy Fail, so the API
// server refuses every Job it should see) just as a run fails on the real
// node: the run's result is recorded at once, its notification waits
// (Pending, no Job, nothing sent), and once the webhook is back the team
// hears of it: one Job, one request.
func TestANotificationHeldBackByAWebhookOutageReachesItsWebhookOnceItEnds(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-outage")
	hook := webhookOnBridge(t)
	endOutage := testutil.WebhookOutage(t, env.c, ns, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: v1alpha1.LabelNotification, Operator: metav1.LabelSelectorOpExists},
	}})
	task := testutil.NewTask(ns, "nightly", testutil.Shell(`echo "the load failed"; exit 3`))
	task.Spec.Notify = []v1alpha1.Notification{{On: []v1alpha1.NotifyOn{v1alpha1.NotifyOnFailed}, URL: hook.url + "/hook/nightly"}}
	create(t, task)

	state := func(ctx context.Context) (*v1alpha1.Task, string) {
		got := &v1alpha1.Task{}
		if err := env.c.Get(ctx, client.ObjectKeyFromObject(task), got); err != nil {
			return nil, err.Error()
		}
		if len(got.Status.History) == 0 {
			return got, "no run recorded"
		}
		h := got.Status.History[0]
		return got, fmt.Sprintf("phase %s, notification %q, its Job %q, %d notification Jobs, %d requests",
			got.Status.Phase, h.Notification, h.NotificationJob, len(notificationJobsIn(t, ns)), len(hook.of("nightly")))
	}
	eventually(t, 120*time.Second, "the run's end recorded during the outage", func(ctx context.Context) (bool, string) {
		got, detail := state(ctx)
		return got != nil && got.Status.Phase == v1alpha1.PhaseFailed && len(got.Status.History) > 0 &&
			got.Status.History[0].Notification == v1alpha1.NotificationPending, detail
	})

	// The webhook's 20 s restart: the notification stays due, nothing is
	// sent and nothing fails meanwhile.
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(time.Second) { // an observation window, polled
		got, detail := state(context.Background())
		if got == nil || got.Status.History[0].Notification != v1alpha1.NotificationPending || len(notificationJobsIn(t, ns)) != 0 || len(hook.of("nightly")) != 0 {
			t.Fatalf("during the outage: %s; want Pending, no Job, nothing sent", detail)
		}
	}

	endOutage()
	notified(t, ns, "nightly", v1alpha1.NotificationSent)
	if n, posts := len(notificationJobsIn(t, ns)), len(hook.of("nightly")); n != 1 || posts != 1 {
		t.Fatalf("%d notification Jobs and %d requests after the outage, want 1 and 1", n, posts)
	}
}
