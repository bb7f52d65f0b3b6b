// Package v1alpha1 contains the v1alpha1 Task API of the batch.taskops.io group.
//
// The user-facing contract these types implement is docs/api.md; field
// names and meanings there are fixed.
//
// +kubebuilder:object:generate=true
// +groupName=batch.taskops.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the Task API.
	GroupVersion = schema.GroupVersion{Group: "batch.taskops.io", Version: "v1alpha1"}

	// SchemeBuilder adds the Task types to a scheme (apimachinery's
	// builder: the API package depends on apimachinery alone).
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the Task types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Task{}, &TaskList{}, &TaskQueue{}, &TaskQueueList{}, &TaskCalendar{}, &TaskCalendarList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
