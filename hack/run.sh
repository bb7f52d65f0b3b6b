#!/usr/bin/env bash
# `make run`: run the operator on this machine, in the foreground.
#
#   hack/run.sh [--local] [MANAGER FLAG ...]
#
# - When the current kubeconfig's cluster answers (a /readyz check of a few
#   seconds), the CRD is installed there (`kubectl apply --server-side -f
#   config/crd/bases`) and the operator runs against it.
# - Otherwise, or with --local, the project's local control plane is started
#   (or reused: hack/local-cluster.sh up, state in tmp/local-cluster or
#   $LOCAL_CLUSTER_DIR), the CRD is installed there, and the operator runs
#   against it. Its pods run on a real node when this machine can run one,
#   else on a kwok node that simulates them (hack/local-cluster.sh says which).
#
# Ctrl-C stops the operator. A local cluster keeps running; stop it with
# `hack/local-cluster.sh down`.
#
# The operator is built into bin/manager and run with --log-format=console
# --metrics-bind-address=0 --health-probe-bind-address=0; MANAGER FLAGs come
# after those and win (e.g. `hack/run.sh --log-level=debug`, or
# `make run ARGS=--log-level=debug`).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

say() { printf 'run: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

local_only=false
if [ "${1:-}" = --local ]; then
  local_only=true
  shift
fi

kubectl_dir=$(hack/k8s-binaries.sh kubectl) || die "could not get the project's kubectl (hack/k8s-binaries.sh kubectl)"
kubectl=$kubectl_dir/kubectl

# reachable: a kubeconfig with a current context, and its API server's
# /readyz answering "ok" within a few seconds.
reachable() {
  "$kubectl" config current-context >/dev/null 2>&1 || return 1
  local out
  if command -v timeout >/dev/null; then
    out=$(timeout 8 "$kubectl" --request-timeout=5s get --raw=/readyz 2>/dev/null) || return 1
  else
    out=$("$kubectl" --request-timeout=5s get --raw=/readyz 2>/dev/null) || return 1
  fi
  [ "$out" = ok ]
}

use_local=true
if ! $local_only; then
  if reachable; then
    use_local=false
  elif [ -n "${KUBECONFIG:-}" ] || [ -f "$HOME/.kube/config" ]; then
    say "the current kubeconfig's cluster ($("$kubectl" config current-context 2>/dev/null || echo 'no current context')) does not answer; using the local cluster instead"
  else
    say "no kubeconfig (KUBECONFIG unset, no ~/.kube/config); using the local cluster"
  fi
fi

if $use_local; then
  say "starting (or reusing) the local control plane: hack/local-cluster.sh up"
  export_line=$(hack/local-cluster.sh up) || die "the local cluster did not start (logs: ${LOCAL_CLUSTER_DIR:-tmp/local-cluster}/logs/)"
  eval "$export_line"
  export KUBECONFIG
  # A real node pulls nothing: give it the release image (`make run` builds
  # it), whose /task-runner http Tasks run.
  if [ -f bin/image/task-operator.tar ]; then
    hack/local-cluster.sh load-image bin/image/task-operator.tar >&2 || die "could not load bin/image/task-operator.tar into the local cluster"
  fi
fi

context=$("$kubectl" config current-context 2>/dev/null || true)
server=$("$kubectl" config view --minify -o jsonpath='{.clusters[0].cluster.server}' 2>/dev/null || true)
# A KUBECONFIG already pointing at a local cluster of this project (say one
# that `hack/demo.sh --keep` left running) gets the local-cluster hints too.
if ! $use_local && [ "$context" = local-cluster ] && [ -n "${KUBECONFIG:-}" ] && [ -f "$(dirname "$KUBECONFIG")/cluster.env" ]; then
  use_local=true
fi

say "installing the Task CRD into ${context:-?} (${server:-?})"
"$kubectl" apply --server-side -f config/crd/bases >&2
# `kubectl wait` fails rather than waits while the CRD has no conditions yet.
for _ in $(seq 120); do
  [ "$("$kubectl" get crd tasks.batch.taskops.io -o 'jsonpath={.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" = True ] && break
  sleep 0.5
done

say "building the operator (bin/manager)"
mkdir -p bin
go build -o bin/manager ./cmd/manager

{
  echo
  if $use_local; then
    local_dir=$(dirname "$KUBECONFIG")
    if [ "$(sed -n 's/^NODE_MODE=//p' "$local_dir/cluster.env" 2>/dev/null)" = kwok ]; then
      echo "run: the operator runs against the LOCAL cluster ($local_dir); its pods are"
      echo "run: simulated by kwok, nothing is pulled or run (hack/kwok/README.md)."
    else
      echo "run: the operator runs against the LOCAL cluster ($local_dir), whose real"
      echo "run: node runs its pods (images it has: busybox:1.37, and what load-image added)."
    fi
    echo "run: in another terminal, point kubectl at it:"
    echo
    printf '    export KUBECONFIG=%q\n' "$KUBECONFIG"
    printf '    alias kubectl=%q          # the project'"'"'s kubectl, same version as the cluster\n' "$kubectl"
    echo '    kubectl apply -f samples/hello.yaml'
    echo '    kubectl wait --for=condition=Ready task/hello --timeout=1m'
    echo '    kubectl get tasks -o wide'
    echo
    echo "run: Ctrl-C stops the operator; the cluster keeps running."
    if [ "$local_dir" = "$root/tmp/local-cluster" ]; then
      echo "run: stop the cluster with: hack/local-cluster.sh down"
    else
      printf 'run: stop the cluster with: hack/local-cluster.sh down --dir %q\n' "$local_dir"
    fi
  else
    echo "run: the operator runs against ${context:-the current context} (${server:-?})."
    echo "run: try: $kubectl apply -f samples/hello.yaml"
    echo "run: Ctrl-C stops the operator."
  fi
  echo
} >&2

exec "$root/bin/manager" --log-format=console --metrics-bind-address=0 --health-probe-bind-address=0 "$@"
