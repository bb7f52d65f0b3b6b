// Package v1alpha1 holds what `kubectl task` prints with -o json|yaml for
// a run (group cli.taskops.io, version v1alpha1): a TaskRunView, or a
// List of them. No API server serves these types; they are the plugin's
// output contract, so a script can decode every run verb's output into
// one Go type (docs/kubectl-task.md, "Output").
//
// +kubebuilder:object:generate=true
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	taskv1alpha1 "github.com/taskops/task-operator/api/v1alpha1"
)

// GroupVersion is the apiVersion of a TaskRunView.
var GroupVersion = schema.GroupVersion{Group: "cli.taskops.io", Version: "v1alpha1"}

// Kind is the kind of a TaskRunView.
const Kind = "TaskRunView"

// TaskRunView is one run of a Task as `kubectl task` prints it for the
// verbs about one run: run --wait, trigger --wait, wait, cancel --wait,
// results, and (as the items of a List) history.
//
// +kubebuilder:object:root=true
type TaskRunView struct {
	metav1.TypeMeta `json:",inline"`

	// Task is the Task's name.
	Task string `json:"task"`

	// Namespace is the Task's namespace.
	Namespace string `json:"namespace"`

	// RunID is the run's id: "0" (a one-shot Task's run), "s<unix
	// seconds>" (a scheduled run) or "m<hash>" (a run-now run); empty
	// when the Task failed before any run started (an invalid spec).
	RunID string `json:"runID"`

	// Phase is where the run stands: Running, Succeeded, Failed, Stopped
	// or Cancelled (the run's result in status.history); Pending when the
	// Task has not started a run yet.
	Phase string `json:"phase"`

	// Reason says, as a CamelCase word, why the run ended (Succeeded,
	// RetriesExhausted, NotRetryable, StartTimeout, Cancelled, ...): one
	// of the reasons in docs/reference/reasons.md; empty while it runs.
	// +optional
	Reason taskv1alpha1.Reason `json:"reason,omitempty"`

	// Message says how the run ended, or what it waits for.
	// +optional
	Message string `json:"message,omitempty"`

	// Attempts the run started.
	Attempts int32 `json:"attempts"`

	// Params are the values the run started with (spec.params).
	// +optional
	Params map[string]string `json:"params,omitempty"`

	// Results are what the run handed back (spec.results).
	// +optional
	Results map[string]string `json:"results,omitempty"`

	// StartTime is when the run's first attempt was created.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when the run finished.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// Trigger lists the upstream runs that started the run (spec.after).
	// +optional
	Trigger []taskv1alpha1.TriggerRef `json:"trigger,omitempty"`
}

// TaskRunViewList is what `kubectl task history -o json|yaml` prints: a
// List (apiVersion v1, kind List, as kubectl prints several objects) of
// TaskRunViews, newest run first.
//
// +kubebuilder:object:root=true
type TaskRunViewList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`

	Items []TaskRunView `json:"items"`
}

// ListKind is the apiVersion and kind a TaskRunViewList is printed with.
var ListKind = metav1.TypeMeta{APIVersion: "v1", Kind: "List"}

// TypeMeta is the apiVersion and kind a TaskRunView is printed with.
func TypeMeta() metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: Kind}
}
