#!/usr/bin/env bash
# Builds (or reuses) the Kubernetes binaries the tests, the local control plane
# and the benchmarks run, and prints the folder that holds them.
#
#   hack/k8s-binaries.sh [NAME ...]     default: etcd kube-apiserver
#
# NAME is one of: etcd kube-apiserver kube-controller-manager kube-scheduler
# kubectl kubelet kwok crictl. Binaries are built from pinned Go modules
# (hack/k8s/go.mod for Kubernetes and etcd, KWOK_VERSION and CRICTL_VERSION
# below for kwok and crictl) into bin/k8s/<version>-r<rev>/, an
# ignored folder, and reused on later runs; the Go build cache makes a rebuild
# after `make clean` quick. When KUBEBUILDER_ASSETS names a folder that already
# holds every requested binary, that folder is used and nothing is built.
#
# Progress goes to stderr; stdout carries only the folder, so callers can write
# ASSETS=$(hack/k8s-binaries.sh).
set -euo pipefail

KWOK_VERSION=v0.8.0
CRICTL_VERSION=v1.37.0 # the real node's CRI client, for cleaning pods up

root=$(cd "$(dirname "$0")/.." && pwd)
k8s_version=$(awk '$1=="k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$root/hack/k8s/go.mod")
[ -n "$k8s_version" ] || { echo "k8s-binaries: no k8s.io/kubernetes version in hack/k8s/go.mod" >&2; exit 1; }

names=("$@")
[ ${#names[@]} -gt 0 ] || names=(etcd kube-apiserver)

if [ -n "${KUBEBUILDER_ASSETS:-}" ]; then
  have_all=true
  for n in "${names[@]}"; do [ -x "$KUBEBUILDER_ASSETS/$n" ] || have_all=false; done
  if $have_all; then echo "$KUBEBUILDER_ASSETS"; exit 0; fi
  echo "k8s-binaries: KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks some of: ${names[*]}; building them" >&2
fi

# Bump BUILD_REV when the way binaries are built changes, so cached ones
# built the old way are not reused.
BUILD_REV=2
out="$root/bin/k8s/$k8s_version-r$BUILD_REV"

# Stamp the version the way Kubernetes' own build does: without it the
# binaries report v0.0.0-master and kubectl refuses to parse the version.
minor=${k8s_version#v1.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
mkdir -p "$out"

build() { # build NAME: into $out/NAME, atomically so an interrupted build never leaves a half binary
  local n=$1 pkg tmp
  case "$n" in
    etcd) pkg=go.etcd.io/etcd/server/v3 ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kubelet) pkg=k8s.io/kubernetes/cmd/$n ;;
    kwok) pkg=sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION ;;
    crictl) pkg=sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION ;;
    *) echo "k8s-binaries: unknown binary $n" >&2; return 2 ;;
  esac
  tmp="$out/.$n.tmp.$$"
  local start=$SECONDS
  echo "k8s-binaries: building $n (first build of kube-apiserver takes ~8 min on 2 cores)" >&2
  if [[ $pkg == *@* ]]; then # a module of its own, installed at its pinned version
    GOBIN="$out/.$n-gobin.$$" GOFLAGS=-mod=mod CGO_ENABLED=0 go install "$pkg" >&2
    mv "$out/.$n-gobin.$$/$n" "$tmp" && rmdir "$out/.$n-gobin.$$"
  else
    (cd "$root/hack/k8s" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg") >&2
  fi
  mv "$tmp" "$out/$n"
  echo "k8s-binaries: built $n in $((SECONDS - start)) s" >&2
}

for n in "${names[@]}"; do
  [ -x "$out/$n" ] || build "$n"
done
echo "$out"
