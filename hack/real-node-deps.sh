#!/usr/bin/env bash
# Installs the Debian packages the local cluster's real node needs, when they
# are missing and this machine can install them (root with apt-get). `make
# demo`, `make run`, `make test` and `.ci/run` call it; it is never a manual
# step.
#
#   hack/real-node-deps.sh           install what is missing; exit 0 when the
#                                    packages are there afterwards
#   hack/real-node-deps.sh --check   install nothing; exit 0 when they are there
#
# Packages: containerd, runc, containernetworking-plugins (the bridge and
# host-local CNI plugins), busybox-static (the shell image), iproute2 (the
# bridge), util-linux (unshare, mount), gcc + libc6-dev (the pause binary,
# compiled -static from Kubernetes' pause.c), ca-certificates (the operator
# image's CA bundle).
#
# Where it cannot install (not Linux, not root, no apt-get), it says why on
# stderr and exits 1 without changing anything: hack/local-cluster.sh then
# falls back to a kwok node (or fails, with LOCAL_CLUSTER_NODE=real).
set -euo pipefail

readonly PACKAGES=(containerd runc containernetworking-plugins busybox-static iproute2 util-linux gcc libc6-dev ca-certificates)

say() { printf 'real-node-deps: %s\n' "$*" >&2; }

missing() {
  local p out=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || out+=("$p")
  done
  echo "${out[*]}"
}

[ "$(uname -s)" = Linux ] || { say "not Linux ($(uname -s)): no real node here"; exit 1; }
command -v dpkg-query >/dev/null || { say "no dpkg (not a Debian-like system): install containerd, runc, the CNI plugins and a static busybox yourself"; exit 1; }

need=$(missing)
[ -n "$need" ] || exit 0
if [ "${1:-}" = --check ]; then
  say "missing: $need"
  exit 1
fi
[ "$(id -u)" = 0 ] || { say "missing: $need; installing needs root (sudo apt-get install $need)"; exit 1; }
command -v apt-get >/dev/null || { say "missing: $need, and no apt-get"; exit 1; }

say "installing: $need"
t0=$SECONDS
# The package lists may be missing or stale on a fresh machine.
cannot() {
  say "cannot install $need ($1): without them this machine has no real node, so the"
  say "end-to-end tests cannot run real containers (on CI, CI=true, that fails the run)"
  exit 1
}
DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || cannot "apt-get update failed"
# shellcheck disable=SC2086 # a list of package names
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $need >&2 || cannot "apt-get install failed"
need=$(missing)
[ -z "$need" ] || cannot "still missing after apt-get install"
say "installed in $((SECONDS - t0)) s"
