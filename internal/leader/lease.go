package leader

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// inClusterNamespacePath holds the namespace of a pod's ServiceAccount; it is
// where controller-runtime finds the default leader election namespace.
const inClusterNamespacePath = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Namespace is the namespace of the leader election Lease: the flag's value
// if set, else the pod's own namespace, read the way controller-runtime's
// leaderelection package does (from the ServiceAccount mount).
func Namespace(flagValue string) (string, error) {
	return namespaceFrom(flagValue, inClusterNamespacePath)
}

func namespaceFrom(flagValue, path string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("leader election needs a namespace for its Lease: not running in a pod (no %s), so pass --leader-election-namespace", path)
	case err != nil:
		return "", fmt.Errorf("leader election: reading the pod's namespace: %w", err)
	}
	ns := strings.TrimSpace(string(b))
	if ns == "" {
		return "", fmt.Errorf("leader election: %s is empty; pass --leader-election-namespace", path)
	}
	return ns, nil
}

// NewLeaseLock builds the Lease lock namespace/name as controller-runtime
// builds it for a manager (pkg/leaderelection.NewResourceLock): a copy of
// cfg with the user agent suffix "leader-election" and a request timeout of
// max(renewDeadline/2, 1 s), so one hung request cannot use up the renew
// deadline; the identity is the host name and a fresh UUID. The lock's
// EventRecorder is left nil: set LockConfig.EventRecorder once the manager
// (and so its recorder) exists, before the manager starts.
func NewLeaseLock(cfg *rest.Config, namespace, name string, renewDeadline time.Duration) (*resourcelock.LeaseLock, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader election identity: %w", err)
	}
	id := host + "_" + string(uuid.NewUUID())

	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	cfg.Timeout = max(renewDeadline/2, time.Second)
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	coordination, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, namespace, name, core, coordination,
		resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return nil, err
	}
	ll, ok := lock.(*resourcelock.LeaseLock)
	if !ok {
		return nil, fmt.Errorf("leader election: resourcelock.New returned a %T, not a Lease lock", lock)
	}
	return ll, nil
}
