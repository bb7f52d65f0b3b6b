package v1alpha1

// Condition types of a Task. Ready and Failed are the ones users wait on;
// Reconciling and Stalled follow the kstatus convention so health tools
// (Flux, kpt, cli-utils) read Tasks right.
const (
	ConditionReady       = "Ready"
	ConditionFailed      = "Failed"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
	// ConditionFinished is True once the newest run has ended, whichever
	// way (its reason says how), False while a run is pending, running or
	// retrying: `kubectl wait --for=condition=Finished` returns on either
	// outcome.
	ConditionFinished = "Finished"
)

// Reason is a stable, CamelCase condition or event reason.
type Reason string

// Condition reasons. The final failure reasons (RetriesExhausted,
// NotRetryable, InvalidSpec, InvalidSchedule) are part of the contract.
const (
	// ReasonRunning: a run is in progress (Pending, Running or Retrying).
	ReasonRunning Reason = "Running"
	// ReasonPending: the run has no Job yet.
	ReasonPending Reason = "Pending"
	// ReasonRetrying: the last attempt failed and the next waits out its backoff.
	ReasonRetrying Reason = "Retrying"
	// ReasonSucceeded: the (last finished) run succeeded.
	ReasonSucceeded Reason = "Succeeded"
	// ReasonScheduled: a cron Task with no finished run yet.
	ReasonScheduled Reason = "Scheduled"
	// ReasonLastRunFailed: the last finished run of a cron Task failed for good.
	ReasonLastRunFailed Reason = "LastRunFailed"
	// ReasonSuspended: spec.suspend is true.
	ReasonSuspended Reason = "Suspended"

	ReasonRetriesExhausted Reason = "RetriesExhausted"
	ReasonNotRetryable     Reason = "NotRetryable"
	ReasonInvalidSpec      Reason = "InvalidSpec"
	ReasonInvalidSchedule  Reason = "InvalidSchedule"
	// ReasonCancelled: the run was stopped by a cancel token.
	ReasonCancelled Reason = "Cancelled"
	// ReasonWaitingForCapacity: the running attempt's pods wait for
	// capacity (Unschedulable, a used-up quota), or its Job does (a
	// ResourceQuota on Jobs refused it); the message says for what.
	ReasonWaitingForCapacity Reason = "WaitingForCapacity"
	// ReasonJobRefused: the API server refuses the next attempt's Job for
	// a reason no spec change of the Task's fixes by itself: an admission
	// policy or webhook said no (403), or a Job that is not this Task's
	// holds the attempt's name. The Task waits (Ready False, Stalled True,
	// a Warning event) and tries again every minute.
	ReasonJobRefused Reason = "JobRefused"
	// ReasonWaitingForAPI: the API server could not take the next
	// attempt's Job for now, for a reason that may pass by itself (a 5xx,
	// including an admission webhook it could not call, a 429, a timeout,
	// a lost connection). The Task waits (Ready Unknown, still in
	// progress), names the refusal, and tries again within seconds, at a
	// pace that slows to once every 30 s; never JobRefused.
	ReasonWaitingForAPI Reason = "WaitingForAPI"
	// ReasonQueued: an attempt waits for spec.queueName to admit it.
	ReasonQueued Reason = "Queued"
	// ReasonQueueNotFound: spec.queueName names no TaskQueue (yet); the
	// Task waits and starts once the queue exists.
	ReasonQueueNotFound Reason = "QueueNotFound"
	// ReasonQueueSuspended: the TaskQueue is suspended (its Ready reason,
	// and a queued Task's while it waits).
	ReasonQueueSuspended Reason = "QueueSuspended"
	// ReasonAdmitting is the Ready reason of a TaskQueue that admits.
	ReasonAdmitting Reason = "Admitting"

	// ReasonNotFailed is the reason of Failed=False and Stalled=False.
	ReasonNotFailed Reason = "NotFailed"
	// ReasonIdle is the reason of Reconciling=False.
	ReasonIdle Reason = "Idle"
	// ReasonTooManyFailures: a cron Task starts no further slot after
	// spec.suspendAfterFailures consecutive failed runs.
	ReasonTooManyFailures Reason = "TooManyFailures"
	// ReasonInvalidParams: a run's values (the run-params annotation) name
	// a param spec.params does not declare, are not a JSON object of
	// strings, or lack a required value: the run fails at once, no Job.
	ReasonInvalidParams Reason = "InvalidParams"
	// ReasonResultsTooLarge, in a run's message: a result over 1 KiB, or
	// results over 4 KiB in all, were left out; what fits is kept.
	ReasonResultsTooLarge Reason = "ResultsTooLarge"
)

// FinalFailureReasons are the reasons the Failed condition can end with
// (Failed=True): the README's table of final failure reasons lists exactly
// these, and a test holds the two together.
var FinalFailureReasons = []Reason{
	ReasonRetriesExhausted, ReasonNotRetryable, ReasonCancelled,
	ReasonInvalidSpec, ReasonInvalidSchedule, ReasonTooManyFailures,
	ReasonInvalidParams,
}

// Reasons an attempt ends in failure. They appear in lastError, in history
// messages and in the RetriesExhausted message.
const (
	// AttemptPodFailed: a pod exited non-zero (or was otherwise failed).
	AttemptPodFailed Reason = "PodFailed"
	// AttemptDeadlineExceeded: activeDeadlineSeconds elapsed.
	AttemptDeadlineExceeded Reason = "DeadlineExceeded"
	// AttemptStartTimeout: a pod could not start within startTimeoutSeconds.
	AttemptStartTimeout Reason = "StartTimeout"
	// AttemptNotRetryable: the http runner exited 2 (bad request definition).
	AttemptNotRetryable Reason = "NotRetryable"
	// AttemptReplaced: stopped because a newer run replaced it (Replace policy).
	AttemptReplaced Reason = "Replaced"
	// AttemptCancelled: the operator stopped the attempt for a cancel token.
	AttemptCancelled Reason = "Cancelled"
	// AttemptCapacityTimeout: the attempt waited for capacity longer than
	// spec.capacityTimeoutSeconds.
	AttemptCapacityTimeout Reason = "CapacityTimeout"
	// AttemptJobFailed: the Job failed for a reason the operator does not know.
	AttemptJobFailed Reason = "JobFailed"
	// AttemptJobDeleted: the attempt's Job was deleted (by someone other
	// than the operator) before its run finished. It counts as a failed
	// attempt; the next one, if maxRetry allows, starts at once.
	AttemptJobDeleted Reason = "JobDeleted"
)

// Event reasons: one per decision the operator takes.
const (
	EventAttemptCreated  Reason = "AttemptCreated"
	EventAttemptFailed   Reason = "AttemptFailed"
	EventAttemptStopped  Reason = "AttemptStopped"
	EventRetryScheduled  Reason = "RetryScheduled"
	EventRunSucceeded    Reason = "RunSucceeded"
	EventRunFailed       Reason = "RunFailed"
	EventRunNowAccepted  Reason = "RunNowAccepted"
	EventRunCancelled    Reason = "RunCancelled"
	EventInvalidSpec     Reason = "InvalidSpec"
	EventInvalidSchedule Reason = "InvalidSchedule"
	EventMissedSchedules Reason = "MissedSchedules"
	EventSlotSkipped     Reason = "SlotSkipped"
	// EventSkipDatesUnreadable: some skip dates could not be used (the
	// ConfigMap spec.skipDatesFrom names is missing, or a line is no
	// date); the schedule runs on the others.
	EventSkipDatesUnreadable Reason = "SkipDatesUnreadable"
	// EventBackfill: a backfill request was accepted, refused, finished or
	// cancelled (the message says which).
	EventBackfill Reason = "Backfill"
	// EventJobRefused: the API server refused an attempt's Job (a policy,
	// a webhook, a quota, a foreign Job under its name); the message quotes
	// the refusal.
	EventJobRefused Reason = "JobRefused"
	// EventWaitingForAPI: the API server could not take an attempt's Job
	// for now (ReasonWaitingForAPI); sent when the refusal first shows or
	// changes, not on every try.
	EventWaitingForAPI Reason = "WaitingForAPI"
	EventJobsDeleted   Reason = "JobsDeleted"
	EventTaskExpired   Reason = "TaskExpired"
	EventCleanupFailed Reason = "CleanupFailed"
	// EventDeleted: the finalizer let a deleted Task go; the message names
	// the Jobs it deleted and any notification it did not wait for.
	EventDeleted Reason = "Deleted"
	// EventJobLabelsRestored: a child Job had lost the labels the operator
	// finds its Jobs by; they were put back.
	EventJobLabelsRestored Reason = "JobLabelsRestored"
	// EventQueued: an attempt started waiting for its queue's admission.
	EventQueued Reason = "Queued"
	// EventAdmitted: the queue admitted an attempt; its Job is created next.
	EventAdmitted Reason = "Admitted"
	// EventQueuedSlotMissed: a cron slot was still queued
	// startingDeadlineSeconds after it, so it was skipped (counted missed).
	EventQueuedSlotMissed Reason = "QueuedSlotMissed"
	// EventNotificationSent: every webhook of a run's notification accepted
	// it; EventNotificationFailed: one did not (the run's result stands).
	EventNotificationSent   Reason = "NotificationSent"
	EventNotificationFailed Reason = "NotificationFailed"
	// EventTooManyFailures: spec.suspendAfterFailures consecutive runs
	// failed, so the cron Task starts no further slot.
	EventTooManyFailures Reason = "TooManyFailures"
)
