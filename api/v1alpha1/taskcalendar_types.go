package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TaskCalendarSpec is a shared holiday list: dates on which the slots of
// the cron Tasks naming it (spec.skipCalendars) do not run.
type TaskCalendarSpec struct {
	// Dates are the skip dates, in the forms of a Task's skipDates:
	// YYYY-MM-DD for that date, --MM-DD for that day every year, each in
	// the timeZone of the Task that names the calendar.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	// +kubebuilder:validation:items:Pattern=`^([0-9]{4}-[0-9]{2}-[0-9]{2}|--[0-9]{2}-[0-9]{2})$`
	// +kubebuilder:validation:items:MaxLength=10
	Dates []string `json:"dates,omitempty"`

	// Description says whose calendar this is, for people.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`
}

// TaskCalendarStatus is reserved for the calendar's conditions.
type TaskCalendarStatus struct {
	// Conditions of the calendar.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TaskCalendar is a holiday list the platform team owns for the whole
// cluster: a cron Task names up to 4 in spec.skipCalendars, and their
// dates add to its spec.skipDates. Cluster-scoped, so the operator reads
// it without any access to the namespaces' ConfigMaps.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=tcal,categories=taskops
// +kubebuilder:printcolumn:name="Description",type=string,JSONPath=`.spec.description`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TaskCalendar struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec TaskCalendarSpec `json:"spec,omitempty"`

	// +optional
	Status TaskCalendarStatus `json:"status,omitempty"`
}

// TaskCalendarList is a list of TaskCalendars.
//
// +kubebuilder:object:root=true
type TaskCalendarList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TaskCalendar `json:"items"`
}
