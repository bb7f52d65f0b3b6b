//go:build reliability

package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/testutil"
	"github.com/taskops/task-operator/test/harness"
)

// patchTask applies a JSON merge patch to a Task.
func patchTask(t *testing.T, ns, name string, patch map[string]any) *v1alpha1.Task {
	t.Helper()
	task := &v1alpha1.Task{}
	task.Namespace, task.Name = ns, name
	if err := s.c.Patch(ctxFor(t, 10*time.Second), task, client.RawPatch(types.MergePatchType, mustJSON(patch))); err != nil {
		t.Fatalf("patching Task %s: %v", name, err)
	}
	return task
}

func templateJSON(j *batchv1.Job) string {
	b, _ := json.Marshal(j.Spec.Template)
	return string(b)
}

func shellOf(j *batchv1.Job) string {
	return strings.Join(j.Spec.Template.Spec.Containers[0].Command, " ")
}

// taskEvents are the events about a Task, as "Reason: note".
func taskEvents(ctx context.Context, ns, name string) []string {
	var list corev1.EventList
	_ = s.c.List(ctx, &list, client.InNamespace(ns))
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Task" && e.InvolvedObject.Name == name {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out
}

// Scenario 5, spec and schedule edits during a run: an edit never starts a
// run by itself (no retroactive slot either), the running Job is left
// alone (never updated: its template is immutable, and no "field is
// immutable" error appears in the operator log or the events), and the next
// attempt or run uses the new spec.
func TestS05SpecEdits(t *testing.T) {
	slowScenario(t)
	op := s.startOperator(t, "op", false)
	ns := s.newNamespace(t, "rel-edits", false)
	rec := harness.RecordJobs(t, s.c, ns)
	mon := harness.MonitorStatus(t, s.c, ns)

	t.Run("one-shot", func(t *testing.T) {
		create(t, testutil.NewTask(ns, "oneshot", testutil.Retries(2, 2, 2, 1), func(task *v1alpha1.Task) { task.Spec.Shell = "echo v1" },
			testutil.PodAnnotations(harness.SimExitCode, "1", harness.SimDuration, "10", harness.SimMessage, "spec v1")))
		create(t, testutil.NewTask(ns, "finished"))
		var first batchv1.Job
		harness.Eventually(t, time.Minute, "attempt 1 to run", note(op), func(ctx context.Context) (bool, string) {
			js, err := harness.JobsOf(ctx, s.c, ns, "oneshot")
			if err != nil || len(js) != 1 || js[0].Status.Active == 0 {
				return false, fmt.Sprintf("%d Jobs (%v)", len(js), err)
			}
			first = js[0]
			return true, ""
		})
		harness.Eventually(t, time.Minute, "the other Task to succeed", note(op), func(ctx context.Context) (bool, string) {
			task, err := harness.GetTask(ctx, s.c, ns, "finished")
			return err == nil && task.Status.Phase == v1alpha1.PhaseSucceeded, fmt.Sprint(err)
		})
		before := templateJSON(&first)
		edited := time.Now()
		patchTask(t, ns, "oneshot", map[string]any{"spec": map[string]any{"shell": "echo v2",
			"podMetadata": map[string]any{"annotations": map[string]any{harness.SimExitCode: "0", harness.SimDuration: "1", harness.SimMessage: "spec v2"}}}})
		patchTask(t, ns, "finished", map[string]any{"spec": map[string]any{"shell": "echo edited after the end"}})
		// No run or attempt from the edits themselves.
		time.Sleep(4 * time.Second)
		ctx := ctxFor(t, 20*time.Second)
		js, _ := harness.JobsOf(ctx, s.c, ns, "oneshot")
		fin, _ := harness.JobsOf(ctx, s.c, ns, "finished")
		if len(js) != 1 || len(fin) != 1 {
			t.Errorf("4 s after the edits: %d Jobs for the running Task (want 1), %d for the finished one (want 1): an edit started something", len(js), len(fin))
		}
		cur := &batchv1.Job{}
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(&first), cur); err != nil {
			t.Fatal(err)
		}
		if templateJSON(cur) != before || cur.Generation != first.Generation || cur.Annotations[v1alpha1.AnnotationStopReason] != "" || (cur.Spec.Suspend != nil && *cur.Spec.Suspend) {
			t.Errorf("the running Job %s was touched by the edit: generation %d -> %d, stop reason %q, suspend %v, template changed %v",
				cur.Name, first.Generation, cur.Generation, cur.Annotations[v1alpha1.AnnotationStopReason], cur.Spec.Suspend, templateJSON(cur) != before)
		}
		harness.Eventually(t, 2*time.Minute, "the edited Task to finish", note(op), func(ctx context.Context) (bool, string) {
			task, err := harness.GetTask(ctx, s.c, ns, "oneshot")
			if err != nil {
				return false, err.Error()
			}
			return finalPhase(task.Status.Phase), fmt.Sprintf("%s attempts %d", task.Status.Phase, task.Status.Attempts)
		})
		task, _ := harness.GetTask(ctx, s.c, ns, "oneshot")
		js, _ = harness.JobsOf(ctx, s.c, ns, "oneshot")
		if task.Status.Phase != v1alpha1.PhaseSucceeded || task.Status.Attempts != 2 || len(js) != 2 {
			t.Fatalf("phase %s attempts %d with %d Jobs; want Succeeded on attempt 2 (attempt 1 ran the old spec to its failure, attempt 2 the new one)", task.Status.Phase, task.Status.Attempts, len(js))
		}
		a1, a2 := js[0], js[1]
		if !strings.Contains(shellOf(&a1), "echo v1") || a1.Spec.Template.Annotations[harness.SimMessage] != "spec v1" {
			t.Errorf("attempt 1 (%s) runs %q with message %q, want the old spec", a1.Name, shellOf(&a1), a1.Spec.Template.Annotations[harness.SimMessage])
		}
		if !strings.Contains(shellOf(&a2), "echo v2") || a2.Spec.Template.Annotations[harness.SimMessage] != "spec v2" || a2.Annotations[v1alpha1.AnnotationGeneration] != "2" {
			t.Errorf("attempt 2 (%s) runs %q with message %q from generation %s, want the new spec (generation 2)",
				a2.Name, shellOf(&a2), a2.Spec.Template.Annotations[harness.SimMessage], a2.Annotations[v1alpha1.AnnotationGeneration])
		}
		for _, e := range taskEvents(ctx, ns, "oneshot") {
			if strings.Contains(e, "immutable") {
				t.Errorf("event: %s", e)
			}
		}
		figure(t, "one-shot Task edited (command and pod annotations) while attempt 1 ran: 0 Jobs from the edit in 4 s (nor for an edited finished Task), the running Job untouched (generation %d, template unchanged), attempt 2 ran the new spec (%q, generation %s); Succeeded %s after the edit",
			cur.Generation, shellOf(&a2), a2.Annotations[v1alpha1.AnnotationGeneration], harness.Secs(time.Since(edited)))
	})

	t.Run("cron schedule", func(t *testing.T) {
		// @every 20 s, runs of 6 s. Once the first run is going and 8 s of
		// its slot L have passed, the schedule becomes @every 7 s: its slot
		// L+7 is already past (it must not start: no retroactive run), the
		// running Job is left alone, and slot L+14 runs the new spec.
		create(t, testutil.NewTask(ns, "cron", testutil.Schedule("@every 20s"), testutil.PodAnnotations(harness.SimDuration, "6", harness.SimMessage, "schedule v1")))
		var slot time.Time
		var running batchv1.Job
		harness.Eventually(t, 90*time.Second, "the cron Task's first run", note(op), func(ctx context.Context) (bool, string) {
			js, err := harness.JobsOf(ctx, s.c, ns, "cron")
			if err != nil || len(js) == 0 {
				return false, fmt.Sprintf("no Job yet (%v)", err)
			}
			at, ok := runs.SlotOf(js[0].Labels[v1alpha1.LabelRun])
			if !ok {
				return false, "run id " + js[0].Labels[v1alpha1.LabelRun]
			}
			slot, running = at, js[0]
			return true, ""
		})
		if wait := time.Until(slot.Add(8500 * time.Millisecond)); wait > 0 {
			time.Sleep(wait)
		}
		if time.Since(slot) > 13*time.Second {
			t.Fatalf("the first run's Job appeared %s after its slot: too late to edit between the new schedule's slots", harness.Secs(time.Since(slot)))
		}
		before := templateJSON(&running)
		edited := time.Now()
		patchTask(t, ns, "cron", map[string]any{"spec": map[string]any{"schedule": "@every 7s",
			"podMetadata": map[string]any{"annotations": map[string]any{harness.SimMessage: "schedule v2"}}}})
		retro := runs.ScheduledID(slot.Add(7 * time.Second))
		next := runs.ScheduledID(slot.Add(14 * time.Second))
		var nextJob batchv1.Job
		harness.Eventually(t, 40*time.Second, "slot L+14's run", note(op), func(ctx context.Context) (bool, string) {
			js, err := harness.JobsOf(ctx, s.c, ns, "cron")
			if err != nil {
				return false, err.Error()
			}
			var runs []string
			for _, j := range js {
				runs = append(runs, j.Labels[v1alpha1.LabelRun])
				if j.Labels[v1alpha1.LabelRun] == next {
					nextJob = j
					return true, ""
				}
			}
			return false, "runs " + strings.Join(runs, " ")
		})
		ctx := ctxFor(t, 20*time.Second)
		for _, j := range rec.All(t) {
			if j.Labels[v1alpha1.LabelTask] == "cron" && j.Labels[v1alpha1.LabelRun] == retro {
				t.Errorf("Job %s ran slot %s, which fell due before the schedule edit was seen: a retroactive run", j.Name, retro)
			}
		}
		cur := &batchv1.Job{}
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(&running), cur); err != nil {
			t.Fatal(err)
		}
		if templateJSON(cur) != before || cur.Generation != running.Generation || cur.Annotations[v1alpha1.AnnotationStopReason] != "" {
			t.Errorf("the running Job %s was touched by the schedule edit", cur.Name)
		}
		if m := nextJob.Spec.Template.Annotations[harness.SimMessage]; m != "schedule v2" {
			t.Errorf("the run after the edit (%s) has message %q, want the new spec", nextJob.Name, m)
		}
		skipped := false
		for _, e := range taskEvents(ctx, ns, "cron") {
			if strings.Contains(e, "immutable") {
				t.Errorf("event: %s", e)
			}
			if strings.Contains(e, "skipped") && strings.Contains(e, "spec edit") {
				skipped = true
			}
		}
		figure(t, "cron Task's schedule edited (@every 20s -> @every 7s) %s into a run: slot L+7 (already past) not run%s, the running Job untouched, slot L+14 ran the new spec %s after its slot",
			harness.Secs(edited.Sub(slot)), map[bool]string{true: " (SlotSkipped event: fell due before the edit was seen)", false: ""}[skipped],
			harness.Secs(nextJob.CreationTimestamp.Sub(slot.Add(14*time.Second))))
	})
	checkMonitor(t, mon)
}
