#!/usr/bin/env bash
# The project's local Kubernetes control plane: a real etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler, plus a real node (kubelet,
# containerd, runc) or a kwok node, or both. `make demo`, `make run`, the
# end-to-end tests and the benchmarks all use it.
#
#   hack/local-cluster.sh up|down|status|kubeconfig|start-kubelet [--dir DIR]
#   hack/local-cluster.sh load-image [--dir DIR] ARCHIVE...
#
# It is written in Go: this script builds hack/local-cluster into bin/ (the
# Go build cache makes that quick) and runs it. The commands, settings and
# environment are in hack/local-cluster/main.go; what the cluster is and
# keeps in DIR, in test/localcluster (which the test harness calls
# directly); the facts behind the real node, in docs/local-cluster.md.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
(cd "$root" && go build -o bin/local-cluster ./hack/local-cluster) ||
  { echo "local-cluster: error: could not build hack/local-cluster" >&2; exit 1; }
exec "$root/bin/local-cluster" "$@"
