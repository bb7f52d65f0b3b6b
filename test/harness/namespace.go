package harness

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
)

// NamespaceDeletion is how far the deletion of a namespace got.
type NamespaceDeletion struct {
	// Gone: the namespace no longer exists.
	Gone bool
	// Namespace is the namespace while it exists.
	Namespace *corev1.Namespace
	// Tasks and WithFinalizer count its Tasks and those still holding the
	// operator's finalizer; Jobs and Pods count what is left of them.
	Tasks, WithFinalizer, Jobs, Pods int
}

// ObserveNamespaceDeletion looks at namespace ns being deleted.
func ObserveNamespaceDeletion(ctx context.Context, c client.Client, ns string) (NamespaceDeletion, error) {
	var d NamespaceDeletion
	got := &corev1.Namespace{}
	err := c.Get(ctx, types.NamespacedName{Name: ns}, got)
	if apierrors.IsNotFound(err) {
		d.Gone = true
		return d, nil
	}
	if err != nil {
		return d, err
	}
	d.Namespace = got
	var tasks v1alpha1.TaskList
	if err := c.List(ctx, &tasks, client.InNamespace(ns)); err != nil {
		return d, err
	}
	d.Tasks = len(tasks.Items)
	for i := range tasks.Items {
		if HasFinalizer(&tasks.Items[i]) {
			d.WithFinalizer++
		}
	}
	var jobs batchv1.JobList
	var pods corev1.PodList
	if err := c.List(ctx, &jobs, client.InNamespace(ns)); err == nil {
		d.Jobs = len(jobs.Items)
	}
	if err := c.List(ctx, &pods, client.InNamespace(ns)); err == nil {
		d.Pods = len(pods.Items)
	}
	return d, nil
}

// String says what still holds the namespace, for a test's progress.
func (d NamespaceDeletion) String() string {
	if d.Gone {
		return "gone"
	}
	var conds []string
	for _, c := range d.Namespace.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			conds = append(conds, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	return fmt.Sprintf("namespace %s; %d Tasks (%d with the finalizer), %d Jobs, %d pods; conditions %v",
		d.Namespace.Status.Phase, d.Tasks, d.WithFinalizer, d.Jobs, d.Pods, conds)
}
