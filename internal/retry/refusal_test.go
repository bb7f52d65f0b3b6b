package retry

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func quota(name string, hard corev1.ResourceList, scopes ...corev1.ResourceQuotaScope) corev1.ResourceQuota {
	return corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ResourceQuotaSpec{Hard: hard, Scopes: scopes}}
}

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func TestClassifyRefusal(t *testing.T) {
	const exceeded = "pods \"x\" is forbidden: exceeded quota: q, requested: requests.cpu=500m, used: requests.cpu=800m, limited: requests.cpu=1"
	for _, tc := range []struct {
		name              string
		message           string
		requests, limits  corev1.ResourceList
		quotas            []corev1.ResourceQuota
		wantCapacity      bool
		wantMessageSuffix string
	}{
		{name: "a used-up quota the pod fits in waits for capacity", message: exceeded,
			requests: list("cpu", "500m"), quotas: []corev1.ResourceQuota{quota("q", list("requests.cpu", "1"))}, wantCapacity: true},
		{name: "a request above the quota's whole hard limit is broken", message: exceeded,
			requests: list("cpu", "2"), quotas: []corev1.ResourceQuota{quota("q", list("requests.cpu", "1"))},
			wantMessageSuffix: "(the pod asks for more than ResourceQuota q allows in all: requests.cpu 2 > 1)"},
		{name: "a limit above a limits quota is broken", message: exceeded,
			limits: list("memory", "2Gi"), quotas: []corev1.ResourceQuota{quota("mem", list("limits.memory", "1Gi"))},
			wantMessageSuffix: "(the pod asks for more than ResourceQuota mem allows in all: limits.memory 2Gi > 1Gi)"},
		{name: "a limit without a request counts as the request", message: exceeded,
			limits: list("cpu", "3"), quotas: []corev1.ResourceQuota{quota("q", list("cpu", "2"))},
			wantMessageSuffix: "(the pod asks for more than ResourceQuota q allows in all: cpu 3 > 2)"},
		{name: "a quota of zero pods is broken", message: exceeded,
			quotas:            []corev1.ResourceQuota{quota("none", list("pods", "0"))},
			wantMessageSuffix: "(the pod asks for more than ResourceQuota none allows in all: pods 1 > 0)"},
		{name: "a scoped quota is not compared: it waits", message: exceeded,
			requests: list("cpu", "2"), quotas: []corev1.ResourceQuota{quota("q", list("requests.cpu", "1"), corev1.ResourceQuotaScopeNotTerminating)}, wantCapacity: true},
		{name: "a LimitRange violation is broken",
			message: "pods \"x\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"},
		{name: "a missing ServiceAccount is broken",
			message: "pods \"x\" is forbidden: error looking up service account ns/robot: serviceaccount \"robot\" not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ClassifyRefusal(tc.message, tc.requests, tc.limits, tc.quotas)
			if got.Capacity != tc.wantCapacity {
				t.Errorf("Capacity = %v, want %v (%s)", got.Capacity, tc.wantCapacity, got.Message)
			}
			if want := tc.message; tc.wantMessageSuffix != "" {
				want += " " + tc.wantMessageSuffix
				if got.Message != want {
					t.Errorf("Message = %q, want %q", got.Message, want)
				}
			} else if got.Message != tc.message {
				t.Errorf("Message = %q, want the API server's %q", got.Message, tc.message)
			}
		})
	}
}
