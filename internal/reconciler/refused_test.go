package reconciler_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taskops/task-operator/internal/retry"
)

// The refusals retry.ClassifyRefusal reads, as this version's real API
// server words them: the ResourceQuota and LimitRanger admission plugins
// refuse pods here as they refuse the Job controller's. A change of their
// wording fails this test instead of turning a wait into a failure (or a
// failure into a wait for ever).
func TestRefusalsAreClassifiedFromTheRealAPIServersMessages(t *testing.T) {
	ns := newNamespace(t)
	must(t, k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}}))
	must(t, k8s.Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "max-1gi"},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			Max: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}}}))
	q := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("1")}}}
	must(t, k8s.Create(ctx, q))
	// The quota controller (not in envtest) would record the hard limit
	// and what is used; 800m of 1 CPU is used.
	q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{corev1.ResourceRequestsCPU: resource.MustParse("800m")}}
	must(t, k8s.Status().Update(ctx, q))

	refusal := func(name string, requests, limits corev1.ResourceList) string {
		t.Helper()
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "task", Image: "busybox:test",
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits}}}}}
		// The admission plugins read quotas and LimitRanges from their own
		// caches, which see the objects just written a moment later: ask
		// (dry run, nothing is created) until they refuse.
		var err error
		eventually(t, "the API server to refuse pod "+name, func() (bool, string) {
			err = k8s.Create(ctx, pod.DeepCopy(), client.DryRunAll)
			return err != nil, "it was accepted"
		})
		return err.Error()
	}
	cpu := func(v string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}
	}
	var quotas corev1.ResourceQuotaList
	must(t, k8s.List(ctx, &quotas, client.InNamespace(ns)))

	for _, tc := range []struct {
		name             string
		requests, limits corev1.ResourceList
		wantCapacity     bool
		wantIn           string
	}{
		{"used-up", cpu("500m"), cpu("500m"), true, "exceeded quota: team"},
		{"over-the-whole-quota", cpu("2"), nil, false, "asks for more than ResourceQuota team allows in all: requests.cpu 2 > 1"},
		{"over-the-limitrange", cpu("100m"), corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}, false, "maximum memory usage per Container is 1Gi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := refusal(tc.name, tc.requests, tc.limits)
			got := retry.ClassifyRefusal(msg, tc.requests, tc.limits, quotas.Items)
			if got.Capacity != tc.wantCapacity || !strings.Contains(got.Message, tc.wantIn) {
				t.Errorf("the API server said %q; classified as capacity=%v %q, want capacity=%v and %q in the message", msg, got.Capacity, got.Message, tc.wantCapacity, tc.wantIn)
			}
		})
	}
}
