package v1alpha1

// Names fixed by the contract: labels, annotations and the finalizer the
// operator puts on Tasks and their child Jobs.
const (
	// Finalizer guards a Task until its Jobs are stopped.
	Finalizer = "batch.taskops.io/cleanup"

	// LabelTask names the Task that owns a Job (and the Job's pods).
	LabelTask = "batch.taskops.io/task"
	// LabelRun holds the run id of a Job: "0", "s<unix seconds>" or "m<hash>".
	LabelRun = "batch.taskops.io/run"
	// LabelAttempt holds the attempt number (1-based) of a Job within its run.
	LabelAttempt = "batch.taskops.io/attempt"
	// LabelQueue names the TaskQueue that admitted a Job (spec.queueName
	// when the Job was created): the queue finds its Jobs by it.
	LabelQueue = "batch.taskops.io/queue"
	// LabelKueueQueueName on a Task names a Kueue LocalQueue: its Jobs
	// carry it (and LabelKueuePriorityClass), are created suspended, and
	// Kueue admits them under its quotas. Kueue's own label names.
	LabelKueueQueueName     = "kueue.x-k8s.io/queue-name"
	LabelKueuePriorityClass = "kueue.x-k8s.io/priority-class"
	// LabelDispatch, DispatchMultiKueue on a Task labelled for Kueue, says
	// its LocalQueue's ClusterQueue dispatches through MultiKueue: its Jobs
	// are created with spec.managedBy MultiKueueManagedBy (immutable, so it
	// is decided at creation), run on a worker cluster, and their state is
	// the status Kueue mirrors back. docs/multicluster.md.
	LabelDispatch      = "batch.taskops.io/dispatch"
	DispatchMultiKueue = "multikueue"
	// MultiKueueManagedBy is Kueue's controller name for MultiKueue, the
	// spec.managedBy of a Job it dispatches (the Job controller leaves
	// such a Job to it).
	MultiKueueManagedBy = "kueue.x-k8s.io/multikueue"
	// LabelNotification marks a notification Job (spec.notify); its value
	// is the run id the Job tells about. Notification Jobs carry no attempt
	// label: they are no attempt of any run.
	LabelNotification = "batch.taskops.io/notification"
	// LabelMetrics, "true" on a Task, asks for its own metric series when
	// the manager exports them only for such Tasks (--task-metrics=labelled).
	LabelMetrics = "batch.taskops.io/metrics"
	// LabelManagedBy marks every object the operator creates.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "task-operator"

	// AnnotationRunNow starts one run for each new value a user sets.
	AnnotationRunNow = "batch.taskops.io/run-now"
	// AnnotationBackfill starts a backfill for each new value a user sets:
	// every slot of the schedule in AnnotationBackfillRange (read from the
	// same version of the Task) that has no run gets one, oldest first.
	AnnotationBackfill = "batch.taskops.io/backfill"
	// AnnotationBackfillRange is "<from>/<to>", RFC 3339 times, to not in
	// the future.
	AnnotationBackfillRange = "batch.taskops.io/backfill-range"
	// AnnotationRunParams holds the values of the run the run-now token
	// written with it starts: a JSON object of strings naming declared
	// spec.params. Read from the same version of the Task as the token.
	AnnotationRunParams = "batch.taskops.io/run-params"
	// AnnotationParams records on a run's Jobs the values the run started
	// with (a JSON object of strings, defaults filled in): every attempt of
	// the run, retries included, runs with them, also after a restart.
	AnnotationParams = "batch.taskops.io/params"
	// AnnotationTrigger records on a run's Jobs the upstream runs that
	// started it (spec.after; a JSON list of TriggerRef): the status and
	// status.after are rebuilt from it.
	AnnotationTrigger = "batch.taskops.io/trigger"
	// AnnotationCancel stops every unfinished run for each new value a user
	// sets (result Cancelled, no retry).
	AnnotationCancel = "batch.taskops.io/cancel"
	// AnnotationCancelToken records on a Job the hash of a cancel token it
	// has seen: the one the operator stopped it for, or the one the Task
	// carried when the Job was made. Either way that token never stops it
	// again, even if the status write that recorded the token was lost.
	AnnotationCancelToken = "batch.taskops.io/cancel-token"

	// AnnotationStopReason and AnnotationStopTime record why and when the
	// operator stopped (suspended) an attempt's Job.
	AnnotationStopReason = "batch.taskops.io/stop-reason"
	AnnotationStopTime   = "batch.taskops.io/stop-time"
	// AnnotationStopMessage carries a human-readable detail of the stop.
	AnnotationStopMessage = "batch.taskops.io/stop-message"

	// AnnotationScheduledTime records the slot a scheduled run's Job was made for.
	AnnotationScheduledTime = "batch.taskops.io/scheduled-time"
	// AnnotationGeneration records the Task generation a Job was built from.
	AnnotationGeneration = "batch.taskops.io/generation"
	// AnnotationRunNowToken records on a Job the hash of the run-now token
	// consumed when it was created, so a consumed token stays consumed even
	// if the status write of that pass is lost.
	AnnotationRunNowToken = "batch.taskops.io/run-now-token"
	// AnnotationRunNowTokenValue records on the Jobs of a run that a
	// run-now token started the token itself (at most MaxRunNowTokenLength
	// characters), so the status can name it when the run ends
	// (status.lastFinishedRunNowToken) even after the annotation on the
	// Task has moved on to a newer token.
	AnnotationRunNowTokenValue = "batch.taskops.io/run-now-token-value"
	// AnnotationOutput records on a Job what its pods printed (the tail of
	// the log, at most 1 KiB), captured by the operator while the Job
	// controller was failing the Job for its deadline: it deletes the pods
	// before it marks the Job Failed, so nothing else would be left to read.
	AnnotationOutput = "batch.taskops.io/output"
	// AnnotationAllowServiceAccounts, "true" on a Namespace, lets its Tasks
	// name a ServiceAccount when the operator runs with
	// --service-accounts-opt-in (otherwise such a Task is InvalidSpec).
	AnnotationAllowServiceAccounts = "batch.taskops.io/allow-service-accounts"
	// AnnotationRetryAfter records on the Job of a failed http attempt the
	// server's Retry-After, in seconds ("0": none), read once from the
	// runner's structured result: the next attempt waits at least that long.
	AnnotationRetryAfter = "batch.taskops.io/retry-after"
	// AnnotationRetryableExitRule is, on an attempt's Job, the index of the
	// pod failure policy rule that fails the Job on an exit code that may be
	// retried (its last rule). The Job controller writes the exit code and
	// the index of the rule that matched into the Job's Failed condition,
	// and that condition is all there is of an attempt whose pods are gone
	// or ran on a MultiKueue worker: the operator reads the exit code from
	// it, and a FailJob rule at any other index as NotRetryable. Jobs made
	// before v0.2.0 have no such rule: every FailJob there is NotRetryable.
	AnnotationRetryableExitRule = "batch.taskops.io/retryable-exit-rule"
	// LabelWorkerCluster, on a Secret in the operator's namespace, names
	// the MultiKueueCluster whose read-only kubeconfig the Secret holds
	// (key kubeconfig): the operator then reads the pods of the attempts
	// that ran there (docs/multicluster.md).
	LabelWorkerCluster = "batch.taskops.io/worker-cluster"
	// AnnotationWorker records on a remote attempt's Job the worker
	// cluster the operator last saw it dispatched to; AnnotationLostWorkers
	// the workers it was taken from before (a JSON list of LostWorker).
	// The Job keeps them so a restarted operator or a lost status knows.
	AnnotationWorker      = "batch.taskops.io/worker"
	AnnotationLostWorkers = "batch.taskops.io/lost-workers"
)

// MaxRunNowTokenLength is the longest run-now token that
// status.lastFinishedRunNowToken can name.
const MaxRunNowTokenLength = 256
