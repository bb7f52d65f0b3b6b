package retry

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Refusal is why the Job controller could not create an attempt's pods:
// the message of its newest FailedCreate event, and whether the refusal
// can clear by itself (a ResourceQuota that is used up: the attempt waits
// for capacity) rather than never (a LimitRange violation, a request larger
// than a quota's whole limit, a missing ServiceAccount, a webhook's no).
type Refusal struct {
	Capacity bool
	Message  string
}

// quotaRefusalWording is how the ResourceQuota admission plugin begins
// its refusal ("exceeded quota: q, requested: ..., used: ..., limited:
// ..."). The Job controller passes on only the API server's message, so
// this one phrase is matched; a test runs it against the real API
// server's message, so a change of wording fails a test rather than
// turning a wait into a failure.
const quotaRefusalWording = "exceeded quota"

// QuotaRefusal reports whether the API server's message is a
// ResourceQuota's refusal.
func QuotaRefusal(message string) bool { return strings.Contains(message, quotaRefusalWording) }

// ClassifyRefusal decides, from the structure of the namespace's quotas
// and the pod's own resources, whether a refusal of an attempt's pods
// waits for capacity. Only a quota refusal can: when the pod asks for no
// more than every (unscoped) quota's whole hard limit, the quota is merely
// used up and frees up as other pods end. A pod that asks for more than a
// quota's hard limit can never be created, and a LimitRange's minimum,
// maximum or ratio is violated whatever else runs: both are broken, and
// the attempt ends StartTimeout with the refusal in its message.
//
// requests and limits are the pod's container resources (one container);
// a resource without a request counts its limit, as Kubernetes defaults
// it. Quotas with scopes are not compared (whether a scope selects the pod
// is not known here): a refusal they cause waits, as before.
func ClassifyRefusal(message string, requests, limits corev1.ResourceList, quotas []corev1.ResourceQuota) Refusal {
	if !QuotaRefusal(message) {
		return Refusal{Message: message}
	}
	for i := range quotas {
		q := &quotas[i]
		if len(q.Spec.Scopes) > 0 || q.Spec.ScopeSelector != nil {
			continue
		}
		if over := overHardLimit(q.Spec.Hard, requests, limits); over != "" {
			return Refusal{Message: fmt.Sprintf("%s (the pod asks for more than ResourceQuota %s allows in all: %s)", message, q.Name, over)}
		}
	}
	return Refusal{Capacity: true, Message: message}
}

// overHardLimit names the first resource (in name order) for which one pod
// asks for more than hard allows in all, "" when none.
func overHardLimit(hard, requests, limits corev1.ResourceList) string {
	names := make([]string, 0, len(hard))
	for name := range hard {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, name := range names {
		limit := hard[corev1.ResourceName(name)]
		asked, ok := podAsks(corev1.ResourceName(name), requests, limits)
		if ok && asked.Cmp(limit) > 0 {
			return fmt.Sprintf("%s %s > %s", name, asked.String(), limit.String())
		}
	}
	return ""
}

// podAsks is what one pod counts against a quota's resource name.
func podAsks(name corev1.ResourceName, requests, limits corev1.ResourceList) (resource.Quantity, bool) {
	switch {
	case name == corev1.ResourcePods || name == "count/pods":
		return *resource.NewQuantity(1, resource.DecimalSI), true
	case strings.HasPrefix(string(name), "limits."):
		q, ok := limits[corev1.ResourceName(strings.TrimPrefix(string(name), "limits."))]
		return q, ok
	case strings.HasPrefix(string(name), "requests."):
		return requested(corev1.ResourceName(strings.TrimPrefix(string(name), "requests.")), requests, limits)
	case name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage:
		return requested(name, requests, limits)
	}
	return resource.Quantity{}, false
}

func requested(name corev1.ResourceName, requests, limits corev1.ResourceList) (resource.Quantity, bool) {
	if q, ok := requests[name]; ok {
		return q, true
	}
	q, ok := limits[name]
	return q, ok
}

// AgainAfter is how long after a create the API server refused for a
// reason that may pass (a webhook it could not call, a 5xx, a 429) the
// create is tried again, given how long the refusals have lasted: a
// quarter of that, at least 1 s and at most 30 s. A webhook back after
// 20 s costs seconds, not a minute; a long outage costs a try every 30 s.
// Nothing but the start of the refusals is kept, so a restarted operator
// keeps the same pace.
func AgainAfter(refusedFor time.Duration) time.Duration {
	return min(max(refusedFor/4, time.Second), 30*time.Second)
}
