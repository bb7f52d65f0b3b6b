#!/usr/bin/env bash
# Prints a KUBEBUILDER_ASSETS folder for an older Kubernetes minor: its
# kube-apiserver, built from the pinned modules of hack/k8s-compat/vX.Y.Z
# (on first use; about 7 min on 2 cores), beside hack/k8s's etcd (the
# storage API the API servers use has not changed across these minors).
#
#   hack/k8s-compat.sh v1.34.4
#
# `make test-compat` runs the envtest suites against each version in
# hack/k8s-compat/ (docs/development.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
v=${1:?usage: k8s-compat.sh vX.Y.Z}
mod="$root/hack/k8s-compat/$v"
[ -f "$mod/go.mod" ] || { echo "k8s-compat: no module for $v in hack/k8s-compat/" >&2; exit 2; }
BUILD_REV=1
out="$root/bin/k8s-compat/$v-r$BUILD_REV"
mkdir -p "$out"
etcd_dir=$("$root/hack/k8s-binaries.sh" etcd)
[ -x "$out/etcd" ] || cp "$etcd_dir/etcd" "$out/etcd"
if [ ! -x "$out/kube-apiserver" ]; then
  minor=${v#v1.}; minor=${minor%%.*}
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  start=$SECONDS
  echo "k8s-compat: building kube-apiserver $v" >&2
  tmp="$out/.kube-apiserver.tmp.$$"
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp" k8s.io/kubernetes/cmd/kube-apiserver) >&2
  mv "$tmp" "$out/kube-apiserver"
  echo "k8s-compat: built kube-apiserver $v in $((SECONDS - start)) s" >&2
fi
echo "$out"
