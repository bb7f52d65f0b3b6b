package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TaskQueueSpec caps how many attempts of the queue's Tasks run at once.
type TaskQueueSpec struct {
	// MaxRunning is the most attempts of the queue's Tasks that are active
	// at any instant (active: a Job exists and has not finished). Lowering
	// it stops nothing: nothing new is admitted until fewer run.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxRunning int32 `json:"maxRunning"`

	// Suspend admits nothing new while true; active attempts finish.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
}

// TaskQueueStatus is the queue's admission record and its counts.
type TaskQueueStatus struct {
	// Admitted is the admission record: the Job names of the attempts that
	// hold a place (admitted, their Job not finished), sorted. It is the
	// single source of truth of the cap: an attempt's Job is created only
	// once its name is here, and this list is written with optimistic
	// locking, so two writers never both fill the last place.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:MaxLength=63
	Admitted []string `json:"admitted,omitempty"`

	// Running counts the attempts holding a place (len(admitted)).
	// +optional
	Running int32 `json:"running"`

	// Queued counts the attempts waiting for admission.
	// +optional
	Queued int32 `json:"queued"`

	// AdmittedTotal counts every admission the queue ever made.
	// +optional
	AdmittedTotal int64 `json:"admittedTotal,omitempty"`

	// ObservedGeneration is the generation this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (True: admitting; False with reason Suspended).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TaskQueue admits the attempts of the Tasks naming it (spec.queueName)
// in priority order, first come first served within a priority, at most
// spec.maxRunning at a time.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tq,categories=taskops
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.spec.maxRunning`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.running`
// +kubebuilder:printcolumn:name="Queued",type=integer,JSONPath=`.status.queued`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="a TaskQueue's name must be at most 63 characters: it is a label value on the Jobs it admits"
type TaskQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec TaskQueueSpec `json:"spec"`

	// +optional
	Status TaskQueueStatus `json:"status,omitempty"`
}

// TaskQueueList is a list of TaskQueues.
//
// +kubebuilder:object:root=true
type TaskQueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TaskQueue `json:"items"`
}

// QueuedAttempt is an attempt of a queued Task waiting for admission.
type QueuedAttempt struct {
	// RunID is the attempt's run.
	// +kubebuilder:validation:MaxLength=32
	RunID string `json:"runID"`

	// Attempt is the attempt's number in its run, from 1.
	Attempt int32 `json:"attempt"`

	// JobName is the Job the attempt gets once admitted.
	// +kubebuilder:validation:MaxLength=63
	JobName string `json:"jobName"`

	// ScheduledTime is the slot of a scheduled run.
	// +optional
	ScheduledTime *metav1.Time `json:"scheduledTime,omitempty"`

	// Since is when the attempt became ready to start: the queue's first
	// come, first served order within a priority.
	// Microseconds, so Tasks queued within one second keep their order.
	Since metav1.MicroTime `json:"since"`

	// Params are the values of a run-now run waiting for its first
	// attempt, kept until its Job carries them (spec.params).
	// +optional
	Params map[string]string `json:"params,omitempty"`

	// Trigger lists the upstream runs that started a new run of
	// spec.after waiting here: kept with it so the run records them.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Trigger []TriggerRef `json:"trigger,omitempty"`
}
