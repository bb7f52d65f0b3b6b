// Package runs turns the child Jobs of a Task into the runs and attempts they
// record (runs.go), and holds the run-id grammar (ids.go). It is pure:
// everything the operator decides starts from this view, which is why
// status can always be rebuilt from the Jobs that exist.
package runs

import (
	"sort"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/params"
)

// Phase is where an attempt stands.
type Phase string

const (
	// Active: the Job is running (or waiting for its pods).
	Active Phase = "Active"
	// Succeeded: the Job completed.
	Succeeded Phase = "Succeeded"
	// Failed: the Job failed.
	Failed Phase = "Failed"
	// Stopped: the operator stopped (suspended) the Job; Reason says why.
	Stopped Phase = "Stopped"
)

// Attempt is what one child Job says about one attempt of a run.
type Attempt struct {
	Number  int32
	JobName string
	Phase   Phase
	// Reason and Message explain a Failed or Stopped attempt.
	Reason  v1alpha1.Reason
	Message string
	// Worker is the worker cluster the operator last saw a remote attempt
	// dispatched to, and LostWorkers those it was taken from before
	// (v1alpha1.AnnotationWorker, AnnotationLostWorkers; workers.go).
	Worker      string
	LostWorkers []v1alpha1.LostWorker
	// ExitCode is the exit code a finished attempt's Job conditions give:
	// 0 for a Complete Job, the code that failed a Failed one where the
	// Job controller named it (failure.go); nil otherwise. The pods, when
	// they can be read, say more (which pod, its output).
	ExitCode *int32
	// Created is the Job's creation time; Finished is when it completed,
	// failed (the Failed condition's time: a failed Job has no
	// completionTime) or was stopped. Finished is zero while Active.
	Created  time.Time
	Finished time.Time
	// Generation is the Task generation the Job was built from.
	Generation int64
	// PodsStarted is true once every pod of the Job is ready or finished, so
	// the start timeout no longer needs checking.
	PodsStarted bool
	// Held is true while the Job is suspended and the operator did not
	// stop it: something else (Kueue) holds it until it admits it.
	Held bool
	// Remote is true when another controller than the Job controller runs
	// the Job (spec.managedBy: MultiKueue dispatches it to a worker
	// cluster): its pods are not in this cluster, and its status is the
	// one that controller mirrors.
	Remote bool
	// Resumed is the Job's status.startTime, when set (and not before its
	// creation): the Job controller sets it anew when a suspended Job is
	// resumed (Kueue admitting it), and a start timeout counts from it.
	// Both times have one-second resolution: a Job Kueue admits within
	// the second it was created has a startTime equal to its creation,
	// and is started all the same (zero would mean "admitted, not started
	// yet" for ever).
	Resumed time.Time
	// RunNowToken is the hash of the run-now token consumed when the Job
	// was created.
	RunNowToken string
	// RunNowTokenValue is the run-now token that started this attempt's
	// run, as the user wrote it (v1alpha1.AnnotationRunNowTokenValue);
	// empty for runs no token started.
	RunNowTokenValue string
	// CancelToken is the hash of the cancel token the operator stopped the
	// Job for.
	CancelToken string
	// Failing is the reason the Job controller is failing an Active
	// attempt's Job for (its FailureTarget condition): the Job's pods are
	// being deleted and Failed comes once they are gone. Empty otherwise.
	Failing v1alpha1.Reason
	// Output is what the operator captured of the pods' output while the
	// Job was failing (v1alpha1.AnnotationOutput).
	Output string
	// RetryAfter is the server's Retry-After of a failed http attempt
	// (v1alpha1.AnnotationRetryAfter); RetryAfterKnown says the operator
	// has read it (zero: the server sent none).
	RetryAfter      time.Duration
	RetryAfterKnown bool
	// StopUndone is the stop reason annotated on a Job that is neither
	// suspended nor finished: someone resumed a Job the operator stopped,
	// or wrote the annotation by hand. The annotation alone proves nothing
	// (anyone may edit it), so the attempt is Active; the plan stops it
	// again when the status confirms the operator had stopped it
	// (plan.stopAgain). StopUndoneMessage is the annotated message.
	StopUndone        v1alpha1.Reason
	StopUndoneMessage string
	// Params are the values the run started with, as its Jobs record them
	// (v1alpha1.AnnotationParams): every attempt of the run gets them.
	Params map[string]string
	// Trigger lists the upstream runs that started the run (spec.after),
	// as its Jobs record them (v1alpha1.AnnotationTrigger).
	Trigger []v1alpha1.TriggerRef
}

// Stop marks the attempt stopped by the operator at at, for reason: what
// the stop annotations on its Job say once written.
func (a *Attempt) Stop(reason v1alpha1.Reason, message string, at time.Time) {
	a.Phase, a.Reason, a.Message, a.Finished = Stopped, reason, message, at
}

// Run is one execution the user asked for: its attempts, oldest first.
type Run struct {
	ID        string
	Scheduled *time.Time
	Attempts  []Attempt
}

// Latest is the newest attempt of the run.
func (r *Run) Latest() *Attempt { return &r.Attempts[len(r.Attempts)-1] }

// Params are the values the run started with: those its attempts' Jobs
// record (the same on each).
func (r *Run) Params() map[string]string {
	for i := range r.Attempts {
		if r.Attempts[i].Params != nil {
			return r.Attempts[i].Params
		}
	}
	return nil
}

// Trigger lists the upstream runs that started the run (spec.after): what
// its attempts' Jobs record (the same on each).
func (r *Run) Trigger() []v1alpha1.TriggerRef {
	for i := range r.Attempts {
		if r.Attempts[i].Trigger != nil {
			return r.Attempts[i].Trigger
		}
	}
	return nil
}

// Started is when the run's first attempt was created.
func (r *Run) Started() time.Time { return r.Attempts[0].Created }

// Attempt returns attempt n of the run, or nil.
func (r *Run) Attempt(n int32) *Attempt {
	for i := range r.Attempts {
		if r.Attempts[i].Number == n {
			return &r.Attempts[i]
		}
	}
	return nil
}

// StartBase is when an attempt's start timeout begins: when its Job was
// created, or last resumed from suspension.
func (a *Attempt) StartBase() time.Time {
	if a.Resumed.After(a.Created) {
		return a.Resumed
	}
	return a.Created
}

// Find returns the run with id, or nil.
func Find(rs []Run, id string) *Run {
	for i := range rs {
		if rs[i].ID == id {
			return &rs[i]
		}
	}
	return nil
}

// FindAttempt returns the attempt whose Job is jobName, or nil.
func FindAttempt(rs []Run, jobName string) *Attempt {
	for i := range rs {
		for j := range rs[i].Attempts {
			if rs[i].Attempts[j].JobName == jobName {
				return &rs[i].Attempts[j]
			}
		}
	}
	return nil
}

// AddAttempt adds attempt a to run runID of rs (a new run when rs has none
// with that id, scheduled at scheduled) and returns rs, oldest run first. An
// attempt the run already has is left as it is. rs changes in place: Clone
// it first to keep the original.
func AddAttempt(rs []Run, runID string, scheduled *time.Time, a Attempt) []Run {
	if run := Find(rs, runID); run != nil {
		if run.Attempt(a.Number) == nil {
			attempts := append(run.Attempts, a)
			sort.Slice(attempts, func(x, y int) bool { return attempts[x].Number < attempts[y].Number })
			run.Attempts = attempts
		}
		return rs
	}
	rs = append(rs, Run{ID: runID, Scheduled: scheduled, Attempts: []Attempt{a}})
	SortOldestFirst(rs)
	return rs
}

// Clone copies rs deeply enough that changing an attempt of the copy
// leaves rs as it is.
func Clone(rs []Run) []Run {
	out := make([]Run, len(rs))
	for i, r := range rs {
		out[i] = r
		out[i].Attempts = append([]Attempt(nil), r.Attempts...)
	}
	return out
}

// FromJobs groups the Jobs controlled by the Task with UID owner into runs,
// oldest run first. Jobs another object controls, or that lack our labels,
// are ignored: a Job with our name counts as ours only through its
// controller reference.
func FromJobs(owner types.UID, jobs []batchv1.Job) []Run {
	byID := map[string]*Run{}
	for i := range jobs {
		job := &jobs[i]
		if !ControlledBy(job, owner) {
			continue
		}
		runID := job.Labels[v1alpha1.LabelRun]
		n, err := strconv.ParseInt(job.Labels[v1alpha1.LabelAttempt], 10, 32)
		if runID == "" || err != nil || n < 1 {
			continue
		}
		run := byID[runID]
		if run == nil {
			run = &Run{ID: runID, Scheduled: scheduledTime(job)}
			byID[runID] = run
		}
		run.Attempts = append(run.Attempts, AttemptOf(job, int32(n)))
	}
	out := make([]Run, 0, len(byID))
	for _, r := range byID {
		sort.Slice(r.Attempts, func(i, j int) bool { return r.Attempts[i].Number < r.Attempts[j].Number })
		out = append(out, *r)
	}
	SortOldestFirst(out)
	return out
}

// SortOldestFirst orders runs by when they started. Creation times have
// one-second resolution, so ties fall back to the scheduled slot and then
// the id, with the initial run "0" first.
func SortOldestFirst(rs []Run) {
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i].Started(), rs[j].Started()
		if !a.Equal(b) {
			return a.Before(b)
		}
		if rs[i].Scheduled != nil && rs[j].Scheduled != nil && !rs[i].Scheduled.Equal(*rs[j].Scheduled) {
			return rs[i].Scheduled.Before(*rs[j].Scheduled)
		}
		if (rs[i].ID == OneShot) != (rs[j].ID == OneShot) {
			return rs[i].ID == OneShot
		}
		return rs[i].ID < rs[j].ID
	})
}

// tokenOfRun is the run-now token a Job records as its run's, when it
// started that run (see TokenForRun).
func tokenOfRun(job *batchv1.Job) string {
	return TokenForRun(job.Annotations[v1alpha1.AnnotationRunNowTokenValue], job.Labels[v1alpha1.LabelRun])
}

// AttemptOf reads one Job as attempt n.
func AttemptOf(job *batchv1.Job, n int32) Attempt {
	a := Attempt{
		Number:      n,
		JobName:     job.Name,
		Phase:       Active,
		Created:     job.CreationTimestamp.Time,
		Generation:  annotationInt(job, v1alpha1.AnnotationGeneration),
		RunNowToken: job.Annotations[v1alpha1.AnnotationRunNowToken],
		CancelToken: job.Annotations[v1alpha1.AnnotationCancelToken],
		// Only the run the token started may claim it.
		RunNowTokenValue: tokenOfRun(job),
		Output:           job.Annotations[v1alpha1.AnnotationOutput],
		Params:           params.Decode(job.Annotations[v1alpha1.AnnotationParams]),
		Trigger:          DecodeTrigger(job.Annotations[v1alpha1.AnnotationTrigger]),
		Worker:           job.Annotations[v1alpha1.AnnotationWorker],
		LostWorkers:      DecodeLostWorkers(job.Annotations[v1alpha1.AnnotationLostWorkers]),
	}
	if v, ok := job.Annotations[v1alpha1.AnnotationRetryAfter]; ok {
		secs, _ := strconv.ParseInt(v, 10, 64)
		a.RetryAfter, a.RetryAfterKnown = time.Duration(max(secs, 0))*time.Second, true
	}
	completions := int32(1)
	if job.Spec.Completions != nil {
		completions = *job.Spec.Completions
	}
	ready := int32(0)
	if job.Status.Ready != nil {
		ready = *job.Status.Ready
	}
	a.PodsStarted = ready+job.Status.Succeeded+job.Status.Failed >= completions
	// Suspended by someone else (Kueue holds Jobs suspended until it
	// admits them): waiting for capacity, not broken. A stop of ours
	// suspends too, but is told by its annotation below.
	a.Held = job.Spec.Suspend != nil && *job.Spec.Suspend
	a.Remote = Remote(job)
	if st := job.Status.StartTime; st != nil && !st.Time.Before(a.Created) {
		a.Resumed = st.Time
	}

	// A Job that completed before our stop took effect still succeeded.
	if c := condition(job, batchv1.JobComplete); c != nil {
		a.Phase = Succeeded
		a.ExitCode = new(int32(0)) // every pod's container exited 0
		a.Finished = c.LastTransitionTime.Time
		if job.Status.CompletionTime != nil {
			a.Finished = job.Status.CompletionTime.Time
		}
		return a
	}
	reason, stopped := job.Annotations[v1alpha1.AnnotationStopReason]
	if stopped && !a.Held && condition(job, batchv1.JobFailed) == nil {
		// Stopped means suspended (or finished): a Job that runs with the
		// annotation runs.
		a.StopUndone, a.StopUndoneMessage = v1alpha1.Reason(reason), job.Annotations[v1alpha1.AnnotationStopMessage]
		stopped = false
	}
	if stopped {
		a.Phase = Stopped
		a.Reason = v1alpha1.Reason(reason)
		a.Message = job.Annotations[v1alpha1.AnnotationStopMessage]
		if t, err := time.Parse(time.RFC3339, job.Annotations[v1alpha1.AnnotationStopTime]); err == nil {
			a.Finished = t
		} else {
			a.Finished = a.Created
		}
		return a
	}
	if c := condition(job, batchv1.JobFailed); c != nil {
		a.Phase = Failed
		a.Reason, a.ExitCode = failure(job, c)
		a.Message = c.Message
		a.Finished = c.LastTransitionTime.Time
	} else if c := condition(job, batchv1.JobFailureTarget); c != nil {
		a.Failing, _ = failure(job, c)
	}
	return a
}

// JobFinished reports whether the Job controller has finished job: it
// completed or failed.
func JobFinished(job *batchv1.Job) bool {
	return condition(job, batchv1.JobComplete) != nil || condition(job, batchv1.JobFailed) != nil
}

func condition(job *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range job.Status.Conditions {
		c := &job.Status.Conditions[i]
		if c.Type == t && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return nil
}

// ControlledBy reports whether the object with UID owner is the Job's
// controller: what makes a Job a Task's, whatever its name and labels.
func ControlledBy(job *batchv1.Job, owner types.UID) bool {
	ref := metav1.GetControllerOf(job)
	return ref != nil && ref.UID == owner
}

func scheduledTime(job *batchv1.Job) *time.Time {
	v, ok := job.Annotations[v1alpha1.AnnotationScheduledTime]
	if !ok {
		return nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil
	}
	return &t
}

func annotationInt(job *batchv1.Job, key string) int64 {
	n, _ := strconv.ParseInt(job.Annotations[key], 10, 64)
	return n
}

// HoldsPlace reports whether a Job's attempt still holds its place in a
// queue: while it is active, and, once stopped, until its pods are gone (a
// stopped attempt's pods still run for their grace period, and a Job
// someone resumed after a stop runs again: it is Active, see AttemptOf).
func HoldsPlace(job *batchv1.Job) bool {
	a := AttemptOf(job, 0)
	podsLeft := job.Status.Active > 0 || ptr.Deref(job.Status.Terminating, 0) > 0
	return a.Phase == Active || (a.Phase == Stopped && podsLeft)
}

// Remote reports whether another controller than the Job controller runs
// the Job (spec.managedBy set to anything else, as MultiKueue does).
func Remote(job *batchv1.Job) bool {
	by := ptr.Deref(job.Spec.ManagedBy, batchv1.JobControllerName)
	return by != batchv1.JobControllerName
}
