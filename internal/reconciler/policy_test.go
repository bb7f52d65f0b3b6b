package reconciler_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/taskops/task-operator/api/v1alpha1"
	"github.com/taskops/task-operator/internal/plan"
)

// With --service-accounts-opt-in, a Task that names a ServiceAccount is
// InvalidSpec until its namespace opts in; then it runs (no spec change
// needed), and Tasks that name none are never affected.
func TestAServiceAccountNeedsTheNamespacesOptInWhenTheFlagIsOn(t *testing.T) {
	ns := newNamespace(t)
	named := newTask(ns, "named-sa", manual, func(task *v1alpha1.Task) { task.Spec.ServiceAccountName = "builder" })
	plain := newTask(ns, "no-sa", manual)
	must(t, k8s.Create(ctx, named))
	must(t, k8s.Create(ctx, plain))
	waitCached(t, named)
	waitCached(t, plain)
	r := manualReconciler(nil)
	r.ServiceAccountOptIn = true

	res := reconcileOnce(t, r, named)
	refused := getTask(t, named)
	c := condition(refused, v1alpha1.ConditionReady)
	if refused.Status.Phase != v1alpha1.PhaseFailed || c.Reason != string(v1alpha1.ReasonInvalidSpec) ||
		!strings.Contains(c.Message, v1alpha1.AnnotationAllowServiceAccounts+"=true") || !strings.Contains(c.Message, `"builder"`) {
		t.Fatalf("refused: %s; Ready message %q", statusSummary(refused), c.Message)
	}
	if len(jobsOf(t, named)) != 0 {
		t.Fatal("a Job was created for a refused Task")
	}
	if res.RequeueAfter != plan.PolicyRecheck {
		t.Fatalf("requeue after %s, want the policy recheck %s", res.RequeueAfter, plan.PolicyRecheck)
	}
	reconcileOnce(t, r, plain)
	if len(jobsOf(t, plain)) != 1 {
		t.Fatal("a Task naming no ServiceAccount did not start")
	}

	// The namespace opts in: the same generation now runs.
	nsObj := &corev1.Namespace{}
	must(t, k8s.Get(ctx, client.ObjectKey{Name: ns}, nsObj))
	patch := client.MergeFrom(nsObj.DeepCopy())
	nsObj.Annotations = map[string]string{v1alpha1.AnnotationAllowServiceAccounts: "true"}
	must(t, k8s.Patch(ctx, nsObj, patch))
	eventually(t, "the Task runs after the opt-in", func() (bool, string) {
		_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(named)})
		got := getTask(t, named)
		return err == nil && len(jobsOf(t, named)) == 1, errString(err) + "; " + statusSummary(got)
	})
	if sa := jobsOf(t, named)[0].Spec.Template.Spec.ServiceAccountName; sa != "builder" {
		t.Fatalf("the Job runs as %q", sa)
	}
}
