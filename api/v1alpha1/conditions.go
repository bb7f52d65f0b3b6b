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

// Condition reasons: the Ready, Failed, Finished, Stalled and Reconciling
// conditions' reasons, stable and part of the API (FinalFailureReasons
// are the ones a run ends failed with). docs/reference/reasons.md is
// generated from these comments: every reason has one.
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

	// ReasonRetriesExhausted: the last attempt maxRetry allows failed; the
	// message names that attempt's reason (PodFailed, DeadlineExceeded,
	// StartTimeout, CapacityTimeout, JobDeleted, JobFailed).
	ReasonRetriesExhausted Reason = "RetriesExhausted"
	// ReasonNotRetryable: an attempt ended with an exit code after which
	// retrying cannot help: one of spec.nonRetryableExitCodes, or the http
	// runner's 2 (bad request definition) or 9 (a 4xx answer, unless
	// http.retryAllFailures).
	ReasonNotRetryable Reason = "NotRetryable"
	// ReasonInvalidSpec: the spec cannot be acted on: the API server
	// refused the Job as invalid (422), a ServiceAccount the namespace does
	// not allow, a Kueue or policy setting that cannot hold. No Job; fixed
	// by editing the spec.
	ReasonInvalidSpec Reason = "InvalidSpec"
	// ReasonInvalidSchedule: spec.schedule or spec.timeZone cannot be
	// parsed (what admission cannot check, e.g. a time zone this build does
	// not know).
	ReasonInvalidSchedule Reason = "InvalidSchedule"
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
	// ReasonAdmitting: the Ready reason of a TaskQueue that admits.
	ReasonAdmitting Reason = "Admitting"

	// ReasonNotFailed: the reason of Failed=False and Stalled=False.
	ReasonNotFailed Reason = "NotFailed"
	// ReasonIdle: the reason of Reconciling=False.
	ReasonIdle Reason = "Idle"
	// ReasonTooManyFailures: a cron Task starts no further slot after
	// spec.suspendAfterFailures consecutive failed runs.
	ReasonTooManyFailures Reason = "TooManyFailures"
	// ReasonInvalidParams: a run's values (the run-params annotation) name
	// a param spec.params does not declare, are not a JSON object of
	// strings, or lack a required value: the run fails at once, no Job.
	ReasonInvalidParams Reason = "InvalidParams"
	// ReasonResultsTooLarge, in a run's message: a result over 1 KiB
	// (results.MaxValue), or results over 3.5 KiB in all (results.MaxBlock,
	// what fits in the 4 KiB termination message with its framing), were
	// left out; what fits is kept.
	ReasonResultsTooLarge Reason = "ResultsTooLarge"
)

// FinalFailureReasons are the reasons the Failed condition can end with
// (Failed=True); docs/reference/reasons.md marks them Final (generated).
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
	// EventAttemptCreated: an attempt's Job was created.
	EventAttemptCreated Reason = "AttemptCreated"
	// EventAttemptFailed (Warning): an attempt ended in failure; the
	// message names its reason and output.
	EventAttemptFailed Reason = "AttemptFailed"
	// EventAttemptStopped (Warning): the operator stopped a running
	// attempt (deadline, cancel, Replace, capacity timeout).
	EventAttemptStopped Reason = "AttemptStopped"
	// EventWorkerLost (Warning): a remote attempt was taken from the
	// worker cluster it was dispatched to (the worker lost, or the
	// attempt evicted there); Kueue dispatches it again.
	EventWorkerLost Reason = "WorkerLost"
	// EventRetryScheduled: the next attempt waits out its backoff; the
	// message says when it starts.
	EventRetryScheduled Reason = "RetryScheduled"
	// EventRunSucceeded: a run succeeded.
	EventRunSucceeded Reason = "RunSucceeded"
	// EventRunFailed (Warning): a run failed for good; the message names
	// the final reason.
	EventRunFailed Reason = "RunFailed"
	// EventRunNowAccepted: a new run-now token started a run.
	EventRunNowAccepted Reason = "RunNowAccepted"
	// EventRunCancelled: a cancel token stopped a run.
	EventRunCancelled Reason = "RunCancelled"
	// EventInvalidSpec (Warning): the spec cannot be acted on
	// (ReasonInvalidSpec); sent when the problem first shows or changes.
	EventInvalidSpec Reason = "InvalidSpec"
	// EventInvalidSchedule (Warning): the schedule cannot be parsed
	// (ReasonInvalidSchedule).
	EventInvalidSchedule Reason = "InvalidSchedule"
	// EventMissedSchedules (Warning): earlier slots were missed (the
	// operator was down, say); only the newest was considered.
	EventMissedSchedules Reason = "MissedSchedules"
	// EventSlotSkipped: a cron slot started no run (a skip date, a
	// suspended Task, a refusal past startingDeadlineSeconds); the message
	// says why.
	EventSlotSkipped Reason = "SlotSkipped"
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
	// EventJobsDeleted: finished Jobs beyond the history limits were
	// deleted.
	EventJobsDeleted Reason = "JobsDeleted"
	// EventTaskExpired: ttlSecondsAfterFinished passed; the Task is
	// deleted.
	EventTaskExpired Reason = "TaskExpired"
	// EventCleanupFailed (Warning): a deleted Task's Jobs could not be
	// deleted yet; the finalizer tries again.
	EventCleanupFailed Reason = "CleanupFailed"
	// EventDeleted: the finalizer let a deleted Task go; the message names
	// the Jobs it deleted and any notification it did not wait for.
	EventDeleted Reason = "Deleted"
	// EventJobLabelsRestored: a child Job had lost the labels the operator
	// finds its Jobs by; they were put back.
	EventJobLabelsRestored Reason = "JobLabelsRestored"
	// EventAdmitted: the queue admitted an attempt; its Job is created next.
	EventAdmitted Reason = "Admitted"
	// EventQueuedSlotMissed: a cron slot was still queued
	// startingDeadlineSeconds after it, so it was skipped (counted missed).
	EventQueuedSlotMissed Reason = "QueuedSlotMissed"
	// EventNotificationSent: every webhook of a run's notification accepted
	// it.
	EventNotificationSent Reason = "NotificationSent"
	// EventNotificationFailed (Warning): a webhook did not accept a run's
	// notification, or its Job could not be created before
	// --notification-deadline; the run's result stands.
	EventNotificationFailed Reason = "NotificationFailed"
	// EventTooManyFailures: spec.suspendAfterFailures consecutive runs
	// failed, so the cron Task starts no further slot.
	EventTooManyFailures Reason = "TooManyFailures"
	// EventChainTriggered: finished upstream runs (spec.after) started a
	// run; the message names them.
	EventChainTriggered Reason = "ChainTriggered"
	// EventUpstreamMissing (Warning): a Task spec.after names does not
	// exist; the others still count, and the Task runs when it appears.
	EventUpstreamMissing Reason = "UpstreamMissing"
)
