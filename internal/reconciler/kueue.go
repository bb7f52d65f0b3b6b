package reconciler

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/status"
)

// Kueue, when a Task carries the kueue.x-k8s.io/queue-name label: its Jobs
// are created suspended with Kueue's labels (internal/jobs), and Kueue
// admits them by unsuspending them. The operator does not depend on Kueue:
// it reads and patches Kueue's Workloads as unstructured objects, and only
// for such Tasks.

// +kubebuilder:rbac:groups=kueue.x-k8s.io,resources=workloads,verbs=list;patch

// workloadGVK is the Kueue API the operator uses (Kueue v0.17 serves
// v1beta2).
var workloadGVK = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "Workload"}

// kueueJobUIDLabel is the label Kueue puts on the Workload of a Job: the
// Job's UID.
const kueueJobUIDLabel = "kueue.x-k8s.io/job-uid"

// kueueInstalled reports whether the API server serves Kueue's Workloads.
// Without Kueue a Job created suspended would never start: such a Task is
// InvalidSpec instead of waiting forever.
func (r *TaskReconciler) kueueInstalled() (bool, error) {
	_, err := r.Client.RESTMapper().RESTMapping(workloadGVK.GroupKind(), workloadGVK.Version)
	switch {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}

// noKueue is the problem of a Task labelled for Kueue where Kueue is not
// installed.
func noKueue(task *v1alpha1.Task) *status.Problem {
	return &status.Problem{Reason: v1alpha1.ReasonInvalidSpec, Message: fmt.Sprintf(
		"the label %s=%s asks Kueue to admit the Task's Jobs, but the cluster does not serve Kueue's API (%s): a Job created suspended would never start; install Kueue or remove the label",
		v1alpha1.LabelKueueQueueName, task.Labels[v1alpha1.LabelKueueQueueName], workloadGVK.GroupVersion())}
}

// workloadOf finds the Kueue Workload of an attempt's Job, by the Job's
// UID (the cached Job has it): nil when the Job is gone or Kueue has not
// made one yet. Read once per pass (a remote attempt's worker, why Kueue
// holds it, its start check and its output all ask).
func (p *pass) workloadOf(ctx context.Context, jobName string) (*unstructured.Unstructured, error) {
	if wl, ok := p.workloads[jobName]; ok {
		return wl, nil
	}
	job := &batchv1.Job{}
	if err := p.r.Client.Get(ctx, ctrl.ObjectKey{Namespace: p.task.Namespace, Name: jobName}, job); err != nil {
		return nil, ctrl.IgnoreNotFound(err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(workloadGVK.GroupVersion().WithKind("WorkloadList"))
	if err := p.r.APIReader.List(ctx, list, ctrl.InNamespace(p.task.Namespace), ctrl.MatchingLabels{kueueJobUIDLabel: string(job.UID)}); err != nil {
		return nil, err
	}
	var wl *unstructured.Unstructured
	if len(list.Items) > 0 {
		wl = &list.Items[0]
	}
	p.workloads = setKey(p.workloads, jobName, wl)
	return wl, nil
}

// heldByKueue is why Kueue holds a Job: its Workload's QuotaReserved
// condition message while it has none ("couldn't assign flavors ...:
// insufficient unused quota ..."), else the message of an admission check
// not passed yet (MultiKueue's), or that it is pending.
func (p *pass) heldByKueue(ctx context.Context, jobName string) (string, error) {
	wl, err := p.workloadOf(ctx, jobName)
	if err != nil || wl == nil {
		return "held by Kueue: no Workload yet", err
	}
	conds, _, _ := unstructured.NestedSlice(wl.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "QuotaReserved" && m["status"] == "False" {
			if msg, _ := m["message"].(string); msg != "" {
				return fmt.Sprintf("held by Kueue (Workload %s): %s", wl.GetName(), msg), nil
			}
		}
	}
	// Quota reserved, an admission check not passed yet: MultiKueue
	// looking for a worker with room ("The workload got reservation on
	// ..."), or retrying after a lost worker.
	checks, _, _ := unstructured.NestedSlice(wl.Object, "status", "admissionChecks")
	for _, c := range checks {
		m, _ := c.(map[string]any)
		if state, _ := m["state"].(string); state != "Ready" {
			if msg, _ := m["message"].(string); msg != "" {
				return fmt.Sprintf("held by Kueue (Workload %s): admission check %v %s: %s", wl.GetName(), m["name"], state, msg), nil
			}
		}
	}
	return fmt.Sprintf("held by Kueue (Workload %s): waiting for admission", wl.GetName()), nil
}

// deactivateWorkload stops Kueue from running a Job again: a suspended
// Job Kueue had admitted is unsuspended by Kueue within seconds, so
// stopping an attempt of a Kueue-managed Task also sets its Workload's
// spec.active to false, which keeps the Job suspended and releases its
// quota. Its record (the Job) stays.
func (p *pass) deactivateWorkload(ctx context.Context, jobName string) error {
	wl, err := p.workloadOf(ctx, jobName)
	if err != nil || wl == nil {
		return err
	}
	if active, found, _ := unstructured.NestedBool(wl.Object, "spec", "active"); found && !active {
		return nil
	}
	patch := []byte(`{"spec":{"active":false}}`)
	if err := p.r.Client.Patch(ctx, wl, ctrl.RawPatch(types.MergePatchType, patch)); err != nil {
		return ctrl.IgnoreNotFound(err)
	}
	log.FromContext(ctx).Info("deactivated Kueue Workload", "workload", wl.GetName(), "job", jobName)
	return nil
}
