package localcluster

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Node modes (LOCAL_CLUSTER_NODE).
const (
	NodeReal = "real" // a kubelet with containerd and runc: real containers
	NodeKwok = "kwok" // kwok simulates the pods (scale, other machines)
	NodeBoth = "both" // one of each
	NodeAuto = "auto" // real when this machine can run it, else kwok (saying why)
)

// Settings are what a caller may ask of a cluster. A running cluster whose
// settings differ from those asked for is restarted by Up, so a benchmark
// asking for KCMQPS=100 never measures a cluster left at 20.
type Settings struct {
	Node        string        // LOCAL_CLUSTER_NODE: NodeReal, NodeKwok, NodeBoth or NodeAuto (default)
	KCMQPS      int           // KCM_QPS: kube-controller-manager --kube-api-qps (default 20, its own default)
	KCMBurst    int           // KCM_BURST: --kube-api-burst (default 30)
	NodePods    int           // LOCAL_CLUSTER_NODE_PODS: pods the kwok node holds (default 1000)
	PodGC       int           // LOCAL_CLUSTER_POD_GC_THRESHOLD: kube-controller-manager --terminated-pod-gc-threshold (default 12500, its own default)
	Timeout     time.Duration // LOCAL_CLUSTER_TIMEOUT (seconds): each readiness step of Up (default 120 s)
	AuditPolicy string        // LOCAL_CLUSTER_AUDIT_POLICY: an audit policy file; the API server then logs to logs/audit.log
}

// SettingsFromEnv reads Settings from the environment variables named on
// its fields; getenv nil means os.Getenv.
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	s := Settings{Node: getenv("LOCAL_CLUSTER_NODE"), AuditPolicy: getenv("LOCAL_CLUSTER_AUDIT_POLICY")}
	if s.Node == "" {
		s.Node = NodeAuto
	}
	switch s.Node {
	case NodeReal, NodeKwok, NodeBoth, NodeAuto:
	default:
		return s, fmt.Errorf("LOCAL_CLUSTER_NODE must be real, kwok, both or auto, not %s", s.Node)
	}
	ints := []struct {
		env  string
		def  int
		into *int
	}{{"KCM_QPS", 20, &s.KCMQPS}, {"KCM_BURST", 30, &s.KCMBurst}, {"LOCAL_CLUSTER_NODE_PODS", 1000, &s.NodePods},
		{"LOCAL_CLUSTER_POD_GC_THRESHOLD", 12500, &s.PodGC}}
	for _, v := range ints {
		*v.into = v.def
		if raw := getenv(v.env); raw != "" {
			n, err := strconv.Atoi(raw)
			if err != nil || n <= 0 {
				return s, fmt.Errorf("%s must be a positive number, not %q", v.env, raw)
			}
			*v.into = n
		}
	}
	s.Timeout = 120 * time.Second
	if raw := getenv("LOCAL_CLUSTER_TIMEOUT"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n <= 0 {
			return s, fmt.Errorf("LOCAL_CLUSTER_TIMEOUT must be a positive number of seconds, not %q", raw)
		}
		s.Timeout = time.Duration(n) * time.Second
	}
	if s.AuditPolicy != "" {
		abs, err := filepath.Abs(s.AuditPolicy)
		if err != nil {
			return s, err
		}
		if _, err := os.Stat(abs); err != nil {
			return s, fmt.Errorf("LOCAL_CLUSTER_AUDIT_POLICY=%s: %w", s.AuditPolicy, err)
		}
		s.AuditPolicy = abs
	}
	return s, nil
}

// key is the settings as recorded in State.Settings: what decides whether a
// running cluster can be reused.
func (s Settings) key() string {
	audit := s.AuditPolicy
	if audit == "" {
		audit = "none"
	}
	return fmt.Sprintf("node=%s kcm-qps=%d kcm-burst=%d node-pods=%d pod-gc=%d audit=%s controllers=%08x",
		s.Node, s.KCMQPS, s.KCMBurst, s.NodePods, s.PodGC, audit, crc32.ChecksumIEEE([]byte(kcmControllers)))
}

// allComponents in start order; Down stops them in reverse.
var allComponents = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "containerd", "kubelet"}

// componentsFor is what a cluster of that node mode runs.
func componentsFor(mode string) []string {
	c := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
	switch mode {
	case NodeKwok:
		c = append(c, "kwok")
	case NodeReal:
		c = append(c, "containerd", "kubelet")
	case NodeBoth:
		c = append(c, "kwok", "containerd", "kubelet")
	}
	return c
}

// binariesFor is the Kubernetes binaries (hack/k8s-binaries.sh) it needs.
func binariesFor(mode string) []string {
	b := []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"}
	if mode != NodeReal {
		b = append(b, "kwok")
	}
	if mode != NodeKwok {
		b = append(b, "kubelet", "crictl")
	}
	return b
}
