package localcluster

import (
	"context"
	"fmt"
	"path/filepath"
)

const (
	serviceCIDR = "10.96.0.0/16"
	serviceIP   = "10.96.0.1" // first address of serviceCIDR: the `kubernetes` Service
	// kwok hands out its simulated pods' IPs from here: loopback, so nothing
	// that dials one can leave the machine; roomy for benchmarks.
	kwokPodCIDR = "127.64.0.0/10"
	// The kwok node's address, also on loopback: the API server dials "the
	// kubelet" there for logs and exec, and must never reach past the machine.
	kwokNodeIP   = "127.0.0.10"
	kwokNodeName = "kwok-node-0"
)

// kcmControllers are the controllers this project relies on. node-lifecycle
// removes the new node's not-ready taint (nothing schedules without it);
// serviceaccount(-token) and root-ca-certificate-publisher make service
// accounts and their tokens work; ttl-after-finished honours
// Job.spec.ttlSecondsAfterFinished; the pod garbage collector fails pods
// that can never run (say, created just before their namespace began
// terminating), or such a namespace never goes away; the deployment and
// replicaset controllers run the operator deployed from config/default (the
// e2e suite does); the resourcequota controller counts what ResourceQuotas
// allow, so a quota can refuse pods (queues, capacity); the
// clusterrole-aggregation controller fills view/edit/admin with the roles
// aggregated into them (config/rbac, tested by the e2e suite).
const kcmControllers = "job-controller,cronjob-controller,garbage-collector-controller,namespace-controller," +
	"node-lifecycle-controller,serviceaccount-controller,serviceaccount-token-controller," +
	"root-ca-certificate-publisher-controller,ttl-after-finished-controller,pod-garbage-collector-controller," +
	"deployment-controller,replicaset-controller,resourcequota-controller,clusterrole-aggregation-controller"

func (c *Cluster) startEtcd(st State) error {
	peer := "http://127.0.0.1:" + st.EtcdPeerPort
	return c.start("etcd", nil, filepath.Join(st.BinDir, "etcd"),
		"--name=local",
		"--data-dir="+c.path("etcd"),
		"--listen-client-urls=http://127.0.0.1:"+st.EtcdPort,
		"--advertise-client-urls=http://127.0.0.1:"+st.EtcdPort,
		"--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer,
		"--initial-cluster=local="+peer,
		"--initial-cluster-state=new",
		"--log-level=warn")
}

func (c *Cluster) startAPIServer(st State) error {
	pki := c.path("pki")
	args := []string{filepath.Join(st.BinDir, "kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:" + st.EtcdPort,
		"--bind-address=" + st.APIServerHost,
		"--advertise-address=" + st.APIServerHost,
		// The endpoint reconciler refuses a loopback advertise address, and
		// nothing runs in-cluster to need the `kubernetes` Service's endpoints.
		"--endpoint-reconciler-type=none",
		"--secure-port=" + st.APIServerPort,
		// Keeps the API server from writing under /var/run/kubernetes.
		"--cert-dir=" + c.path("kube-apiserver"),
		"--tls-cert-file=" + filepath.Join(pki, "apiserver.crt"),
		"--tls-private-key-file=" + filepath.Join(pki, "apiserver.key"),
		"--client-ca-file=" + filepath.Join(pki, "ca.crt"),
		// The controller-manager and scheduler read this CA from
		// kube-system/extension-apiserver-authentication for their own /healthz
		// authentication and log an error every few seconds when it is
		// missing. The allowed name is one no certificate here carries, so no
		// client can use request headers to pose as another user.
		"--requestheader-client-ca-file=" + filepath.Join(pki, "ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--authorization-mode=Node,RBAC",
		"--service-account-key-file=" + filepath.Join(pki, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(pki, "sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=" + serviceCIDR,
	}
	if st.NodeMode != NodeKwok {
		// With a real node it serves on the bridge address (APIServerHost),
		// so that pods reach it without kube-proxy, and reaches the kubelet
		// there with a client certificate (kubectl logs/exec).
		args = append(args,
			"--kubelet-client-certificate="+filepath.Join(pki, "apiserver-kubelet-client.crt"),
			"--kubelet-client-key="+filepath.Join(pki, "apiserver-kubelet-client.key"),
			"--kubelet-preferred-address-types=InternalIP")
	}
	if p := c.Settings.AuditPolicy; p != "" {
		// The benchmarks count each controller's writes exactly from it,
		// so it is one file: maxsize 0 turns off the rotation at 100 MB
		// (a 10,000-Task run writes several hundred MB).
		args = append(args, "--audit-policy-file="+p, "--audit-log-path="+c.path("logs", "audit.log"),
			"--audit-log-format=json", "--audit-log-mode=blocking", "--audit-log-maxsize=0")
	}
	return c.start("kube-apiserver", nil, args...)
}

// componentArgs are a control-plane component's binary and the flags every
// one of them takes: its own kubeconfig for the API server and for
// delegated authentication and authorization, and its secure port on
// loopback with a certificate of its own.
func (c *Cluster) componentArgs(st State, name, port string) []string {
	kcfg := c.path("pki", name+".kubeconfig")
	return []string{filepath.Join(st.BinDir, name),
		"--kubeconfig=" + kcfg,
		"--authentication-kubeconfig=" + kcfg,
		"--authorization-kubeconfig=" + kcfg,
		"--bind-address=127.0.0.1",
		"--secure-port=" + port,
		"--cert-dir=" + c.path(name),
	}
}

func (c *Cluster) startControllerManager(st State) error {
	// Each controller runs as its own service account (as in kubeadm
	// clusters), so RBAC applies to controllers the way it does in production.
	return c.start("kube-controller-manager", nil, append(c.componentArgs(st, "kube-controller-manager", st.KCMPort),
		"--leader-elect=false",
		"--controllers="+kcmControllers,
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+c.path("pki", "sa.key"),
		"--root-ca-file="+c.path("pki", "ca.crt"),
		fmt.Sprintf("--kube-api-qps=%d", c.Settings.KCMQPS),
		fmt.Sprintf("--kube-api-burst=%d", c.Settings.KCMBurst),
		fmt.Sprintf("--terminated-pod-gc-threshold=%d", c.Settings.PodGC))...)
}

func (c *Cluster) startScheduler(st State) error {
	return c.start("kube-scheduler", nil, append(c.componentArgs(st, "kube-scheduler", st.SchedulerPort),
		"--leader-elect=false")...)
}

func (c *Cluster) startKwok(st State) error {
	// HOME inside DIR: kwok also reads ~/.kwok/kwok.yaml when present, and a
	// user's own kwok configuration must not change this cluster.
	return c.start("kwok", []string{"HOME=" + c.path("kwok")}, filepath.Join(st.BinDir, "kwok"),
		"--kubeconfig="+c.path("pki", "kwok.kubeconfig"),
		"--config="+filepath.Join(c.Root, "hack", "kwok", "stages.yaml"),
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr="+kwokPodCIDR,
		"--node-lease-duration-seconds=40")
}

// createKwokNode registers the node kwok plays. kwok's node-initialize
// stage keeps the capacity and addresses set here. The InternalIP (each
// pod's hostIP) is on loopback, where nothing answers as a kubelet (kubectl
// logs/exec of a simulated pod fail at once) and nothing can leave the
// machine.
func (c *Cluster) createKwokNode(ctx context.Context, a *api) error {
	pods := fmt.Sprint(c.Settings.NodePods)
	resources := map[string]string{"cpu": "1000", "memory": "1Ti", "pods": pods}
	node := map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{
			"name":        kwokNodeName,
			"annotations": map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			"labels": map[string]string{"type": "kwok", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
				"kubernetes.io/hostname": kwokNodeName, "node-role.kubernetes.io/agent": ""},
		},
		"status": map[string]any{
			"addresses":   []map[string]string{{"type": "InternalIP", "address": kwokNodeIP}, {"type": "Hostname", "address": kwokNodeName}},
			"allocatable": resources,
			"capacity":    resources,
		},
	}
	if err := a.create(ctx, "/api/v1/nodes", node); err != nil {
		return fmt.Errorf("creating node %s: %w", kwokNodeName, err)
	}
	c.logf("created node %s (pods: %s)", kwokNodeName, pods)
	return nil
}
