package reconciler

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
	"github.com/taskops/task-operator/internal/scheduler"
)

// maxHistory is how many runs status.history keeps.
const maxHistory = 10

// outcome is what a pass observed, decided and did: everything the status
// is computed from.
type outcome struct {
	now     time.Time
	runs    []runs.Run
	steps   map[string]retry.Step
	plan    scheduler.Plan
	invalid *problem
	outputs map[string]string
	cron    bool
}

// computeStatus derives the new status from the old one and a pass's
// outcome. It is pure, and monotonic where the contract asks: a run's
// attempts never decrease and a finished run never turns back to running,
// even if the Job cache lags behind the stored status.
func computeStatus(task *v1alpha1.Task, o outcome) v1alpha1.TaskStatus {
	st := *task.Status.DeepCopy()
	st.ObservedGeneration = task.Generation
	if o.plan.RunNowToken != "" {
		st.LastRunNowToken = o.plan.RunNowToken
	}
	st.History = mergeHistory(st.History, o)
	st.Active = activeJobs(task.Namespace, o.runs)
	setCurrentRun(&st, o)
	// The stored lastError stays while it is about the same attempt: the
	// pods' output is read only once.
	if a := newestFailure(o.runs); a != nil && !strings.Contains(st.LastError, jobMarker(a.JobName)) {
		st.LastError = lastErrorText(a)
	}
	for _, h := range st.History {
		if h.Result == v1alpha1.RunResultSucceeded && h.CompletionTime != nil &&
			(st.LastSuccessfulTime == nil || h.CompletionTime.After(st.LastSuccessfulTime.Time)) {
			st.LastSuccessfulTime = h.CompletionTime.DeepCopy()
		}
	}
	setCronTimes(&st, o)
	setPhaseAndConditions(task, &st, o)
	return st
}

// setCurrentRun fills the single-valued fields from the newest run.
func setCurrentRun(st *v1alpha1.TaskStatus, o outcome) {
	if len(st.History) == 0 {
		return
	}
	cur := st.History[0]
	st.CurrentRun = cur.RunID
	st.Attempts = cur.Attempts
	st.RetryCount = max(cur.Attempts-1, 0)
	st.StartTime = cur.StartTime.DeepCopy()
	st.CompletionTime = cur.CompletionTime.DeepCopy()
	st.NextRetryTime = nil
	if run := findRun(o.runs, cur.RunID); run != nil {
		st.LastJobName = run.Latest().JobName
		if s := o.steps[cur.RunID]; s.Kind == retry.WaitForRetry || s.Kind == retry.Paused {
			st.NextRetryTime = timePtr(s.At)
		}
	}
}

// setCronTimes records the cron bookkeeping of a pass.
func setCronTimes(st *v1alpha1.TaskStatus, o outcome) {
	if !o.cron {
		return
	}
	for _, r := range o.runs {
		if r.Scheduled != nil && (st.LastScheduleTime == nil || r.Scheduled.After(st.LastScheduleTime.Time)) {
			st.LastScheduleTime = timePtr(*r.Scheduled)
		}
	}
	if s := o.plan.Slots; s != nil {
		// A slot that fell due counts as scheduled even when skipped, so it
		// is never considered again.
		if !s.Due.IsZero() && (st.LastScheduleTime == nil || s.Due.After(st.LastScheduleTime.Time)) {
			st.LastScheduleTime = timePtr(s.Due)
		}
		st.NextScheduleTime = timePtr(s.Next)
	}
}

// mergeHistory folds the observed runs into the stored history, newest
// first, at most maxHistory runs.
func mergeHistory(old []v1alpha1.RunRecord, o outcome) []v1alpha1.RunRecord {
	byID := make(map[string]v1alpha1.RunRecord, len(old)+len(o.runs))
	for _, h := range old {
		byID[h.RunID] = h
	}
	for i := range o.runs {
		rec := runRecord(&o.runs[i], o.steps[o.runs[i].ID], o.outputs)
		if prev, ok := byID[rec.RunID]; ok {
			if prev.Result != v1alpha1.RunResultRunning {
				// A finished run's record never changes: its outputs are
				// not read again, and a lagging cache may show it running.
				continue
			}
			rec.Attempts = max(rec.Attempts, prev.Attempts)
			if rec.Message == "" {
				rec.Message = prev.Message
			}
		}
		byID[rec.RunID] = rec
	}
	out := make([]v1alpha1.RunRecord, 0, len(byID))
	for _, h := range byID {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return newerRecord(&out[i], &out[j]) })
	if len(out) > maxHistory {
		out = out[:maxHistory]
	}
	return out
}

// newerRecord orders history newest first: by start, then slot, then id,
// with the initial run "0" oldest (creation times have 1 s resolution).
func newerRecord(a, b *v1alpha1.RunRecord) bool {
	at, bt := timeOf(a.StartTime), timeOf(b.StartTime)
	if !at.Equal(bt) {
		return at.After(bt)
	}
	as, bs := timeOf(a.ScheduledTime), timeOf(b.ScheduledTime)
	if !as.Equal(bs) {
		return as.After(bs)
	}
	if (a.RunID == "0") != (b.RunID == "0") {
		return b.RunID == "0"
	}
	return a.RunID > b.RunID
}

// runRecord is the history entry of an observed run.
func runRecord(run *runs.Run, step retry.Step, outputs map[string]string) v1alpha1.RunRecord {
	last := run.Latest()
	rec := v1alpha1.RunRecord{
		RunID:      run.ID,
		Generation: run.Attempts[0].Generation,
		Attempts:   last.Number,
		Result:     v1alpha1.RunResultRunning,
		StartTime:  timePtr(run.Started()),
	}
	if run.Scheduled != nil {
		rec.ScheduledTime = timePtr(*run.Scheduled)
	}
	switch step.Kind {
	case retry.Succeeded:
		rec.Result = v1alpha1.RunResultSucceeded
		rec.Message = fmt.Sprintf("succeeded on attempt %d", last.Number)
		if out := outputs[last.JobName]; out != "" {
			rec.Message += ": " + out
		}
	case retry.Failed:
		rec.Result = v1alpha1.RunResultFailed
		rec.Message = string(step.Reason) + ": " + step.Message
	case retry.Stopped:
		rec.Result = v1alpha1.RunResultStopped
		rec.Message = step.Message
	case retry.WaitForRetry, retry.Paused:
		rec.Message = fmt.Sprintf("attempt %d failed: %s; attempt %d at %s",
			last.Number, step.Message, step.Attempt, step.At.UTC().Format(time.RFC3339))
	}
	if step.Finished() {
		rec.CompletionTime = timePtr(step.At)
	}
	rec.Message = head(rec.Message, maxMessage)
	return rec
}

// activeJobs references the running Jobs, by name.
func activeJobs(namespace string, rs []runs.Run) []corev1.ObjectReference {
	var refs []corev1.ObjectReference
	for _, r := range rs {
		for _, a := range r.Attempts {
			if a.Phase == runs.Active {
				refs = append(refs, corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: namespace, Name: a.JobName})
			}
		}
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].Name < refs[j].Name })
	return refs
}

// timePtr is a status timestamp: whole seconds in UTC, as the API stores
// them, so an unchanged status compares equal to the stored one.
func timePtr(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.UTC().Truncate(time.Second))
	return &mt
}

func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}

func findRun(rs []runs.Run, id string) *runs.Run {
	for i := range rs {
		if rs[i].ID == id {
			return &rs[i]
		}
	}
	return nil
}
