package testutil

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WebhookOutage makes the API server refuse, as a policy engine's webhook
// that is restarting does, every Job created in namespace ns whose labels
// match jobs: a ValidatingWebhookConfiguration with failurePolicy Fail
// whose webhook is a closed port on loopback, so each such create gets
// "Internal error occurred: failed calling webhook" (a 500). It returns
// once the API server refuses such a Job (a dry-run create says so), and
// returns the function that ends the outage, which likewise returns once
// the API server takes such a Job again. The test's cleanup ends it too.
func WebhookOutage(t testing.TB, c client.Client, ns string, jobs *metav1.LabelSelector) (end func()) {
	t.Helper()
	ctx := context.Background()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "outage-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "outage.test.taskops.io",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d/validate", closedPort(t)))},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To(int32(2)),
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			ObjectSelector:          jobs,
		}},
	}
	if err := c.Create(ctx, vwc); err != nil {
		t.Fatalf("starting the webhook outage: %v", err)
	}
	probe := probeJob(ns, jobs)
	refused := func(context.Context) (bool, string) {
		err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return apierrors.IsInternalError(err), fmt.Sprintf("a dry-run create: %v", err)
	}
	Eventually(t, 20*time.Second, 100*time.Millisecond, "the API server to call the closed webhook", refused)
	ended := false
	end = func() {
		t.Helper()
		if ended {
			return
		}
		ended = true
		if err := c.Delete(ctx, vwc); client.IgnoreNotFound(err) != nil {
			t.Fatalf("ending the webhook outage: %v", err)
		}
		Eventually(t, 20*time.Second, 100*time.Millisecond, "the API server to stop calling the webhook", func(context.Context) (bool, string) {
			err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
			return err == nil, fmt.Sprintf("a dry-run create: %v", err)
		})
	}
	t.Cleanup(func() { _ = c.Delete(ctx, vwc) })
	return end
}

// closedPort is a loopback port nothing listens on (one just released).
func closedPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

// probeJob is a Job the outage's selector matches, for dry-run creates.
func probeJob(ns string, sel *metav1.LabelSelector) *batchv1.Job {
	labels := map[string]string{}
	if sel != nil {
		for k, v := range sel.MatchLabels {
			labels[k] = v
		}
		for _, e := range sel.MatchExpressions {
			if e.Operator == metav1.LabelSelectorOpExists || e.Operator == metav1.LabelSelectorOpIn {
				labels[e.Key] = "probe"
				if len(e.Values) > 0 {
					labels[e.Key] = e.Values[0]
				}
			}
		}
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "outage-probe", Labels: labels},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "probe", Image: "busybox:test"}},
		}}},
	}
}
