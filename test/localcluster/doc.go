// Package localcluster is the project's local Kubernetes control plane: a
// real etcd, kube-apiserver, kube-controller-manager and kube-scheduler,
// plus a node: a real one (a kubelet with containerd and runc: pods run real
// containers) or a kwok node (kwok plays the kubelet and simulates the pods,
// for scale), or both. `make demo`, `make run`, the end-to-end tests and the
// benchmarks all use it: the suites through test/harness, which calls it
// directly, and people and scripts through hack/local-cluster.sh (the
// command in hack/local-cluster).
//
// A Cluster lives in one state folder, DIR; several run side by side in
// different folders (every port is picked free at Up). DIR holds:
//
//	kubeconfig          admin kubeconfig (exists only while the cluster is up)
//	cluster.json        ports, bin folder, node mode, settings (State, for Go)
//	cluster.env         the same as KEY=value lines, for shell scripts
//	logs/NAME.log       one per component (NAME.log.prev: the run before); kept by Down
//	pids/NAME.pid       one per component
//	pki/                CA, serving and client certificates, service-account
//	                    key pair, the components' kubeconfigs
//	etcd/               etcd data
//	kube-*/             the components' self-signed serving certs
//	kwok/               kwok's HOME
//	node/               the real node: containerd, CNI and kubelet state and config
//
// Up on a running cluster with the same Settings reuses it; otherwise every
// Up starts from an empty etcd. Components run in a session of their own, so
// a Ctrl-C meant for the caller does not stop them halfway; Down does.
//
// What lives where:
//
//   - cluster.go: Cluster, Up, Down, Status, LoadImages, StartKubelet;
//   - settings.go: what a caller may ask for (Settings, from the
//     environment) and the node modes;
//   - state.go: what Up records for the other commands and for callers;
//   - process.go: starting, finding and stopping the components;
//   - ports.go, pki.go, kubeconfig.go: free ports, certificates, kubeconfigs;
//   - components.go: each control-plane component's command line, the kwok node;
//   - api.go: the few API calls readiness needs (standard library only);
//   - realnode.go, realnode_host.go, realnode_config.go: the real node
//     (containerd, kubelet, images) and what it needs from the host
//     (bridge, cgroups, mounts, host paths); docs/local-cluster.md has the
//     facts behind each setting.
//
// Everything the cluster serves or advertises is on this machine: loopback,
// and the real node's bridge (no route out, forwarding untouched).
package localcluster
