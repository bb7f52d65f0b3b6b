package status

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/results"
	"github.com/taskops/task-operator/internal/retry"
	"github.com/taskops/task-operator/internal/runs"
)

// maxHistory is how many runs status.history keeps.
const maxHistory = 10

// RunFinal reports whether the history records run id as finished. A run
// the stored status records as finished is settled: its record never
// changes, its outputs are not read again, and its Jobs may be pruned.
func RunFinal(h []v1alpha1.RunRecord, id string) bool {
	for _, r := range h {
		if r.RunID == id {
			return r.Result != v1alpha1.RunResultRunning
		}
	}
	return false
}

// mergeHistory folds the observed runs into the stored history, newest
// first, at most maxHistory runs.
func mergeHistory(old []v1alpha1.RunRecord, rs []runs.Run, steps map[string]retry.Step, outputs map[string]Output) []v1alpha1.RunRecord {
	byID := make(map[string]v1alpha1.RunRecord, len(old)+len(rs))
	for _, h := range old {
		byID[h.RunID] = h
	}
	for i := range rs {
		rec := runRecord(&rs[i], steps[rs[i].ID], outputs)
		if prev, ok := byID[rec.RunID]; ok {
			if prev.Result != v1alpha1.RunResultRunning {
				// A finished run's record never changes: its outputs are
				// not read again, and a lagging cache may show it running.
				// Only a record stored before entries had a reason gets
				// the one its Jobs still tell.
				if prev.Reason == "" && rec.Result == prev.Result {
					prev.Reason = rec.Reason
					byID[rec.RunID] = prev
				}
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
	if (a.RunID == runs.OneShot) != (b.RunID == runs.OneShot) {
		return b.RunID == runs.OneShot
	}
	return a.RunID > b.RunID
}

// runRecord is the history entry of an observed run.
func runRecord(run *runs.Run, step retry.Step, outputs map[string]Output) v1alpha1.RunRecord {
	last := run.Latest()
	rec := v1alpha1.RunRecord{
		RunID:      run.ID,
		Generation: run.Attempts[0].Generation,
		Attempts:   last.Number,
		Result:     v1alpha1.RunResultRunning,
		StartTime:  Time(run.Started()),
		Params:     run.Params(),
		Trigger:    run.Trigger(),
	}
	if run.Scheduled != nil {
		rec.ScheduledTime = Time(*run.Scheduled)
	}
	switch step.Kind {
	case retry.Succeeded:
		rec.Result, rec.Reason = v1alpha1.RunResultSucceeded, v1alpha1.ReasonSucceeded
		rec.Message = fmt.Sprintf("succeeded on attempt %d", last.Number)
		if out := outputs[last.JobName].Text; out != "" {
			rec.Message += ": " + out
		}
	case retry.Failed:
		rec.Result, rec.Reason = v1alpha1.RunResultFailed, step.Reason
		rec.Message = string(step.Reason) + ": " + step.Message
	case retry.Stopped:
		rec.Result, rec.Reason = v1alpha1.RunResultStopped, step.Reason
		rec.Message = step.Message
	case retry.Cancelled:
		rec.Result, rec.Reason = v1alpha1.RunResultCancelled, v1alpha1.ReasonCancelled
		rec.Message = fmt.Sprintf("attempt %d %s", last.Number, step.Message)
	case retry.WaitForRetry, retry.Paused:
		rec.Message = fmt.Sprintf("attempt %d failed: %s; attempt %d at %s",
			last.Number, step.Message, step.Attempt, step.At.UTC().Format(time.RFC3339))
	}
	if step.Finished() {
		rec.CompletionTime = Time(step.At)
		// The run's results are its last attempt's, kept when it failed:
		// a failing run can say how far it got.
		out := outputs[last.JobName]
		rec.Results = out.Results
		if len(out.TooLarge) > 0 {
			rec.Message = fmt.Sprintf("%s: %s left out (over %d bytes, or over the %d bytes a run's results may take); %s",
				v1alpha1.ReasonResultsTooLarge, strings.Join(out.TooLarge, ", "), results.MaxValue, results.MaxBlock, rec.Message)
		}
	}
	rec.Message = Head(rec.Message, MaxMessage)
	return rec
}

// newestResults are the results of the newest finished run in h (newest
// first), for status.results.
func newestResults(h []v1alpha1.RunRecord) map[string]string {
	for _, r := range h {
		if r.Result != v1alpha1.RunResultRunning {
			return r.Results
		}
	}
	return nil
}

// DroppedRecord is the history entry of a queued new run that ended before
// it had a Job (a cancel, or a newer run replacing it): no attempt ran.
func DroppedRecord(q v1alpha1.QueuedAttempt, result v1alpha1.RunResult, reason v1alpha1.Reason, msg string, now time.Time) v1alpha1.RunRecord {
	rec := v1alpha1.RunRecord{
		RunID: q.RunID, ScheduledTime: q.ScheduledTime.DeepCopy(), Result: result, Reason: reason,
		CompletionTime: Time(now), Message: Head(msg, MaxMessage), Trigger: q.Trigger,
	}
	if reason == v1alpha1.ReasonInvalidParams {
		// It started, and failed at its start: the newest run, whose end
		// the conditions tell.
		rec.StartTime = Time(now)
	}
	return rec
}
