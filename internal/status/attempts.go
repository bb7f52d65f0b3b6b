package status

import (
	"sort"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/runs"
)

const (
	// maxAttemptRecords is how many attempts status.attemptRecords keeps.
	maxAttemptRecords = 10
	// maxAttemptMessage bounds an attempt record's message (the contract:
	// 256 bytes).
	maxAttemptMessage = 256
)

// attemptRecords are the newest run's attempts, newest first, for
// status.attemptRecords. st already has the new currentRun; prev is the
// currentRun the stored records were about. A finished attempt's record
// never changes (its output is read once), and the records of attempts
// whose Jobs were pruned stay.
func attemptRecords(st *v1alpha1.TaskStatus, prev string, rs []runs.Run, outputs map[string]Output) []v1alpha1.AttemptRecord {
	if st.CurrentRun == "" {
		return nil
	}
	byNumber := map[int32]v1alpha1.AttemptRecord{}
	if st.CurrentRun == prev {
		for _, r := range st.AttemptRecords {
			byNumber[r.Attempt] = r
		}
	}
	if run := runs.Find(rs, st.CurrentRun); run != nil {
		for i := range run.Attempts {
			rec := attemptRecord(&run.Attempts[i], outputs)
			if old, ok := byNumber[rec.Attempt]; ok && old.Result != "" {
				continue
			}
			byNumber[rec.Attempt] = rec
		}
	}
	out := make([]v1alpha1.AttemptRecord, 0, len(byNumber))
	for _, r := range byNumber {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Attempt > out[j].Attempt })
	if len(out) > maxAttemptRecords {
		out = out[:maxAttemptRecords]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// attemptRecord is the record of one observed attempt.
func attemptRecord(a *runs.Attempt, outputs map[string]Output) v1alpha1.AttemptRecord {
	rec := v1alpha1.AttemptRecord{Attempt: a.Number, JobName: a.JobName, StartTime: Time(a.Created), Params: a.Params, LostWorkers: a.LostWorkers}
	if a.Phase == runs.Active {
		return rec
	}
	rec.CompletionTime = Time(a.Finished)
	rec.Reason = a.Reason
	switch a.Phase {
	case runs.Succeeded:
		rec.Result = v1alpha1.AttemptResultSucceeded
	case runs.Failed:
		rec.Result = v1alpha1.AttemptResultFailed
	case runs.Stopped:
		rec.Result = v1alpha1.AttemptResultStopped
	}
	out := outputs[a.JobName]
	rec.ExitCode = out.ExitCode
	if rec.ExitCode == nil {
		// No pod read (they ran on a worker, or are gone): the Job's
		// conditions may still say.
		rec.ExitCode = a.ExitCode
	}
	rec.Cluster = out.Cluster
	rec.Results = out.Results
	rec.Message = a.Message
	if out.Text != "" {
		rec.Message = out.Text
	}
	rec.Message = Tail(rec.Message, maxAttemptMessage)
	return rec
}
