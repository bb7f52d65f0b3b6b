// Package e2e holds the end-to-end tests of task-operator: the operator
// runs as its own process (the binary of ./cmd/manager) against the
// project's local control plane (hack/local-cluster.sh: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler) with a real node
// (a kubelet on containerd and runc), so every pod is a real container and
// every failure comes from the shell or the kubelet itself. The release
// image (make image, or E2E_IMAGE_ARCHIVE) is imported into the node for the
// http runner. E2E_NODE sets LOCAL_CLUSTER_NODE; on a machine that cannot run
// a real node the cluster falls back to kwok and the tests whose pods must
// really run are skipped, with the reason.
//
// The tests carry the build tag e2e, so `go test ./...` skips them. Run
//
//	go test -tags e2e ./test/e2e/ -count=1 -timeout 20m -v
//
// (or `make test-e2e`). TestMain brings a fresh cluster up in
// tmp/e2e-cluster (E2E_CLUSTER_DIR), builds the manager (or uses
// E2E_MANAGER_BINARY), runs it with its log in DIR/operator.log, and brings
// everything down at the end; E2E_KEEP_CLUSTER=1 leaves the cluster up for
// a post-mortem (hack/local-cluster.sh down --dir DIR stops it).
package e2e
