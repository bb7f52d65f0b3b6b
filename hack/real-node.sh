# shellcheck shell=bash
# The local cluster's real node: containerd + runc + a kubelet built from the
# pinned Kubernetes module, so pods run real containers. Sourced by
# hack/local-cluster.sh (which defines dir, pki, logs, log, die, kc,
# start_component, stop_components, pid_of, alive, pick_ports, BIN_DIR).
# The facts behind each setting are in docs/local-cluster.md ("The real
# node"); in short:
#
# - Nothing leaves the machine: pods sit on a bridge of their own (taskops<N>,
#   10.244.<N>.0/24) with no default route, no masquerading and IP forwarding
#   untouched, and a resolv.conf naming a loopback resolver. The API server
#   and the kubelet serve on the bridge address, so pods reach the API server
#   without kube-proxy.
# - The host stays as it was: the kubelet runs in its own mount namespace,
#   where the sysctls it would write are files bind-mounted over /proc/sys;
#   it adds no iptables chains; its pods live under a cgroup of their own
#   (cgroupRoot /taskops<N>); containerd's root, state, runc root and socket,
#   the CNI config and IPAM data, the kubelet's root and logs are all under
#   DIR. What the kubelet, containerd and CNI still create on the host
#   (/var/lib/kubelet, /var/log/containers, /run/containerd, /var/lib/cni,
#   /run/netns) is recorded at `up` when absent and removed at `down`.
# - Images cannot be pulled: the pause, busybox and operator images are built
#   from files (hack/image) and imported with `ctr images import`.

REAL_NODE_NAME=real-node-0
readonly PAUSE_IMAGE=registry.k8s.io/pause:3.10
readonly BUSYBOX_IMAGE=docker.io/library/busybox:1.37
# Host paths the node's parts create outside DIR (see the header).
readonly NODE_HOST_PATHS=(/var/lib/kubelet /var/log/containers /run/containerd /var/lib/cni /run/netns)
# The values the kubelet wants for the sysctls it sets at start.
readonly KUBELET_SYSCTLS=(vm/overcommit_memory=1 kernel/panic=10 kernel/panic_on_oops=1)

node_dir() { echo "$dir/node"; }

# real_node_unavailable: prints why this machine cannot run the real node;
# prints nothing (and returns 1) when it can.
real_node_unavailable() {
  [ "$(uname -s)" = Linux ] || { echo "not Linux"; return 0; }
  [ "$(id -u)" = 0 ] || { echo "not root (the kubelet and containerd need root)"; return 0; }
  local c
  for c in containerd runc ctr unshare mount ip gcc; do
    command -v "$c" >/dev/null || { echo "no $c (hack/real-node-deps.sh installs it)"; return 0; }
  done
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] || { echo "no CNI plugins in /usr/lib/cni (containernetworking-plugins)"; return 0; }
  [ -x /bin/busybox ] || { echo "no /bin/busybox (busybox-static)"; return 0; }
  [ -d /sys/fs/cgroup ] || { echo "no /sys/fs/cgroup"; return 0; }
  return 1
}

# ---------------------------------------------------------------------------
# Images
# ---------------------------------------------------------------------------

# node_images: builds (or reuses) the pause and busybox image archives in
# bin/images and prints their paths.
node_images() {
  local out=$root/bin/images pause_src
  mkdir -p "$out"
  if [ ! -s "$out/pause.tar" ]; then
    pause_src=$(cd "$root/hack/k8s" && go mod download -json k8s.io/kubernetes | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [ -f "$pause_src/build/pause/linux/pause.c" ] || die "no build/pause/linux/pause.c in the k8s.io/kubernetes module ($pause_src)"
    gcc -Os -static -DVERSION=3.10 -o "$out/pause" "$pause_src/build/pause/linux/pause.c" || die "could not compile pause.c (gcc, libc6-dev)"
    (cd "$root" && go run ./hack/image pause -pause "$out/pause" -tag "$PAUSE_IMAGE" -out "$out/pause.tar") >/dev/null
  fi
  if [ ! -s "$out/busybox.tar" ]; then
    (cd "$root" && go run ./hack/image busybox -busybox /bin/busybox -tag "$BUSYBOX_IMAGE" -out "$out/busybox.tar") >/dev/null
  fi
  echo "$out/pause.tar" "$out/busybox.tar"
}

ctr_() { ctr --address "$(node_dir)/containerd/containerd.sock" --namespace k8s.io "$@"; }

# load_images TAR...: imports image archives into the node's containerd.
load_images() {
  local f
  for f in "$@"; do
    [ -s "$f" ] || die "no image archive $f"
    ctr_ images import --no-unpack=false "$f" >/dev/null 2>"$logs/ctr.err" || { cat "$logs/ctr.err" >&2; die "ctr images import $f failed"; }
    log "loaded image $(tar -xOf "$f" index.json | sed -n 's/.*"io.containerd.image.name": *"\([^"]*\)".*/\1/p') from $f"
  done
}

# ---------------------------------------------------------------------------
# Network
# ---------------------------------------------------------------------------

# pick_bridge: the first 10.244.N.0/24 (N 1..250) no interface uses; sets
# BRIDGE_NAME, BRIDGE_IP, POD_SUBNET.
pick_bridge() {
  local n used
  used=$(ip -o -4 addr show 2>/dev/null | awk '{print $4}')
  for n in $(seq 1 250); do
    if ! grep -q "^10\.244\.$n\." <<<"$used" && ! ip link show "taskops$n" >/dev/null 2>&1; then
      BRIDGE_NAME=taskops$n BRIDGE_IP=10.244.$n.1 POD_SUBNET=10.244.$n.0/24 CGROUP_ROOT=/taskops$n
      return 0
    fi
  done
  die "no free 10.244.N.0/24 for the pod bridge"
}

make_bridge() {
  # A fixed (locally administered) MAC address: a bridge without one takes
  # the lowest MAC of its ports and changes it whenever a pod's veth comes
  # or goes, and a running pod whose ARP entry still names the old address
  # then loses its packets to the host until the entry expires (a
  # notification pod's second try hung while other pods ended).
  local n=${BRIDGE_IP#10.244.}
  n=${n%%.*}
  ip link add "$BRIDGE_NAME" address "$(printf '02:00:0a:f4:%02x:01' "$n")" type bridge || die "could not create bridge $BRIDGE_NAME"
  ip addr add "$BRIDGE_IP/24" dev "$BRIDGE_NAME"
  ip link set "$BRIDGE_NAME" up
  log "bridge $BRIDGE_NAME $BRIDGE_IP/24 (no route out, forwarding untouched: $(cat /proc/sys/net/ipv4/ip_forward))"
}

# ---------------------------------------------------------------------------
# Host paths and cgroups
# ---------------------------------------------------------------------------

# other_real_nodes: the DIRs of other local clusters whose real node runs.
other_real_nodes() {
  local p args cfg
  while read -r p args; do
    [[ $args == containerd\ --config\ * ]] || continue
    cfg=${args#containerd --config }
    cfg=${cfg%% *}
    cfg=${cfg%/node/containerd/config.toml}
    [ "$cfg" != "$dir" ] && [ -f "$cfg/node/host-paths" ] && echo "$cfg"
  done < <(processes)
  return 0
}

# record_host_paths: which of NODE_HOST_PATHS did not exist before any of our
# real nodes ran (inherited from a node still running, which created them).
record_host_paths() {
  local other p
  other=$(other_real_nodes | head -n 1)
  if [ -n "$other" ]; then
    cp "$other/node/host-paths" "$(node_dir)/host-paths"
    return 0
  fi
  : >"$(node_dir)/host-paths"
  for p in "${NODE_HOST_PATHS[@]}"; do
    [ -e "$p" ] || echo "$p" >>"$(node_dir)/host-paths"
  done
}

cgroup_dirs() { # cgroup_dirs: the node's cgroupRoot in every hierarchy
  local m
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    echo "/sys/fs/cgroup$CGROUP_ROOT"
    return 0
  fi
  for m in /sys/fs/cgroup/*/; do
    [ -f "$m/cgroup.procs" ] && echo "${m%/}$CGROUP_ROOT"
  done
  return 0
}

make_cgroups() {
  local d parent
  for d in $(cgroup_dirs); do
    mkdir -p "$d"
    parent=$(dirname "$d")
    # A new cgroup-v1 cpuset starts empty, and no task can join it then.
    if [ -f "$d/cpuset.cpus" ]; then
      cat "$parent/cpuset.cpus" >"$d/cpuset.cpus"
      cat "$parent/cpuset.mems" >"$d/cpuset.mems"
    fi
  done
}

remove_cgroups() { # deepest first; a cgroup with processes left in it stays (and is reported)
  local d sub
  for d in $(cgroup_dirs); do
    [ -d "$d" ] || continue
    while read -r sub; do
      rmdir "$sub" 2>/dev/null || log "warning: cgroup $sub is still in use"
    done < <(find "$d" -depth -type d 2>/dev/null)
  done
}

# unmount_under DIR: every mount point below DIR, deepest first.
unmount_under() {
  local m
  while read -r m; do
    umount -l "$m" 2>/dev/null || down_problem "could not unmount $m"
  done < <(awk -v d="$1" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r)
}

# down_problem records what `down` could not clean: it goes on with the
# rest, reports them all at the end and only then fails.
DOWN_PROBLEMS=()
down_problem() {
  log "warning: $*"
  DOWN_PROBLEMS+=("$*")
}

# remove_path removes a path `down` owns. A pod's network namespace file
# under /run/netns is a bind mount and can be busy for a moment after its
# pod went: detach what is mounted below the path (lazily), then retry.
remove_path() {
  local p=$1 try
  for try in 1 2 3 4 5; do
    unmount_under "$p"
    rm -rf "$p" 2>/dev/null && return 0
    sleep 0.5
  done
  rm -rf "$p" 2>&1 | head -n 3 >&2 || true
  down_problem "could not remove $p"
}

# ---------------------------------------------------------------------------
# Configuration files
# ---------------------------------------------------------------------------

write_node_config() {
  local nd
  nd=$(node_dir)
  mkdir -p "$nd/containerd" "$nd/cni/net.d" "$nd/cni/ipam" "$nd/kubelet/root" "$nd/kubelet/pki" \
    "$nd/kubelet/volume-plugins" "$nd/kubelet/pod-logs" "$nd/kubelet/sysctl"
  cat >"$nd/containerd/config.toml" <<EOF
# containerd for the local cluster's real node: everything under $nd.
version = 2
root = "$nd/containerd/root"
state = "$nd/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$nd/containerd/containerd.sock"
[ttrpc]
  address = "$nd/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$nd/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
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
        Root = "$nd/containerd/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$nd/cni/net.d"
    max_conf_num = 1
EOF
  # No gateway, no masquerade, no routes: a pod reaches the bridge address
  # (this machine) and other pods, nothing else.
  cat >"$nd/cni/net.d/10-taskops.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "taskops-local",
  "plugins": [{
    "type": "bridge",
    "bridge": "$BRIDGE_NAME",
    "isGateway": false,
    "isDefaultGateway": false,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {"type": "host-local", "dataDir": "$nd/cni/ipam", "ranges": [[{"subnet": "$POD_SUBNET", "rangeStart": "${BRIDGE_IP%.1}.10"}]]}
  }]
}
EOF
  # Pods resolve nothing: their own loopback answers no DNS at once, and no
  # query ever goes to this machine's resolver.
  printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$nd/kubelet/resolv.conf"
  local kv
  for kv in "${KUBELET_SYSCTLS[@]}"; do
    mkdir -p "$nd/kubelet/sysctl/$(dirname "${kv%%=*}")"
    echo "${kv#*=}" >"$nd/kubelet/sysctl/${kv%%=*}"
  done
  cat >"$nd/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 is still supported by 1.37 but refused by default.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: $CGROUP_ROOT
containerRuntimeEndpoint: unix://$nd/containerd/containerd.sock
address: $BRIDGE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
# Only clients with a certificate of the cluster CA (the API server) may use
# the kubelet's API; pods' tokens are not accepted.
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: AlwaysAllow}
makeIPTablesUtilChains: false
resolvConf: $nd/kubelet/resolv.conf
clusterDomain: cluster.local
volumePluginDir: $nd/kubelet/volume-plugins
podLogsDir: $nd/kubelet/pod-logs
failSwapOn: false
maxPods: 250
serializeImagePulls: false
# Never garbage-collect the imported images: they cannot be pulled again.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: "1%", nodefs.inodesFree: "1%", imagefs.available: "1%"}
EOF
}

# ---------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------

start_containerd() {
  start_component containerd containerd --config "$(node_dir)/containerd/config.toml"
}

containerd_ready() { ctr_ version; }

start_kubelet() {
  local nd kv sysctls=""
  nd=$(node_dir)
  for kv in "${KUBELET_SYSCTLS[@]}"; do sysctls+=" ${kv%%=*}"; done
  # Its own mount namespace (see the header): volumes it mounts under its
  # root dir must still reach containerd, so that dir is a shared mount
  # (made so once, in `up`) and the namespace keeps propagation unchanged;
  # /proc is made private first, so the sysctl files bound over it stay
  # inside.
  start_component kubelet unshare --mount --propagation unchanged -- bash -c '
    set -e
    nd=$1; shift
    mount --make-rprivate /proc
    for s in '"$sysctls"'; do mount --bind "$nd/kubelet/sysctl/$s" "/proc/sys/$s"; done
    exec "$@"' kubelet-ns "$nd" \
    "$BIN_DIR/kubelet" \
    --config="$nd/kubelet/config.yaml" \
    --kubeconfig="$pki/kubelet.kubeconfig" \
    --root-dir="$nd/kubelet/root" \
    --cert-dir="$nd/kubelet/pki" \
    --node-ip="$BRIDGE_IP" \
    --hostname-override="$REAL_NODE_NAME" \
    --node-labels="type=real"
}

# real_node_prepare: everything before containerd starts.
real_node_prepare() {
  local nd
  nd=$(node_dir)
  # What a crashed run left mounted must not be removed through its mounts.
  unmount_under "$nd"
  rm -rf "$nd"
  mkdir -p "$nd"
  record_host_paths
  make_bridge
  write_node_config
  make_cgroups
  # The kubelet's root dir as a shared mount: see start_kubelet.
  mount --bind "$nd/kubelet/root" "$nd/kubelet/root"
  mount --make-rshared "$nd/kubelet/root"
}

# real_node_start: containerd, the images, the kubelet.
real_node_start() {
  local images
  start_containerd
  started+=(containerd)
  wait_for "containerd" containerd_ready
  read -r -a images <<<"$(node_images)"
  load_images "${images[@]}"
  start_kubelet
  started+=(kubelet)
}

# real_node_down: the kubelet, its pods, containerd, then what they left on
# the host. Safe to run when parts never started.
real_node_down() {
  local nd p
  nd=$(node_dir)
  [ -d "$nd" ] || return 0
  stop_components kubelet || down_problem "could not stop the kubelet"
  if pid_of containerd >/dev/null && [ -x "$BIN_DIR/crictl" ]; then
    # Through the CRI, so containerd's CRI store stays consistent (removing
    # its containers with ctr corrupts it).
    timeout 60 "$BIN_DIR/crictl" --runtime-endpoint "unix://$nd/containerd/containerd.sock" rmp -a -f >/dev/null 2>&1 ||
      log "warning: crictl rmp -a -f failed"
  fi
  stop_components containerd || down_problem "could not stop containerd"
  # Shims outlive containerd by design; ours name our socket.
  local args
  while read -r p args; do
    [[ $args != *"-address $nd/containerd/containerd.sock"* ]] || kill -KILL "$p" 2>/dev/null || true
  done < <(processes)
  unmount_under "$nd"
  if [ -n "${CGROUP_ROOT:-}" ]; then remove_cgroups || down_problem "could not remove the cgroups under $CGROUP_ROOT"; fi
  if [ -n "${BRIDGE_NAME:-}" ] && ip link show "$BRIDGE_NAME" >/dev/null 2>&1; then
    ip link del "$BRIDGE_NAME" || down_problem "could not delete bridge $BRIDGE_NAME"
  fi
  if [ -f "$nd/host-paths" ]; then
    local other
    other=$(other_real_nodes | head -n 1)
    if [ -n "$other" ]; then
      # Still in use by another real node: it removes them when it goes.
      cp "$nd/host-paths" "$other/node/host-paths"
    else
      while read -r p; do
        [ -z "$p" ] || remove_path "$p"
      done <"$nd/host-paths"
    fi
  fi
  remove_path "$nd"
}
