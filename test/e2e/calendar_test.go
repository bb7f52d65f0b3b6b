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
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Timeout(d))
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %s", d, what)
		case <-time.After(time.Second):
		}
	}
}

// A backfill of the last three minutes of an every-minute schedule, asked
// for when the Task is created: exactly those three slots run, once each,
// each pod seeing its own slot in TASK_SCHEDULED_TIME.
func TestABackfillRunsTheSlotsOfARangeOnceEach(t *testing.T) {
	t.Parallel()
	requireRealNode(t)
	ns := newNamespace(t, "e2e-backfill")
	now := time.Now().UTC().Truncate(time.Minute)
	from, to := now.Add(-2*time.Minute), now
	task := testutil.NewTask(ns, "minutely", testutil.Schedule("* * * * *"),
		testutil.Annotation(v1alpha1.AnnotationBackfill, "e2e-1"),
		testutil.Annotation(v1alpha1.AnnotationBackfillRange, from.Format(time.RFC3339)+"/"+to.Format(time.RFC3339)))
	task.Spec.Results = []v1alpha1.ResultSpec{{Name: "slot"}}
	task.Spec.Shell = `printf '%s' "$TASK_SCHEDULED_TIME" >"$TASK_RESULTS_DIR/slot"`
	create(t, task)
	kubectlWait(t, ns, "jsonpath={.status.backfill.state}=Finished", "task/minutely", 150*time.Second)
	got := mustGetTask(t, ns, "minutely")
	if bf := got.Status.Backfill; bf.Total != 3 || bf.Finished != 3 {
		t.Errorf("status.backfill %+v, want 3 slots finished", bf)
	}
	seen := map[string]int{}
	for _, h := range got.Status.History {
		if h.ScheduledTime == nil || h.ScheduledTime.After(to) {
			continue // a regular slot after the range
		}
		seen[h.ScheduledTime.UTC().Format(time.RFC3339)]++
		if want := h.ScheduledTime.UTC().Format(time.RFC3339); h.Results["slot"] != want {
			t.Errorf("run %s saw TASK_SCHEDULED_TIME=%q, want %s", h.RunID, h.Results["slot"], want)
		}
	}
	for s := from; !s.After(to); s = s.Add(time.Minute) {
		if n := seen[s.Format(time.RFC3339)]; n != 1 {
			t.Errorf("slot %s ran %d times, want once", s.Format(time.RFC3339), n)
		}
	}
	if len(seen) != 3 {
		t.Errorf("slots of the range that ran: %v, want exactly 3", seen)
	}
}
