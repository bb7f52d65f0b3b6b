package reconciler

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/jobs"
	"github.com/taskops/task-operator/internal/plan"
	"github.com/taskops/task-operator/internal/status"
)

// observePolicy applies what the operator checks of a spec against its
// cluster and namespace. A Task labelled for Kueue needs Kueue's API
// (kueue.go), and its dispatch label a Kueue queue (jobs.DispatchProblem). When the manager runs with --service-accounts-opt-in, a Task
// naming a ServiceAccount runs only in a namespace that opted in with the
// batch.taskops.io/allow-service-accounts annotation; the Namespace is read
// from the API server (namespaces are not cached), only for such Tasks.
// nil when there is nothing to check.
func (p *pass) observePolicy(ctx context.Context) (*plan.PolicyCheck, error) {
	var check *plan.PolicyCheck // nil: nothing checked
	if problem := jobs.DispatchProblem(p.task); problem != "" {
		return &plan.PolicyCheck{Refused: &status.Problem{Reason: v1alpha1.ReasonInvalidSpec, Message: problem}}, nil
	}
	if jobs.KueueManaged(p.task) {
		installed, err := p.r.kueueInstalled()
		if err != nil {
			return nil, err
		}
		if !installed {
			return &plan.PolicyCheck{Refused: noKueue(p.task)}, nil
		}
		check = &plan.PolicyCheck{}
	}
	sa := p.task.Spec.ServiceAccountName
	if !p.r.ServiceAccountOptIn || sa == "" {
		return check, nil
	}
	ns := &corev1.Namespace{}
	if err := p.r.APIReader.Get(ctx, ctrl.ObjectKey{Name: p.task.Namespace}, ns); err != nil {
		return nil, err
	}
	if ns.Annotations[v1alpha1.AnnotationAllowServiceAccounts] == "true" {
		return &plan.PolicyCheck{}, nil
	}
	return &plan.PolicyCheck{Refused: &status.Problem{Reason: v1alpha1.ReasonInvalidSpec, Message: fmt.Sprintf(
		"spec.serviceAccountName %q: namespace %s has not opted in to Tasks that name a ServiceAccount (the operator runs with --service-accounts-opt-in); a namespace admin opts in with the annotation %s=true",
		sa, p.task.Namespace, v1alpha1.AnnotationAllowServiceAccounts)}}, nil
}
