package reconciler

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// The Warning events the kubelet records for a pod that cannot start name
// the cause; advisory ones do not. Reasons as the kubelet of this
// Kubernetes version records them (seen on the real node).
func TestOnlyStartFailuresNameWhyAPodDidNotStart(t *testing.T) {
	for reason, want := range map[string]bool{
		"Failed":                 true, // ErrImagePull, CreateContainerConfigError ("Error: secret ... not found")
		"FailedMount":            true,
		"FailedCreatePodSandBox": true,
		"ErrImageNeverPull":      true,
		"InspectFailed":          true,
		"FailedScheduling":       false, // waiting for a node is capacity; stale once scheduled
		"MissingClusterDNS":      false, // the local cluster's kubelet has no cluster DNS: on every pod
		"DNSConfigForming":       false,
		"BackOff":                false, // says a pull is retried, not why it failed
	} {
		if got := startFailure(&corev1.Event{Reason: reason}); got != want {
			t.Errorf("startFailure(%s) = %v, want %v", reason, got, want)
		}
	}
}
