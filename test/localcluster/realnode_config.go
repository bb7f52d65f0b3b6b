package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// kubeletSysctls are the values the kubelet wants for the sysctls it sets
// at start: files with them are bound over /proc/sys in its own mount
// namespace, so the host's stay as they are.
var kubeletSysctls = map[string]string{"vm/overcommit_memory": "1", "kernel/panic": "10", "kernel/panic_on_oops": "1"}

// writeNodeConfig writes containerd's, the CNI's and the kubelet's
// configuration under node/: everything they keep lives under DIR.
func (c *Cluster) writeNodeConfig(st State) error {
	nd := c.path("node")
	for _, d := range []string{"containerd", "cni/net.d", "cni/ipam", "kubelet/root", "kubelet/pki",
		"kubelet/volume-plugins", "kubelet/pod-logs", "kubelet/sysctl"} {
		if err := os.MkdirAll(filepath.Join(nd, d), 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{
		"containerd/config.toml": fmt.Sprintf(containerdConfig, nd, pauseImage),
		// No gateway, no masquerade, no routes: a pod reaches the bridge
		// address (this machine) and other pods, nothing else.
		"cni/net.d/10-taskops.conflist": fmt.Sprintf(cniConfig, st.BridgeName, nd, st.PodSubnet,
			strings.TrimSuffix(st.BridgeIP, ".1")+".10"),
		// Pods resolve nothing: their own loopback answers no DNS at once,
		// and no query ever goes to this machine's resolver.
		"kubelet/resolv.conf": "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n",
		"kubelet/config.yaml": fmt.Sprintf(kubeletConfig, st.CgroupRoot, nd, st.BridgeIP, st.KubeletPort,
			st.KubeletHealthzPort, c.path("pki", "ca.crt")),
	}
	for k, v := range kubeletSysctls {
		files["kubelet/sysctl/"+k] = v + "\n"
	}
	for name, text := range files {
		p := filepath.Join(nd, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// containerdConfig: %[1]s the node folder, %[2]s the pause image.
const containerdConfig = `# containerd for the local cluster's real node: everything under %[1]s.
version = 2
root = "%[1]s/containerd/root"
state = "%[1]s/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "%[1]s/containerd/containerd.sock"
[ttrpc]
  address = "%[1]s/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "%[1]s/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "%[2]s"
  # Root here may lack CAP_SYS_RESOURCE: runc cannot then lower
  # oom_score_adj, and every sandbox fails without this.
  restrict_oom_score_adj = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "%[1]s/containerd/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "%[1]s/cni/net.d"
    max_conf_num = 1
`

// cniConfig: %[1]s the bridge, %[2]s the node folder, %[3]s the pod subnet,
// %[4]s the first pod address.
const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "taskops-local",
  "plugins": [{
    "type": "bridge",
    "bridge": "%[1]s",
    "isGateway": false,
    "isDefaultGateway": false,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {"type": "host-local", "dataDir": "%[2]s/cni/ipam", "ranges": [[{"subnet": "%[3]s", "rangeStart": "%[4]s"}]]}
  }]
}
`

// kubeletConfig: %[1]s the cgroup root, %[2]s the node folder, %[3]s the
// bridge address, %[4]s and %[5]s the kubelet's and its healthz's ports,
// %[6]s the cluster CA.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 is still supported by 1.37 but refused by default.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %[1]s
containerRuntimeEndpoint: unix://%[2]s/containerd/containerd.sock
address: %[3]s
port: %[4]s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[5]s
# Only clients with a certificate of the cluster CA (the API server) may use
# the kubelet's API; pods' tokens are not accepted.
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: %[6]s}
authorization: {mode: AlwaysAllow}
makeIPTablesUtilChains: false
resolvConf: %[2]s/kubelet/resolv.conf
clusterDomain: cluster.local
volumePluginDir: %[2]s/kubelet/volume-plugins
podLogsDir: %[2]s/kubelet/pod-logs
failSwapOn: false
maxPods: 250
serializeImagePulls: false
# Never garbage-collect the imported images: they cannot be pulled again.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: "1%%", nodefs.inodesFree: "1%%", imagefs.available: "1%%"}
`
