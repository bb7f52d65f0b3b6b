// Package v1alpha1 contains the v1alpha1 Task API of the batch.taskops.io group.
//
// The user-facing contract these types implement is shared/spec/task-api.md;
// field names and meanings there are fixed.
//
// +kubebuilder:object:generate=true
// +groupName=batch.taskops.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the Task API.
	GroupVersion = schema.GroupVersion{Group: "batch.taskops.io", Version: "v1alpha1"}

	// SchemeBuilder adds the Task types to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the Task types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
