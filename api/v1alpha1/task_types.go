package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TaskType says what a Task runs.
// +kubebuilder:validation:Enum=shell;http
type TaskType string

const (
	// TaskTypeShell runs spec.shell as `/bin/sh -c "<shell>"`.
	TaskTypeShell TaskType = "shell"
	// TaskTypeHTTP makes the HTTP request in spec.url / spec.http with the runner.
	TaskTypeHTTP TaskType = "http"
)

// ConcurrencyPolicy says what happens when a run is due while another is active.
// +kubebuilder:validation:Enum=Forbid;Allow;Replace
type ConcurrencyPolicy string

const (
	// ForbidConcurrent: the new run waits (run-now) or is skipped (a cron slot).
	ForbidConcurrent ConcurrencyPolicy = "Forbid"
	// AllowConcurrent: runs may overlap.
	AllowConcurrent ConcurrencyPolicy = "Allow"
	// ReplaceConcurrent: the active run is stopped and the new one starts.
	ReplaceConcurrent ConcurrencyPolicy = "Replace"
)

// The rules on the spec are shaped by what they cost: the API server runs
// every rule of a CRD on every write of an object, each status write of a
// Task included, and each field a rule reads on the spec costs it a copy
// of the spec's field schemas (dozens). So which fields a Task may set is
// one rule that walks the few fields a Task sets (dyn(self).all: CEL does
// not range over an object's fields otherwise), naming the offending ones
// in its message, not a rule per field that reads two or three
// (docs/performance-history.md, "The Task's rules at the API server"); a
// rule that needs one field only sits on that field.
//
// +kubebuilder:validation:XValidation:rule="self.type == 'shell' ? has(self.shell) : has(self.url)",messageExpression="self.type == 'shell' ? 'spec.shell is required when type is shell' : 'spec.url is required when type is http'",message="spec.shell is required when type is shell, spec.url when type is http"
// +kubebuilder:validation:XValidation:rule="dyn(self).all(k, k in ['shell', 'image', 'nonRetryableExitCodes'] ? self.type == 'shell' : k in ['url', 'http'] ? self.type == 'http' : k in ['startingDeadlineSeconds', 'suspendAfterFailures', 'repeatedTimePolicy', 'skippedTimePolicy'] ? has(self.schedule) : k in ['timeZone', 'skipDates', 'skipDatesFrom', 'skipCalendars'] ? has(self.schedule) || has(self.after) : k == 'afterPolicy' ? has(self.after) : k != 'ttlSecondsAfterFinished' || !has(self.schedule))",messageExpression="dyn(self).filter(k, !(k in ['shell', 'image', 'nonRetryableExitCodes'] ? self.type == 'shell' : k in ['url', 'http'] ? self.type == 'http' : k in ['startingDeadlineSeconds', 'suspendAfterFailures', 'repeatedTimePolicy', 'skippedTimePolicy'] ? has(self.schedule) : k in ['timeZone', 'skipDates', 'skipDatesFrom', 'skipCalendars'] ? has(self.schedule) || has(self.after) : k == 'afterPolicy' ? has(self.after) : k != 'ttlSecondsAfterFinished' || !has(self.schedule))).map(k, 'spec.' + k + (k in ['shell', 'url', 'http'] ? ' is only allowed when type is ' + (k == 'shell' ? 'shell' : 'http') : k == 'image' ? ' is only allowed when type is shell: http Tasks always run the runner image' : k == 'nonRetryableExitCodes' ? ' is only allowed when type is shell: the http runner has its own failure classes' : k == 'timeZone' ? ' is only allowed with spec.schedule or spec.after (skip dates are read in it)' : k in ['timeZone', 'skipDates', 'skipDatesFrom', 'skipCalendars'] ? ' is only allowed with spec.schedule or spec.after' : k == 'afterPolicy' ? ' is only allowed with spec.after' : k == 'ttlSecondsAfterFinished' ? ' is only allowed for one-shot Tasks (without spec.schedule)' : ' is only allowed with spec.schedule')).join('; ')",message="a field is set that the Task's type, spec.schedule or spec.after does not allow: shell, image and nonRetryableExitCodes need type shell; url and http type http; startingDeadlineSeconds, suspendAfterFailures, repeatedTimePolicy and skippedTimePolicy spec.schedule; timeZone, skipDates, skipDatesFrom and skipCalendars spec.schedule or spec.after; afterPolicy spec.after; ttlSecondsAfterFinished no spec.schedule"
// +kubebuilder:validation:XValidation:rule="has(self.schedule) == has(oldSelf.schedule)",message="spec.schedule cannot be added or removed after creation: a Task is one-shot or scheduled for life"
// +kubebuilder:validation:XValidation:rule="!has(self.volumeMounts) || self.volumeMounts.all(m, has(self.volumes) && self.volumes.exists(v, v.name == m.name))",message="spec.volumeMounts must name volumes of spec.volumes"
// +kubebuilder:validation:XValidation:rule="!has(self.after) || self.after.all(a, !has(a.params) || a.params.all(p, has(self.params) && self.params.exists(x, x.name == p.name)))",message="spec.after[].params[].name must name a param of spec.params"
// +kubebuilder:validation:XValidation:rule="!has(self.params) || !has(self.schedule) || self.params.all(p, has(p.default))",message="spec.params: every param of a cron Task needs a default: its slots run with the defaults"
// +kubebuilder:validation:XValidation:rule="!has(self.http) || !has(self.http.results) || (has(self.results) && self.http.results.all(r, self.results.exists(x, x.name == r.name)))",message="spec.http.results must name results declared in spec.results"

// TaskSpec is what a Task runs, how wide, how stubbornly and when.
type TaskSpec struct {
	// Type of work: `shell` runs spec.shell in spec.image; `http` makes the
	// request described by spec.url and spec.http. Immutable.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.type is immutable"
	Type TaskType `json:"type"`

	// Shell is the script run as `/bin/sh -c "<shell>"`. Required when type is
	// shell, forbidden otherwise.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32768
	Shell string `json:"shell,omitempty"`

	// URL is the absolute http:// or https:// URL an http Task calls. Required
	// when type is http, forbidden otherwise.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="spec.url must be an absolute http:// or https:// URL with a host"
	URL string `json:"url,omitempty"`

	// HTTP describes the request of an http Task beyond its URL.
	// +optional
	HTTP *HTTPSpec `json:"http,omitempty"`

	// Replicas is the number of pods run in parallel in one attempt; the
	// attempt succeeds only if all of them succeed.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Replicas int32 `json:"replicas,omitempty"`

	// MaxRetry is the number of retries after a failed attempt: a run has at
	// most maxRetry+1 attempts.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	MaxRetry int32 `json:"maxRetry,omitempty"`

	// NonRetryableExitCodes are exit codes of a shell Task's script after
	// which the run fails NotRetryable at once (the Job's podFailurePolicy
	// fails it), without the retries left.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Minimum=1
	// +kubebuilder:validation:items:Maximum=255
	NonRetryableExitCodes []int32 `json:"nonRetryableExitCodes,omitempty"`

	// Backoff is the delay between a failed attempt and the next:
	// min(initialSeconds * factor^(n-1), maxSeconds) before attempt n+1.
	// +optional
	// +kubebuilder:default={initialSeconds: 10, maxSeconds: 300, factor: 2}
	Backoff *Backoff `json:"backoff,omitempty"`

	// ActiveDeadlineSeconds bounds each attempt, counted from its Job's
	// start: at it the operator keeps what the pods printed and stops the
	// attempt, which fails with DeadlineExceeded. The Job's own
	// activeDeadlineSeconds is 60 s later, a backstop while no operator runs.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=31536000
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// StartTimeoutSeconds: an attempt whose pod is broken, neither running
	// nor finished this long after it was created (image pull failure,
	// missing Secret or ConfigMap, no pod at all), is stopped and fails with
	// StartTimeout instead of hanging. A pod waiting for capacity
	// (Unschedulable) is not broken: see capacityTimeoutSeconds.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	StartTimeoutSeconds *int32 `json:"startTimeoutSeconds,omitempty"`

	// TerminationGracePeriodSeconds is how long a stopped attempt's pods
	// (cancel, Replace, a start, capacity or deadline timeout, a deleted
	// Task) have between SIGTERM and SIGKILL. The task's process never runs
	// as PID 1 (the pod shares its process namespace), so a script that
	// does not handle SIGTERM ends at once; this is the time a script that
	// traps SIGTERM gets to clean up. Unset: 30 (the Kubernetes default).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=300
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// CapacityTimeoutSeconds bounds how long an attempt may wait for
	// capacity (its pods Unschedulable): past it the attempt fails with
	// CapacityTimeout and is retried like any failed attempt. Unset: wait
	// as long as Jobs do. Waiting for capacity is never a StartTimeout.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=604800
	CapacityTimeoutSeconds *int32 `json:"capacityTimeoutSeconds,omitempty"`

	// QueueName is a TaskQueue in the Task's namespace: every attempt of
	// every run (initial, retry, cron slot, run-now) waits for the queue to
	// admit it before its Job is created. A queue that does not exist (yet)
	// is waited for (reason QueueNotFound). May not be combined with the
	// kueue.x-k8s.io/queue-name label. At most 63 characters: the queue's
	// name is a label value on the Jobs it admits.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	QueueName string `json:"queueName,omitempty"`

	// Priority orders a queue's waiting attempts: higher is admitted first;
	// equal priority first come, first served.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=-1000
	// +kubebuilder:validation:Maximum=1000
	Priority int32 `json:"priority,omitempty"`

	// Schedule makes the Task a cron Task: 5 cron fields, an `@hourly`-style
	// descriptor, or `@every <duration>`. Use timeZone instead of CRON_TZ= or
	// TZ= prefixes. Whether a Task has a schedule is fixed at creation.
	// Admission checks each field's values and the descriptor's name; what
	// only the operator's parser sees (a reversed range, a date that never
	// comes, an @every that is not a whole number of seconds of at least
	// 5s) is reported as InvalidSchedule.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('CRON_TZ=') && !self.startsWith('TZ=')",message="spec.schedule cannot carry a CRON_TZ= or TZ= prefix: set spec.timeZone instead"
	// +kubebuilder:validation:XValidation:rule="self.matches(r'^[\\s\\p{Z}]*(@[a-z]+|@every[\\s\\p{Z}]+[^\\s\\p{Z}]+|[^\\s\\p{Z}]+([\\s\\p{Z}]+[^\\s\\p{Z}]+){4})[\\s\\p{Z}]*$')",message="spec.schedule must be 5 space-separated cron fields, an @hourly-style descriptor or '@every <duration>'"
	// +kubebuilder:validation:XValidation:rule="!self.matches(r'^[\\s\\p{Z}]*[^\\s\\p{Z}]+([\\s\\p{Z}]+[^\\s\\p{Z}]+){4}[\\s\\p{Z}]*$') || self.matches(r'^[\\s\\p{Z}]*((\\*|\\?|0*([0-5]?[0-9])(-0*([0-5]?[0-9]))?)(/[0-9]+)?(,(\\*|\\?|0*([0-5]?[0-9])(-0*([0-5]?[0-9]))?)(/[0-9]+)?)*)[\\s\\p{Z}]+[^\\s\\p{Z}]+[\\s\\p{Z}]+[^\\s\\p{Z}]+[\\s\\p{Z}]+[^\\s\\p{Z}]+[\\s\\p{Z}]+[^\\s\\p{Z}]+[\\s\\p{Z}]*$')",message="spec.schedule: the minute field (field 1) must be *, values in 0-59, ranges a-b and steps /n, separated by commas"
	// +kubebuilder:validation:XValidation:rule="!self.matches(r'^[\\s\\p{Z}]*[^\\s\\p{Z}]+([\\s\\p{Z}]+[^\\s\\p{Z}]+){4}[\\s\\p{Z}]*$') || self.matches(r'^[\\s\\p{Z}]*[^\\s\\p{Z}]+[\\s\\p{Z}]+((\\*|\\?|0*([01]?[0-9]|2[0-3])(-0*([01]?[0-9]|2[0-3]))?)(/[0-9]+)?(,(\\*|\\?|0*([01]?[0-9]|2[0-3])(-0*([01]?[0-9]|2[0-3]))?)(/[0-9]+)?)*)[\\s\\p{Z}]+[^\\s\\p{Z}]+[\\s\\p{Z}]+[^\\s\\p{Z}]+[\\s\\p{Z}]+[^\\s\\p{Z}]+[\\s\\p{Z}]*$')",message="spec.schedule: the hour field (field 2) must be *, values in 0-23, ranges a-b and steps /n, separated by commas"
	// +kubebuilder:validation:XValidation:rule="!self.matches(r'^[\\s\\p{Z}]*[^\\s\\p{Z}]+([\\s\\p{Z}]+[^\\s\\p{Z}]+){4}[\\s\\p{Z}]*$') || self.matches(r'^[\\s\\p{Z}]*[^\\s\\p{Z}]+[\\s\\p{Z}]+[^\\s\\p{Z}]+[\\s\\p{Z}]+((\\*|\\?|0*([1-9]|[12][0-9]|3[01])(-0*([1-9]|[12][0-9]|3[01]))?)(/[0-9]+)?(,(\\*|\\?|0*([1-9]|[12][0-9]|3[01])(-0*([1-9]|[12][0-9]|3[01]))?)(/[0-9]+)?)*)[\\s\\p{Z}]+[^\\s\\p{Z}]+[\\s\\p{Z}]+[^\\s\\p{Z}]+[\\s\\p{Z}]*$')",message="spec.schedule: the day-of-month field (field 3) must be *, values in 1-31, ranges a-b and steps /n, separated by commas"
	// +kubebuilder:validation:XValidation:rule="!self.matches(r'^[\\s\\p{Z}]*[^\\s\\p{Z}]+([\\s\\p{Z}]+[^\\s\\p{Z}]+){4}[\\s\\p{Z}]*$') || self.matches(r'^[\\s\\p{Z}]*[^\\s\\p{Z}]+[\\s\\p{Z}]+[^\\s\\p{Z}]+[\\s\\p{Z}]+[^\\s\\p{Z}]+[\\s\\p{Z}]+((\\*|\\?|0*([1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-0*([1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/[0-9]+)?(,(\\*|\\?|0*([1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(-0*([1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(/[0-9]+)?)*)[\\s\\p{Z}]+[^\\s\\p{Z}]+[\\s\\p{Z}]*$')",message="spec.schedule: the month field (field 4) must be *, values in 1-12 or JAN-DEC, ranges a-b and steps /n, separated by commas"
	// +kubebuilder:validation:XValidation:rule="!self.matches(r'^[\\s\\p{Z}]*[^\\s\\p{Z}]+([\\s\\p{Z}]+[^\\s\\p{Z}]+){4}[\\s\\p{Z}]*$') || self.matches(r'^[\\s\\p{Z}]*[^\\s\\p{Z}]+[\\s\\p{Z}]+[^\\s\\p{Z}]+[\\s\\p{Z}]+[^\\s\\p{Z}]+[\\s\\p{Z}]+[^\\s\\p{Z}]+[\\s\\p{Z}]+((\\*|\\?|0*([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-0*([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(/[0-9]+)?(,(\\*|\\?|0*([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(-0*([0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(/[0-9]+)?)*)[\\s\\p{Z}]*$')",message="spec.schedule: the day-of-week field (field 5) must be *, values in 0-6 or SUN-SAT, ranges a-b and steps /n, separated by commas"
	// +kubebuilder:validation:XValidation:rule="!self.matches(r'^[\\s\\p{Z}]*@') || self.matches(r'^[\\s\\p{Z}]*@(yearly|annually|monthly|weekly|daily|midnight|hourly)[\\s\\p{Z}]*$') || self.matches(r'^[\\s\\p{Z}]*@every[\\s\\p{Z}]+[^\\s\\p{Z}]+[\\s\\p{Z}]*$')",message="spec.schedule: unknown descriptor; use @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly or @every <duration>"
	Schedule *string `json:"schedule,omitempty"`

	// TimeZone is the IANA time zone of schedule (for example Europe/Berlin).
	// Empty means UTC.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_+\-/]+$`
	TimeZone *string `json:"timeZone,omitempty"`

	// ConcurrencyPolicy says what happens when a run is due (a cron slot or a
	// run-now token) while another run is active; a run waiting out backoff
	// counts as active. Forbid: a run-now run waits for the active run to
	// end and a cron slot is skipped; Allow: runs overlap; Replace: the
	// active run is stopped.
	// +optional
	// +kubebuilder:default=Forbid
	ConcurrencyPolicy ConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

	// StartingDeadlineSeconds: a slot whose run cannot start this long after
	// the slot is skipped and counted as missed. Unset means no deadline.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// Suspend pauses the Task: no scheduled run starts and a run waiting out
	// backoff does not start its next attempt; an active Job is left to
	// finish. A run started by run-now runs even while suspended.
	// +optional
	// +kubebuilder:default=false
	Suspend *bool `json:"suspend,omitempty"`

	// SuccessfulRunsHistoryLimit is how many succeeded runs keep their Jobs.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	SuccessfulRunsHistoryLimit *int32 `json:"successfulRunsHistoryLimit,omitempty"`

	// FailedRunsHistoryLimit is how many failed runs keep their Jobs.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	FailedRunsHistoryLimit *int32 `json:"failedRunsHistoryLimit,omitempty"`

	// TTLSecondsAfterFinished deletes a finished one-shot Task this long
	// after it finished. Unset keeps it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31536000
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// Image runs a shell Task; it needs /bin/sh. Default: the operator's
	// --shell-image flag. Only for shell Tasks.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$`
	Image string `json:"image,omitempty"`

	// ImagePullPolicy of the Task's container (Always, IfNotPresent,
	// Never), as in a pod. Default: Kubernetes' rule (Always for a
	// `:latest` or untagged image, else IfNotPresent). It applies to the
	// runner image of http Tasks too.
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// Env is passed to the Task's container. Names starting with TASK_HTTP_
	// are reserved for the http runner, and the run context (TASK_NAME,
	// TASK_NAMESPACE, TASK_RUN_ID, TASK_ATTEMPT, TASK_SCHEDULED_TIME) is the
	// operator's.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.all(e, !e.name.startsWith('TASK_HTTP_'))",message="spec.env cannot set names starting with TASK_HTTP_: they are reserved for the http runner"
	// +kubebuilder:validation:XValidation:rule="self.all(e, !(e.name in ['TASK_NAME', 'TASK_NAMESPACE', 'TASK_RUN_ID', 'TASK_ATTEMPT', 'TASK_SCHEDULED_TIME']))",message="spec.env cannot set TASK_NAME, TASK_NAMESPACE, TASK_RUN_ID, TASK_ATTEMPT or TASK_SCHEDULED_TIME: the operator sets them for every pod"
	Env []EnvVar `json:"env,omitempty"`

	// Resources of the Task's container.
	// +optional
	Resources *Resources `json:"resources,omitempty"`

	// ServiceAccountName runs the pods as this ServiceAccount; its token is
	// mounted only when this is set.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`

	// PodMetadata adds labels and annotations to the pods.
	// +optional
	PodMetadata *PodMetadata `json:"podMetadata,omitempty"`

	// NodeSelector is the pods' nodeSelector, as in a pod.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 317 && self[k].size() <= 63)",message="spec.nodeSelector keys must be at most 317 characters and values at most 63 (label keys and values)"
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations are the pods' tolerations, as in a pod.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []Toleration `json:"tolerations,omitempty"`

	// Affinity is the pods' affinity, as in a pod (core/v1 Affinity, with
	// every list bounded: 8 terms per term list, 16 expressions per term, 32
	// values per expression).
	// +optional
	Affinity *Affinity `json:"affinity,omitempty"`

	// PriorityClassName is the pods' PriorityClass.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// ImagePullSecrets name Secrets of the namespace the kubelet pulls the
	// image with (the operator never reads them).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	ImagePullSecrets []LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Volumes of the pods: configMap, secret, emptyDir and
	// persistentVolumeClaim only, so pods stay within the restricted Pod
	// Security Standard.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Volumes []Volume `json:"volumes,omitempty"`

	// VolumeMounts mount spec.volumes into the Task's container.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(m, self.exists_one(o, o.mountPath == m.mountPath))",message="spec.volumeMounts cannot mount two volumes at the same mountPath"
	VolumeMounts []VolumeMount `json:"volumeMounts,omitempty"`

	// WorkingDir is the container's working directory (an absolute path).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/`
	WorkingDir string `json:"workingDir,omitempty"`

	// SecurityContext overrides the user and group the pods run as (default
	// 65532). Never 0: pods stay non-root, within the restricted Pod
	// Security Standard.
	// +optional
	SecurityContext *SecurityContext `json:"securityContext,omitempty"`

	// Notify tells people how runs end: each entry sends a webhook when a
	// run ends in one of its outcomes. The request is made by a
	// notification Job running the runner image (the operator never reads
	// Secret values); a failed notification never changes the run's
	// result.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	Notify []Notification `json:"notify,omitempty"`

	// SuspendAfterFailures: after this many consecutive failed runs a cron
	// Task starts no further slot (phase Suspended, Ready False
	// TooManyFailures). A successful run-now run or a spec change resumes
	// it. Only for cron Tasks.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	SuspendAfterFailures *int32 `json:"suspendAfterFailures,omitempty"`

	// SkipDates are dates on which the schedule's slots do not run (a
	// holiday list): YYYY-MM-DD for that date, --MM-DD for that day every
	// year, in timeZone. A slot on such a date is skipped (a SlotSkipped
	// event says SkipDate) and not counted as missed;
	// status.nextScheduleTime shows the next slot that will run.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=400
	// +kubebuilder:validation:items:Pattern=`^([0-9]{4}-[0-9]{2}-[0-9]{2}|--[0-9]{2}-[0-9]{2})$`
	// +kubebuilder:validation:items:MaxLength=10
	SkipDates []string `json:"skipDates,omitempty"`

	// SkipDatesFrom adds the skip dates listed in a ConfigMap key of the
	// Task's namespace, one per line in the same forms (blank lines and
	// lines starting with # ignored), so many Tasks share one holiday
	// list. The operator reads it when the Task plans, only where the
	// namespace grants it get on the ConfigMap (a RoleBinding). A missing
	// or ungranted ConfigMap or key, or a line it cannot read, is a
	// Warning event and a condition message: the schedule keeps running on
	// skipDates and the lines it could read.
	// +optional
	SkipDatesFrom *ConfigMapKeyRef `json:"skipDatesFrom,omitempty"`

	// SkipCalendars names up to 4 TaskCalendars (cluster-scoped holiday
	// lists the platform team owns) whose dates add to skipDates. A
	// calendar that does not exist is a Warning event and a condition
	// message; the schedule keeps running on the dates it has.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=253
	SkipCalendars []string `json:"skipCalendars,omitempty"`

	// RepeatedTimePolicy: a wall-clock time that happens twice when clocks
	// fall back runs once, at its first occurrence (Once), or at both
	// (Twice). Unset: Once.
	// +optional
	RepeatedTimePolicy RepeatedTimePolicy `json:"repeatedTimePolicy,omitempty"`

	// SkippedTimePolicy: a wall-clock time that does not exist because
	// clocks spring forward is skipped that day (Skip), or runs at the
	// first instant after the gap (RunAfter), once however many slots the
	// gap held. Unset: Skip.
	// +optional
	SkippedTimePolicy SkippedTimePolicy `json:"skippedTimePolicy,omitempty"`

	// Params are the values a run can be given when it starts: each pod of
	// the run gets a param's value in the environment variable
	// TASK_PARAM_<NAME> (the name upper-cased), never substituted into the
	// shell text; http Tasks may use $(params.<name>) in url (percent-encoded
	// there), http.body and header values. A run-now run takes its values
	// from the batch.taskops.io/run-params annotation written with its
	// token; run 0 and cron slots use the defaults. A param without a
	// default must be given when a run starts.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.map(p, has(p.default) ? size(bytes(p.default)) + size(p.name) : 0).sum() <= 4096",message="spec.params: the defaults are at most 4096 bytes in all (names included): a run's values are kept in its status"
	Params []ParamSpec `json:"params,omitempty"`

	// Results are the values a run hands back: a shell Task's pod writes
	// result <name> to the file $TASK_RESULTS_DIR/<name>; an http Task
	// takes them from the response (http.results). They land in
	// status.results, the run's history entry and the attempt record.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Results []ResultSpec `json:"results,omitempty"`

	// After names up to 8 Tasks of the same namespace whose finished runs
	// start a run of this Task (docs/chains.md): with afterPolicy All, once
	// each has finished a run matching its on, newer than the one this Task
	// last consumed; with Any, one run per matching upstream run. Each
	// upstream run starts at most one run here. A Task with after and no
	// schedule does not run at creation. Upstream results can become this
	// run's params (params[].fromResult).
	// +optional
	// +listType=map
	// +listMapKey=task
	// +kubebuilder:validation:MaxItems=8
	After []TaskAfter `json:"after,omitempty"`

	// AfterPolicy says when spec.after starts a run: All (the default when
	// empty) or Any.
	// +optional
	AfterPolicy AfterPolicy `json:"afterPolicy,omitempty"`
}

// AfterPolicy says when the upstream Tasks of spec.after start a run.
// +kubebuilder:validation:Enum=All;Any
type AfterPolicy string

const (
	// AfterAll: one run once every upstream Task has a matching finished
	// run newer than the one last consumed; the newest of each is consumed.
	AfterAll AfterPolicy = "All"
	// AfterAny: each matching finished upstream run starts one run.
	AfterAny AfterPolicy = "Any"
)

// AfterOn is an upstream run outcome that starts a run.
// +kubebuilder:validation:Enum=Succeeded;Failed
type AfterOn string

// The outcomes spec.after[].on can name; a stopped run never counts.
const (
	AfterOnSucceeded AfterOn = "Succeeded"
	AfterOnFailed    AfterOn = "Failed"
)

// TaskAfter is one upstream Task of spec.after.
type TaskAfter struct {
	// Task is the upstream Task's name, in this Task's namespace; not this
	// Task.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Task string `json:"task"`

	// On lists the outcomes of the upstream's runs that count: Succeeded
	// (default), Failed, or both. A stopped run never counts.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:default={"Succeeded"}
	On []AfterOn `json:"on,omitempty"`

	// Params take this run's params from the upstream run's results: a
	// result the upstream run did not hand back leaves the param's
	// default; with no default, the run fails with InvalidParams.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Params []AfterParam `json:"params,omitempty"`
}

// AfterParam sets one of this Task's params from an upstream result.
type AfterParam struct {
	// Name is a param of this Task (spec.params).
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]{0,31}$`
	Name string `json:"name"`

	// FromResult names a result of the upstream Task (its spec.results).
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]{0,31}$`
	FromResult string `json:"fromResult"`
}

// BackfillState is where a backfill request stands.
// +kubebuilder:validation:Enum=Running;Finished;Refused;Cancelled
type BackfillState string

const (
	// BackfillRunning: slots of the range are still to start or running.
	BackfillRunning BackfillState = "Running"
	// BackfillFinished: every slot of the range started and finished.
	BackfillFinished BackfillState = "Finished"
	// BackfillRefused: the request cannot be done (its message says why);
	// nothing started.
	BackfillRefused BackfillState = "Refused"
	// BackfillCancelled: a cancel token stopped it; no further slot starts.
	BackfillCancelled BackfillState = "Cancelled"
)

// BackfillStatus is the progress of a backfill request.
type BackfillStatus struct {
	// Token is the request's batch.taskops.io/backfill value (a new value
	// is a new request).
	// +kubebuilder:validation:MaxLength=256
	Token string `json:"token"`
	// From and To are the range's ends (batch.taskops.io/backfill-range).
	// +optional
	From *metav1.Time `json:"from,omitempty"`
	// +optional
	To *metav1.Time `json:"to,omitempty"`
	// State is where the request stands.
	State BackfillState `json:"state"`
	// Message says why a request was refused, or how it ended.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// Total, Started and Finished count the range's slots: all of them,
	// those whose run started (or was there already), those whose run
	// ended.
	Total    int32 `json:"total"`
	Started  int32 `json:"started"`
	Finished int32 `json:"finished"`
	// Cursor is the newest slot of the range started so far: slots are
	// started oldest first, so every slot up to it has its run.
	// +optional
	Cursor *metav1.Time `json:"cursor,omitempty"`
}

// RepeatedTimePolicy says how a wall-clock time that happens twice runs.
// +kubebuilder:validation:Enum=Once;Twice
type RepeatedTimePolicy string

const (
	// RepeatedOnce: at its first occurrence only (the default).
	RepeatedOnce RepeatedTimePolicy = "Once"
	// RepeatedTwice: at both occurrences, an hour (or the shift) apart.
	RepeatedTwice RepeatedTimePolicy = "Twice"
)

// SkippedTimePolicy says how a wall-clock time that does not exist runs.
// +kubebuilder:validation:Enum=Skip;RunAfter
type SkippedTimePolicy string

const (
	// SkippedSkip: not that day (the default).
	SkippedSkip SkippedTimePolicy = "Skip"
	// SkippedRunAfter: at the first instant after the gap.
	SkippedRunAfter SkippedTimePolicy = "RunAfter"
)

// ConfigMapKeyRef names a key of a ConfigMap in the Task's namespace.
type ConfigMapKeyRef struct {
	// Name of the ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Key in the ConfigMap's data.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// ParamSpec declares one value a run can be given.
type ParamSpec struct {
	// Name of the param: TASK_PARAM_<NAME> in the pods, $(params.<name>)
	// in an http Task's request.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]{0,31}$`
	Name string `json:"name"`

	// Default is the value when a run is given none (at most 1 KiB of
	// UTF-8). Without it the value is required: a run-now run that does not
	// give it fails InvalidParams, and so does run 0.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="size(bytes(self)) <= 1024",message="a param's default is at most 1024 bytes"
	Default *string `json:"default,omitempty"`

	// Description says what the param is for.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Description string `json:"description,omitempty"`
}

// ResultSpec declares one value a run hands back.
type ResultSpec struct {
	// Name of the result: the file $TASK_RESULTS_DIR/<name> of a shell
	// Task, an entry of http.results of an http Task.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]{0,31}$`
	Name string `json:"name"`

	// Description says what the result is.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Description string `json:"description,omitempty"`
}

// HTTPResult says where in an http Task's response one result is.
type HTTPResult struct {
	// Name of a result declared in spec.results.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]{0,31}$`
	Name string `json:"name"`

	// From is `statusCode`, `header:<Header-Name>` (the first value of that
	// response header) or `jsonPath:<expression>` over the response body
	// (kubectl's JSONPath syntax, for example {.id} or {.items[0].name}).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^(statusCode|header:[!#$%&'*+.^_|~0-9A-Za-z-]+|jsonPath:.+)$`
	From string `json:"from"`
}

// NotifyOn is a run outcome a notification is sent for.
// +kubebuilder:validation:Enum=Failed;Succeeded;Recovered
type NotifyOn string

const (
	// NotifyOnFailed: the run failed for good (its retries are spent, or it
	// cannot be retried).
	NotifyOnFailed NotifyOn = "Failed"
	// NotifyOnSucceeded: the run succeeded (a recovery too).
	NotifyOnSucceeded NotifyOn = "Succeeded"
	// NotifyOnRecovered: the run succeeded and the run that finished before
	// it had failed.
	NotifyOnRecovered NotifyOn = "Recovered"
)

// NotifyFormat is the body a notification sends.
// +kubebuilder:validation:Enum=json;slack
type NotifyFormat string

const (
	// NotifyFormatJSON posts the outcome document (docs/notifications.md).
	NotifyFormatJSON NotifyFormat = "json"
	// NotifyFormatSlack posts a Slack-compatible message: {"text": "..."}.
	NotifyFormatSlack NotifyFormat = "slack"
)

// Notification is one webhook told about run outcomes.
//
// YAML 1.1, which kubectl reads manifests with, takes an unquoted `on`
// key for the boolean true (as GitHub Actions users know): write "on".
// The field is therefore checked by a rule whose message says so, not by
// the schema's bare "Required value".
// +kubebuilder:validation:XValidation:rule="has(self.url) != has(self.urlFrom)",message="a notification needs exactly one of url or urlFrom"
// +kubebuilder:validation:XValidation:rule="has(self.on)",message="spec.notify[].on is required: list Failed, Succeeded and/or Recovered; in YAML quote the key (\"on\": [Failed]): an unquoted on is read as the boolean true"
type Notification struct {
	// On lists the outcomes this webhook is told about: Failed,
	// Succeeded, Recovered. In YAML write the key quoted, "on".
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=3
	On []NotifyOn `json:"on,omitempty"`

	// URL is the webhook, an absolute http:// or https:// URL.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="spec.notify[].url must be an absolute http:// or https:// URL with a host"
	URL string `json:"url,omitempty"`

	// URLFrom takes the webhook URL from a Secret key (a Slack webhook URL
	// is a credential); it is never printed.
	// +optional
	URLFrom *HeaderValueSource `json:"urlFrom,omitempty"`

	// Headers sent with the request, as in spec.http.headers.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Headers []HTTPHeader `json:"headers,omitempty"`

	// Format of the body: json (the outcome document, default) or slack.
	// +optional
	// +kubebuilder:default=json
	Format NotifyFormat `json:"format,omitempty"`
}

// LocalObjectReference names an object in the Task's namespace.
type LocalObjectReference struct {
	// Name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// Volume is a volume of the pods: exactly one of its sources is set.
// +kubebuilder:validation:XValidation:rule="(has(self.configMap) ? 1 : 0) + (has(self.secret) ? 1 : 0) + (has(self.emptyDir) ? 1 : 0) + (has(self.persistentVolumeClaim) ? 1 : 0) == 1",message="a volume needs exactly one of configMap, secret, emptyDir or persistentVolumeClaim"
type Volume struct {
	// Name of the volume, which volumeMounts refer to.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// ConfigMap mounts a ConfigMap, as in a pod.
	// +optional
	ConfigMap *ConfigMapVolumeSource `json:"configMap,omitempty"`

	// Secret mounts a Secret, as in a pod (the kubelet reads it; the
	// operator never does).
	// +optional
	Secret *SecretVolumeSource `json:"secret,omitempty"`

	// EmptyDir is a scratch directory, as in a pod.
	// +optional
	EmptyDir *EmptyDirVolumeSource `json:"emptyDir,omitempty"`

	// PersistentVolumeClaim mounts a claim of the namespace, as in a pod.
	// +optional
	PersistentVolumeClaim *PersistentVolumeClaimVolumeSource `json:"persistentVolumeClaim,omitempty"`
}

// VolumeMount mounts one of spec.volumes into the Task's container.
type VolumeMount struct {
	// Name of the volume in spec.volumes.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// MountPath is where, an absolute path.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/`
	MountPath string `json:"mountPath"`

	// ReadOnly mounts the volume read-only.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`

	// SubPath mounts one path within the volume (relative, without "..").
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.split('/').exists(p, p == '..')",message="subPath must be a relative path without '..'"
	SubPath string `json:"subPath,omitempty"`
}

// SecurityContext is the part of a pod's security context a Task may set.
type SecurityContext struct {
	// RunAsUser is the pods' user id (not 0).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483647
	RunAsUser *int64 `json:"runAsUser,omitempty"`

	// RunAsGroup is the pods' primary group id (not 0).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483647
	RunAsGroup *int64 `json:"runAsGroup,omitempty"`

	// FSGroup owns the pods' volumes that support it (not 0).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483647
	FSGroup *int64 `json:"fsGroup,omitempty"`
}

// Backoff is the exponential delay between attempts.
// +kubebuilder:validation:XValidation:rule="self.maxSeconds >= self.initialSeconds",message="spec.backoff.maxSeconds must be greater than or equal to spec.backoff.initialSeconds"
type Backoff struct {
	// InitialSeconds is the delay before the second attempt.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	InitialSeconds int32 `json:"initialSeconds"`

	// MaxSeconds caps the delay.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	MaxSeconds int32 `json:"maxSeconds"`

	// Factor multiplies the delay after each failed attempt.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	Factor int32 `json:"factor"`

	// JitterPercent spreads the delays: each is drawn uniformly from
	// [delay x (1 - p/100), delay], the same on every look at the same
	// attempt (it is derived from the Task, run and attempt), so many Tasks
	// failing at once do not all retry at once.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	JitterPercent int32 `json:"jitterPercent,omitempty"`
}

// HTTPMethod is the method of an http Task's request.
// +kubebuilder:validation:Enum=GET;HEAD;POST;PUT;PATCH;DELETE;OPTIONS
type HTTPMethod string

// HTTPSpec is the request of an http Task beyond its URL.
type HTTPSpec struct {
	// Method of the request.
	// +optional
	// +kubebuilder:default=GET
	Method HTTPMethod `json:"method,omitempty"`

	// Headers sent with the request, in order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Headers []HTTPHeader `json:"headers,omitempty"`

	// Body of the request.
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Body string `json:"body,omitempty"`

	// SuccessCodes are the status codes that count as success. Empty means
	// any 2xx.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Minimum=100
	// +kubebuilder:validation:items:Maximum=599
	SuccessCodes []int32 `json:"successCodes,omitempty"`

	// TimeoutSeconds bounds the whole request, redirects and body included.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	TimeoutSeconds int32 `json:"timeoutSeconds,omitempty"`

	// RetryAllFailures retries every failed request as maxRetry allows. By
	// default an unexpected 4xx status other than 408, 425 and 429 (the
	// request itself is wrong: 404, 401, 422, ...) ends the run
	// NotRetryable after that attempt.
	// +optional
	RetryAllFailures bool `json:"retryAllFailures,omitempty"`

	// Results take the run's results (spec.results) from the response:
	// its status code, a header or a field of its JSON body. A result that
	// cannot be taken (no such header, a body that is not JSON, no such
	// field) is left out and named in the attempt's message; it does not
	// fail the run.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Results []HTTPResult `json:"results,omitempty"`
}

// HTTPHeader is one request header: a literal value or one taken from a
// Secret by the kubelet (the operator never reads Secret values).
// +kubebuilder:validation:XValidation:rule="has(self.value) != has(self.valueFrom)",message="a header needs exactly one of value or valueFrom"
type HTTPHeader struct {
	// Name of the header.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[!#$%&'*+.^_|~0-9A-Za-z-]+$`
	Name string `json:"name"`

	// Value is a literal header value, without CR, LF or NUL.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^[^\r\n\x00]*$`
	Value *string `json:"value,omitempty"`

	// ValueFrom takes the value from a Secret key.
	// +optional
	ValueFrom *HeaderValueSource `json:"valueFrom,omitempty"`
}

// HeaderValueSource is where a header's value comes from.
type HeaderValueSource struct {
	// SecretKeyRef selects a key of a Secret in the Task's namespace.
	// +required
	SecretKeyRef KeySelector `json:"secretKeyRef"`
}

// KeySelector selects a key of a Secret or ConfigMap in the Task's namespace.
type KeySelector struct {
	// Name of the Secret or ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Key within it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +kubebuilder:validation:XValidation:rule="self != '.' && !self.startsWith('..')",message="a key cannot be '.' or start with '..'"
	Key string `json:"key"`

	// Optional: when true, a missing Secret or key does not keep the pod
	// from starting.
	// +optional
	Optional *bool `json:"optional,omitempty"`
}

// EnvVar is an environment variable of the Task's container.
// +kubebuilder:validation:XValidation:rule="!(has(self.value) && has(self.valueFrom))",message="an env entry takes value or valueFrom, not both"
type EnvVar struct {
	// Name of the variable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z][-._a-zA-Z0-9]*$`
	Name string `json:"name"`

	// Value is a literal value (larger values belong in a ConfigMap).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Value *string `json:"value,omitempty"`

	// ValueFrom takes the value from a Secret, a ConfigMap or the pod.
	// +optional
	ValueFrom *EnvVarSource `json:"valueFrom,omitempty"`
}

// EnvVarSource is where an env value comes from; exactly one field is set.
// +kubebuilder:validation:XValidation:rule="(has(self.secretKeyRef) ? 1 : 0) + (has(self.configMapKeyRef) ? 1 : 0) + (has(self.fieldRef) ? 1 : 0) == 1",message="valueFrom needs exactly one of secretKeyRef, configMapKeyRef or fieldRef"
type EnvVarSource struct {
	// SecretKeyRef selects a key of a Secret.
	// +optional
	SecretKeyRef *KeySelector `json:"secretKeyRef,omitempty"`
	// ConfigMapKeyRef selects a key of a ConfigMap.
	// +optional
	ConfigMapKeyRef *KeySelector `json:"configMapKeyRef,omitempty"`
	// FieldRef selects a field of the pod, as in a pod's env (for example
	// metadata.name or metadata.annotations['x']).
	// +optional
	FieldRef *FieldSelector `json:"fieldRef,omitempty"`
}

// FieldSelector selects a field of the pod.
type FieldSelector struct {
	// FieldPath is the path of the field, e.g. metadata.name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	FieldPath string `json:"fieldPath"`
}

// Resources are the compute resources of the Task's container.
//
// The isQuantity rules matter: the schema's quantity pattern accepts values
// such as "1e1.5" that no client can decode, and one undecodable Task would
// break the operator's list of every Task.
type Resources struct {
	// Limits, e.g. {cpu: 500m, memory: 128Mi}.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, isQuantity(string(self[k])))",message="spec.resources.limits values must be Kubernetes quantities such as 500m, 1, 128Mi or 1e3"
	Limits corev1.ResourceList `json:"limits,omitempty"`
	// Requests, e.g. {cpu: 100m, memory: 64Mi}.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, isQuantity(string(self[k])))",message="spec.resources.requests values must be Kubernetes quantities such as 100m, 1, 64Mi or 1e3"
	Requests corev1.ResourceList `json:"requests,omitempty"`
}

// PodMetadata is added to the pods' metadata. Keys the operator and the Job
// controller own are refused.
type PodMetadata struct {
	// Labels added to the pods.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 317 && self[k].size() <= 63)",message="spec.podMetadata.labels keys must be at most 317 characters and values at most 63"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('batch.taskops.io/') && !k.startsWith('batch.kubernetes.io/') && k != 'job-name' && k != 'controller-uid' && k != 'app.kubernetes.io/managed-by')",message="spec.podMetadata.labels cannot set batch.taskops.io/*, batch.kubernetes.io/*, job-name, controller-uid or app.kubernetes.io/managed-by"
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations added to the pods (values up to 1024 characters). Keys
	// that could weaken the pod's security are refused: AppArmor and
	// seccomp profiles set by annotation, SELinux, and container runtime
	// annotations.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('batch.taskops.io/') && !k.startsWith('batch.kubernetes.io/') && k != 'job-name' && k != 'controller-uid' && k != 'app.kubernetes.io/managed-by')",message="spec.podMetadata.annotations cannot set batch.taskops.io/*, batch.kubernetes.io/*, job-name, controller-uid or app.kubernetes.io/managed-by"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.size() <= 317 && self[k].size() <= 1024)",message="spec.podMetadata.annotations keys must be at most 317 characters and values at most 1024"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !['apparmor', 'seccomp', 'selinux'].exists(w, k.lowerAscii().contains(w)) && !['io.kubernetes.cri', 'io.containerd.', 'io.katacontainers.', 'run.oci.'].exists(p, k.startsWith(p)))",message="spec.podMetadata.annotations cannot set security-relevant annotations (keys naming AppArmor, seccomp or SELinux; container runtime keys io.kubernetes.cri*, io.containerd.*, io.katacontainers.*, run.oci.*): Task pods keep the restricted Pod Security Standard"
	Annotations map[string]string `json:"annotations,omitempty"`
}

// TaskPhase is a one-word summary of a Task's state.
// +kubebuilder:validation:Enum=Pending;Queued;Running;Retrying;Succeeded;Failed;Scheduled;Suspended
type TaskPhase string

const (
	PhasePending TaskPhase = "Pending"
	// PhaseQueued: an attempt waits for its TaskQueue to admit it.
	PhaseQueued    TaskPhase = "Queued"
	PhaseRunning   TaskPhase = "Running"
	PhaseRetrying  TaskPhase = "Retrying"
	PhaseSucceeded TaskPhase = "Succeeded"
	PhaseFailed    TaskPhase = "Failed"
	PhaseScheduled TaskPhase = "Scheduled"
	PhaseSuspended TaskPhase = "Suspended"
)

// RunResult is how a run ended.
// +kubebuilder:validation:Enum=Running;Succeeded;Failed;Stopped;Cancelled
type RunResult string

const (
	// RunResultRunning: the run has not finished (it may be waiting out backoff).
	RunResultRunning RunResult = "Running"
	// RunResultSucceeded: an attempt succeeded.
	RunResultSucceeded RunResult = "Succeeded"
	// RunResultFailed: the run failed for good.
	RunResultFailed RunResult = "Failed"
	// RunResultStopped: the run was stopped (replaced) before it finished.
	RunResultStopped RunResult = "Stopped"
	// RunResultCancelled: a cancel token stopped the run; it is not retried.
	RunResultCancelled RunResult = "Cancelled"
)

// AttemptResult is how an attempt ended.
// +kubebuilder:validation:Enum=Succeeded;Failed;Stopped
type AttemptResult string

const (
	// AttemptResultSucceeded: the attempt's Job completed.
	AttemptResultSucceeded AttemptResult = "Succeeded"
	// AttemptResultFailed: the attempt's Job failed (or was deleted).
	AttemptResultFailed AttemptResult = "Failed"
	// AttemptResultStopped: the operator stopped the attempt (start
	// timeout, replaced, cancelled).
	AttemptResultStopped AttemptResult = "Stopped"
)

// AttemptRecord is what the status keeps of one attempt of the newest run,
// so it survives the pruning of its Job.
type AttemptRecord struct {
	// Attempt is the attempt's number in its run, from 1.
	Attempt int32 `json:"attempt"`

	// JobName is the attempt's Job (it may be gone).
	// +kubebuilder:validation:MaxLength=63
	JobName string `json:"jobName"`

	// StartTime is when the attempt's Job was created.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the attempt ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Result is how the attempt ended; empty while it runs.
	// +optional
	Result AttemptResult `json:"result,omitempty"`

	// Reason says why a failed or stopped attempt ended (PodFailed,
	// DeadlineExceeded, StartTimeout, JobDeleted, Replaced, Cancelled, ...).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason Reason `json:"reason,omitempty"`

	// ExitCode is the exit code of the attempt's task container, when a
	// pod of it terminated (the failed one, if any failed).
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`

	// Message is the tail of what the attempt said.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`

	// Cluster is the worker cluster that ran the attempt, when Kueue's
	// MultiKueue dispatched it there (its Workload's status.clusterName,
	// the MultiKueueCluster's name): its pods and their logs are there.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster,omitempty"`

	// Params are the values the attempt's run started with (spec.params).
	// +optional
	Params map[string]string `json:"params,omitempty"`

	// Results are what the attempt handed back (spec.results), kept for a
	// failed attempt too.
	// +optional
	Results map[string]string `json:"results,omitempty"`

	// LostWorkers are the worker clusters the attempt was taken from
	// before it ended, oldest first: Kueue dispatches an attempt again
	// when its worker is lost (unreachable for MultiKueue's
	// workerLostTimeout) or evicts it there. Each says when the operator
	// saw the attempt leave it.
	// +optional
	// +kubebuilder:validation:MaxItems=5
	LostWorkers []LostWorker `json:"lostWorkers,omitempty"`
}

// LostWorker is a worker cluster an attempt was taken from.
type LostWorker struct {
	// Cluster is the MultiKueueCluster's name.
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`
	// Time is when the operator saw the attempt leave it.
	Time metav1.Time `json:"time"`
}

// MaxActiveListed is the most running Jobs status.active lists (the
// schema's bound); status.activeOmitted counts the rest.
const MaxActiveListed = 100

// TaskStatus is what the operator observed of a Task's runs.
type TaskStatus struct {
	// Phase summarises the Task.
	// +optional
	Phase TaskPhase `json:"phase,omitempty"`

	// Attempts started in the newest run (currentRun); never decreases
	// within a run.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// RetryCount is attempts - 1, never below 0.
	// +optional
	RetryCount int32 `json:"retryCount,omitempty"`

	// CurrentRun is the id of the newest run, in progress or last finished.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	CurrentRun string `json:"currentRun,omitempty"`

	// LastJobName is the name of the newest child Job.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	LastJobName string `json:"lastJobName,omitempty"`

	// Active lists the running child Jobs, by name, at most
	// MaxActiveListed of them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Active []corev1.ObjectReference `json:"active,omitempty"`

	// ActiveOmitted counts the running Jobs that status.active leaves out
	// (it lists at most MaxActiveListed); 0 when it lists them all.
	// +optional
	ActiveOmitted int32 `json:"activeOmitted,omitempty"`

	// StartTime is when the current (or last) run started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the current (or last) run finished.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// NextRetryTime is when the next attempt starts, while Retrying.
	// +optional
	NextRetryTime *metav1.Time `json:"nextRetryTime,omitempty"`

	// LastScheduleTime is the slot of the newest scheduled run.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`

	// NextScheduleTime is the next slot of a cron Task.
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`

	// LastSuccessfulTime is when a run last succeeded.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`

	// LastRunNowToken is the sha256 (hex) of the last consumed run-now token.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	LastRunNowToken string `json:"lastRunNowToken,omitempty"`

	// LastFinishedRunNowToken is the run-now token, as written in the
	// annotation, of the newest finished run that a token started (at most
	// 256 characters; a longer token is not recorded). It changes in the
	// same status write that records that run's end, so
	// `kubectl wait --for=jsonpath='{.status.lastFinishedRunNowToken}'=T`
	// after annotating run-now=T returns only once that run has ended, and
	// Ready/Failed then tell its outcome. Use a fresh token for every run.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	LastFinishedRunNowToken string `json:"lastFinishedRunNowToken,omitempty"`

	// Backfill is where the newest backfill request stands
	// (batch.taskops.io/backfill and batch.taskops.io/backfill-range).
	// +optional
	Backfill *BackfillStatus `json:"backfill,omitempty"`

	// Results are the results (spec.results) of the newest finished run,
	// as in its history entry: `kubectl get task NAME -o
	// jsonpath='{.status.results.<name>}'` reads one.
	// +optional
	Results map[string]string `json:"results,omitempty"`

	// LastCancelToken is the sha256 (hex) of the last consumed cancel token.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	LastCancelToken string `json:"lastCancelToken,omitempty"`

	// LastError is the reason of the last failed attempt plus the tail of its
	// output.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	LastError string `json:"lastError,omitempty"`

	// LastErrorJobName is the Job of the attempt lastError is about (for a
	// Job that was deleted, the name it had). The operator reads an
	// attempt's output once: a lastError already about this Job stays.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	LastErrorJobName string `json:"lastErrorJobName,omitempty"`

	// History lists the last runs, newest first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	History []RunRecord `json:"history,omitempty"`

	// AttemptRecords lists the attempts of the newest run (currentRun),
	// newest first: each attempt's Job, times, result, reason, exit code and
	// message, kept after its Job is pruned.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	AttemptRecords []AttemptRecord `json:"attemptRecords,omitempty"`

	// ConsecutiveFailures counts the runs that failed in a row since the
	// last successful run or the last spec change (a new generation):
	// what spec.suspendAfterFailures is compared with.
	// +optional
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`

	// Queued lists the attempts waiting for admission by spec.queueName,
	// oldest first. A Task holds at most this many places in the line.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Queued []QueuedAttempt `json:"queued,omitempty"`

	// After records, per upstream Task of spec.after, the newest of its
	// runs this Task consumed (started a run from, or skipped on a skip
	// date): a run is never consumed twice. Rebuilt from history[].trigger
	// when lost.
	// +optional
	// +listType=map
	// +listMapKey=task
	// +kubebuilder:validation:MaxItems=8
	After []AfterStatus `json:"after,omitempty"`

	// LastFinishedTrigger is the trigger of the newest finished run that
	// spec.after started, written in the status write that records its
	// end: `kubectl wait --for=jsonpath='{.status.lastFinishedTrigger.runID}'=ID`
	// waits for the run an upstream run started (docs/chains.md).
	// +optional
	LastFinishedTrigger *FinishedTrigger `json:"lastFinishedTrigger,omitempty"`

	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Failed, Reconciling, Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RunRecord is one run in the history.
type RunRecord struct {
	// RunID is the run's id: "0", "s<unix seconds>" or "m<hash>".
	// +kubebuilder:validation:MaxLength=32
	RunID string `json:"runID"`

	// Generation of the Task the run started with.
	// +optional
	Generation int64 `json:"generation,omitempty"`

	// ScheduledTime is the slot of a scheduled run.
	// +optional
	ScheduledTime *metav1.Time `json:"scheduledTime,omitempty"`

	// Attempts the run started.
	Attempts int32 `json:"attempts"`

	// Result of the run.
	Result RunResult `json:"result"`

	// StartTime is when the run's first attempt was created.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the run finished.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Reason says, as a CamelCase word, how the run ended: Succeeded,
	// RetriesExhausted, NotRetryable, Replaced or Cancelled; empty while it
	// runs.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason Reason `json:"reason,omitempty"`

	// Message says how the run ended.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// Notification says where the run's notification (spec.notify) stands:
	// Pending from the run's end until it is sent (its Job may not exist
	// yet: a create the API server refuses for a while is tried again),
	// then Sent or Failed. Empty: no notification is due for the run.
	// +optional
	Notification NotificationState `json:"notification,omitempty"`

	// NotificationJob names the run's notification Job once the operator
	// created it. A Pending notification without it has no Job yet; one
	// with it whose Job is gone was deleted before it finished, and is not
	// sent again (never two Jobs for one run).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	NotificationJob string `json:"notificationJob,omitempty"`

	// Params are the values the run started with (spec.params): a run-now
	// run's from its batch.taskops.io/run-params annotation, defaults
	// filled in; other runs' the defaults.
	// +optional
	Params map[string]string `json:"params,omitempty"`

	// Results are what the run handed back (spec.results): those of its
	// newest attempt that gave any, kept when the run failed.
	// +optional
	Results map[string]string `json:"results,omitempty"`
	// Trigger lists the upstream runs that started this run (spec.after);
	// empty for other runs.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Trigger []TriggerRef `json:"trigger,omitempty"`
}

// TriggerRef is one upstream run that started a run.
type TriggerRef struct {
	// Task is the upstream Task.
	// +kubebuilder:validation:MaxLength=253
	Task string `json:"task"`
	// RunID is its run.
	// +kubebuilder:validation:MaxLength=32
	RunID string `json:"runID"`
	// CompletionTime is when that run finished: what orders its runs.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// AfterStatus is the newest run of one upstream Task this Task consumed.
type AfterStatus struct {
	// Task is the upstream Task.
	// +kubebuilder:validation:MaxLength=253
	Task string `json:"task"`
	// LastConsumedRunID is its newest run consumed.
	// +kubebuilder:validation:MaxLength=32
	LastConsumedRunID string `json:"lastConsumedRunID"`
	// LastConsumedTime is when that run finished: an upstream run counts
	// when it finished later.
	// +optional
	LastConsumedTime *metav1.Time `json:"lastConsumedTime,omitempty"`
}

// FinishedTrigger is a finished run that spec.after started.
type FinishedTrigger struct {
	// RunID is this Task's run.
	// +kubebuilder:validation:MaxLength=32
	RunID string `json:"runID"`
	// Result is how it ended.
	Result RunResult `json:"result"`
	// Trigger lists the upstream runs that started it.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Trigger []TriggerRef `json:"trigger"`
}

// NotificationState is where a run's notification stands.
// +kubebuilder:validation:Enum=Pending;Sent;Failed
type NotificationState string

const (
	// NotificationPending: due and not yet sent: its Job runs, or is not
	// created yet (the API server refused it for a reason that may pass,
	// and the create is tried again until the notification deadline).
	NotificationPending NotificationState = "Pending"
	// NotificationSent: every webhook of the run's notification accepted
	// it.
	NotificationSent NotificationState = "Sent"
	// NotificationFailed: a webhook refused it or could not be reached in
	// 3 attempts, the API server refused its Job for a reason that will
	// not pass (or for any reason until the deadline passed), or its Job
	// was deleted before it finished.
	NotificationFailed NotificationState = "Failed"
)

// Task runs a shell command or an HTTP call as Kubernetes Jobs, with
// retries, an optional cron schedule and a status CI can wait on.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tk,categories=taskops
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Attempts",type=integer,JSONPath=`.status.attempts`
// +kubebuilder:printcolumn:name="Queue",type=string,JSONPath=`.spec.queueName`,priority=1
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`,priority=1
// +kubebuilder:printcolumn:name="After",type=string,JSONPath=`.spec.after[*].task`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Last-Error",type=string,JSONPath=`.status.lastError`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(self.spec.after) || self.spec.after.all(a, a.task != self.metadata.name)",message="spec.after cannot name the Task itself"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS-1123 label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit (no dots)"
type Task struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TaskSpec `json:"spec"`

	// +optional
	Status TaskStatus `json:"status,omitempty"`
}

// TaskList is a list of Tasks.
//
// +kubebuilder:object:root=true
type TaskList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Task `json:"items"`
}
