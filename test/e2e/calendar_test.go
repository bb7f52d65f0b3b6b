//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/testutil"
)

// A schedule whose date is in its holiday ConfigMap starts nothing; once
// the line is removed the next slot runs, on the real node.
func TestASkipDateFromAConfigMapHoldsTheScheduleUntilTheLineGoes(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-calendar")
	now := time.Now().UTC()
	// Today and tomorrow, so a run that crosses midnight UTC holds too.
	dates := now.Format("2006-01-02") + "\n" + now.AddDate(0, 0, 1).Format("2006-01-02") + "\n"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holidays"}, Data: map[string]string{"list": "# test\n" + dates}}
	create(t, cm)
	task := testutil.NewTask(ns, "every20s", testutil.Schedule("@every 20s"))
	task.Spec.SkipDatesFrom = &v1alpha1.ConfigMapKeyRef{Name: "holidays", Key: "list"}
	create(t, task)

	skipped := func() int {
		var list eventsv1.EventList
		must(t, env.c.List(ctxFor(t, 10*time.Second), &list, client.InNamespace(ns)))
		n := 0
		for _, e := range list.Items {
			if e.Regarding.Name == "every20s" && e.Reason == string(v1alpha1.EventSlotSkipped) && strings.Contains(e.Note, "SkipDate") {
				n++
			}
		}
		return n
	}
	pollUntil(t, 90*time.Second, "two slots skipped for SkipDate", func() bool { return skipped() >= 2 })
	if n := len(jobsOfTask(t, ns, "every20s")); n != 0 {
		t.Fatalf("%d Jobs while the date is a skip date", n)
	}

	cm.Data["list"] = "# test\n"
	must(t, env.c.Update(ctxFor(t, 10*time.Second), cm))
	pollUntil(t, 60*time.Second, "a slot's Job once the line is gone", func() bool { return len(jobsOfTask(t, ns, "every20s")) > 0 })
	kubectlWait(t, ns, "jsonpath={.status.lastSuccessfulTime}", "task/every20s", 90*time.Second)
}

// pollUntil polls ok every second until it holds or the deadline passes.
func pollUntil(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %s", d, what)
		case <-time.After(time.Second):
		}
	}
}
