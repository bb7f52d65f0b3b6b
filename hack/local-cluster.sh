#!/usr/bin/env bash
# The project's local Kubernetes control plane: a real etcd, kube-apiserver,
# kube-controller-manager and kube-scheduler, plus a node: a real one (a
# kubelet with containerd and runc: pods run real containers) or a kwok node
# (kwok plays the kubelet and simulates the pods, for scale), or both.
# `make demo`, `make run`, the end-to-end tests and the benchmarks all use
# this one script.
#
#   hack/local-cluster.sh up         [--dir DIR]   start (or reuse) the cluster
#   hack/local-cluster.sh down       [--dir DIR]   stop everything it started
#   hack/local-cluster.sh status     [--dir DIR]   exit 0 when up, 1 when not
#   hack/local-cluster.sh kubeconfig [--dir DIR]   print the kubeconfig path (fails when down)
#   hack/local-cluster.sh load-image [--dir DIR] ARCHIVE...
#                                                  import OCI image archives (make image)
#                                                  into the real node's containerd
#   hack/local-cluster.sh start-kubelet [--dir DIR] start the real node's kubelet again
#                                                  when it is not running (after a crash)
#
# `up` prints progress on stderr and one line on stdout,
#   export KUBECONFIG=DIR/kubeconfig
# so a caller can `eval "$(hack/local-cluster.sh up)"`, or take the path from
# `hack/local-cluster.sh kubeconfig`. `up` on a running cluster only prints
# that line again (unless the settings below changed: then it restarts). Each
# fresh `up` starts from an empty etcd. The kubeconfig is an admin
# (system:masters) client-certificate kubeconfig, context `local-cluster`.
#
# DIR (default: $LOCAL_CLUSTER_DIR, else <repo>/tmp/local-cluster, git-ignored)
# holds everything. Several clusters can run side by side in different DIRs:
# every port is picked free at `up`.
#   kubeconfig          admin kubeconfig (exists only while the cluster is up)
#   cluster.env         ports, bin folder, node name, settings (sourceable)
#   cluster.json        the same, as one JSON object of strings (for Go: test/harness)
#   logs/NAME.log       one per component (NAME.log.prev: the run before); kept by down
#   pids/NAME.pid       one per component
#   pki/                CA, serving and client certificates, service-account
#                       key pair, the components' kubeconfigs
#   etcd/               etcd data
#   kube-controller-manager/, kube-scheduler/   their self-signed serving certs
#   kwok/               kwok's HOME
#   node/               the real node: containerd, CNI and kubelet state and config
#
# Environment:
#   LOCAL_CLUSTER_NODE          real | kwok | both | auto (default auto: real when
#                               this machine can run it, else kwok, saying why).
#                               The real node needs Linux, root and the Debian
#                               packages hack/real-node-deps.sh installs (`up`
#                               runs it); kwok is for scale (benchmarks,
#                               thousands of pods) and for other machines.
#   KCM_QPS, KCM_BURST          kube-controller-manager --kube-api-qps/--kube-api-burst
#                               (default 20/30, the controller-manager's own defaults)
#   LOCAL_CLUSTER_DIR           default for --dir
#   LOCAL_CLUSTER_NODE_PODS     pods the fake node can hold (default 1000)
#   LOCAL_CLUSTER_TIMEOUT       seconds `up` waits for each readiness step (default 120)
#   KUBEBUILDER_ASSETS          honoured by hack/k8s-binaries.sh
#
# Pods on the real node run for real: the images it has are the pause and
# busybox:1.37 images `up` builds and imports, plus what `load-image` adds
# (nothing is pulled; no registry is reachable). Pods on the kwok node are
# simulated by the kwok stages in hack/kwok/stages.yaml (see
# hack/kwok/README.md): Job pods run for about a second and succeed unless
# their annotations say otherwise. Everything the cluster serves or advertises
# is on this machine: loopback, and the real node's bridge (see
# hack/real-node.sh).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly root

# shellcheck source=hack/real-node.sh
source "$root/hack/real-node.sh"

NODE_NAME=kwok-node-0 # not readonly: cluster.env, sourced back, records it too
# Every component, in start order; `down` stops them in reverse. Which of
# the node's run depends on NODE_MODE (components_for).
readonly ALL_COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok containerd kubelet)
readonly SERVICE_CIDR=10.96.0.0/16
readonly SERVICE_IP=10.96.0.1 # first address of SERVICE_CIDR: the `kubernetes` Service
# kwok hands out its simulated pods' IPs from here: loopback, so nothing
# that dials one can leave the machine; roomy for benchmarks.
readonly POD_CIDR=127.64.0.0/10
# The kwok node's address, also on loopback: the API server dials "the
# kubelet" there for logs and exec, and must never reach past the machine.
readonly KWOK_NODE_IP=127.0.0.10

NODE_MODE_ASKED=${LOCAL_CLUSTER_NODE:-auto}
case "$NODE_MODE_ASKED" in real | kwok | both | auto) ;; *)
  printf 'local-cluster: error: LOCAL_CLUSTER_NODE must be real, kwok, both or auto, not %s\n' "$NODE_MODE_ASKED" >&2; exit 1 ;;
esac

components_for() { # components_for MODE: the components a cluster of that node mode runs
  local c=(etcd kube-apiserver kube-controller-manager kube-scheduler)
  case "$1" in
    kwok) c+=(kwok) ;;
    real) c+=(containerd kubelet) ;;
    both) c+=(kwok containerd kubelet) ;;
  esac
  echo "${c[*]}"
}
binaries_for() { # binaries_for MODE: the Kubernetes binaries it needs
  local b=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)
  [ "$1" = real ] || b+=(kwok)
  [ "$1" = kwok ] || b+=(kubelet crictl)
  echo "${b[*]}"
}
# Controllers this project relies on. node-lifecycle removes the new node's
# not-ready taint (nothing schedules without it); serviceaccount(-token) and
# root-ca-certificate-publisher make service accounts and their tokens work;
# ttl-after-finished honours Job.spec.ttlSecondsAfterFinished; the pod
# garbage collector fails pods that can never run (say, created just before
# their namespace began terminating), or such a namespace never goes away;
# the deployment and replicaset controllers run the operator deployed from
# config/default (the e2e suite does); the resourcequota controller counts
# what ResourceQuotas allow, so a quota can refuse pods (queues, capacity);
# the clusterrole-aggregation controller fills view/edit/admin with the
# roles aggregated into them (config/rbac, tested by the e2e suite).
readonly KCM_CONTROLLERS=job-controller,cronjob-controller,garbage-collector-controller,namespace-controller,node-lifecycle-controller,serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller,ttl-after-finished-controller,pod-garbage-collector-controller,deployment-controller,replicaset-controller,resourcequota-controller,clusterrole-aggregation-controller

KCM_QPS=${KCM_QPS:-20}
KCM_BURST=${KCM_BURST:-30}
NODE_PODS=${LOCAL_CLUSTER_NODE_PODS:-1000}
TIMEOUT=${LOCAL_CLUSTER_TIMEOUT:-120}
# An audit policy file (optional): the API server then logs what it asks for
# to DIR/logs/audit.log (JSON lines). The benchmarks use it to count each
# controller's writes exactly.
AUDIT_POLICY=${LOCAL_CLUSTER_AUDIT_POLICY:-}
if [ -n "$AUDIT_POLICY" ]; then
  [ -f "$AUDIT_POLICY" ] || { printf 'local-cluster: error: LOCAL_CLUSTER_AUDIT_POLICY=%s: no such file\n' "$AUDIT_POLICY" >&2; exit 1; }
  AUDIT_POLICY=$(cd "$(dirname "$AUDIT_POLICY")" && pwd)/$(basename "$AUDIT_POLICY")
fi
# The knobs a running cluster was started with, recorded in cluster.env: `up`
# restarts a running cluster whose settings differ from those asked for, so a
# benchmark asking for KCM_QPS=100 never measures a cluster left at 20.
wanted_settings="node=$NODE_MODE_ASKED kcm-qps=$KCM_QPS kcm-burst=$KCM_BURST node-pods=$NODE_PODS audit=${AUDIT_POLICY:-none} controllers=$(printf %s "$KCM_CONTROLLERS" | cksum | cut -d' ' -f1)"

log() { printf 'local-cluster: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
  sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
}

# ---------------------------------------------------------------------------
# Paths and recorded state
# ---------------------------------------------------------------------------

set_dir() { # set_dir DIR: absolute path (without creating it) and the paths inside
  dir=$1
  [[ $dir == /* ]] || dir=$PWD/$dir
  dir=${dir%/}
  pki=$dir/pki
  logs=$dir/logs
  pids=$dir/pids
  state_env=$dir/cluster.env
  state_json=$dir/cluster.json
  kubeconfig=$dir/kubeconfig
}

load_state() { # load_state: the ports and bin folder recorded by `up`; false when none
  [ -f "$state_env" ] || return 1
  # shellcheck disable=SC1090 # written by write_state below
  source "$state_env"
}

readonly STATE_VARS=(BIN_DIR ETCD_PORT ETCD_PEER_PORT APISERVER_PORT APISERVER_HOST KCM_PORT SCHEDULER_PORT NODE_NAME KUBECONFIG_PATH SETTINGS
  NODE_MODE REAL_NODE_NAME BRIDGE_NAME BRIDGE_IP POD_SUBNET CGROUP_ROOT KUBELET_PORT KUBELET_HEALTHZ_PORT)

json_string() { # json_string VALUE: VALUE as a JSON string (the state's values are paths, names, numbers)
  local v=${1//\\/\\\\}
  v=${v//\"/\\\"}
  printf '"%s"' "$v"
}

write_state() { # write_state: cluster.env for the script and callers that source it, cluster.json for Go
  local v sep=
  {
    echo "# Written by hack/local-cluster.sh up; read by its other commands and free for callers to source."
    for v in "${STATE_VARS[@]}"; do printf '%s=%q\n' "$v" "${!v:-}"; done
  } >"$state_env.tmp"
  {
    printf '{'
    for v in "${STATE_VARS[@]}"; do printf '%s\n  %s: %s' "$sep" "$(json_string "$v")" "$(json_string "${!v:-}")"; sep=,; done
    printf '\n}\n'
  } >"$state_json.tmp"
  mv "$state_env.tmp" "$state_env"
  mv "$state_json.tmp" "$state_json"
}

kc() { "$BIN_DIR/kubectl" --kubeconfig="$kubeconfig" --request-timeout=10s "$@"; }

# ---------------------------------------------------------------------------
# Processes
# ---------------------------------------------------------------------------

cmdline_of() { # cmdline_of PID: the process' command line, space separated
  if [ -r "/proc/$1/cmdline" ]; then
    tr '\0' ' ' 2>/dev/null <"/proc/$1/cmdline"
  else
    ps -o args= -p "$1" 2>/dev/null
  fi
}

alive() { # alive PID: running, and not a zombie waiting for its new parent to reap it
  kill -0 "$1" 2>/dev/null || return 1
  local state
  if [ -r "/proc/$1/stat" ]; then
    state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
  else
    state=$(ps -o stat= -p "$1" 2>/dev/null)
  fi
  [[ $state != Z* ]]
}

pid_of() { # pid_of NAME: the pid of our running NAME; false when not running
  local f=$pids/$1.pid pid
  [ -f "$f" ] || return 1
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  alive "$pid" || return 1
  # Every component's arguments name a file under DIR: this guards against a
  # recycled pid belonging to some unrelated process.
  [[ $(cmdline_of "$pid") == *"$dir/"* ]] || return 1
  echo "$pid"
}

start_component() { # start_component NAME CMD...: run in the background, log to logs/NAME.log
  local name=$1 pidf=$pids/$1.pid launcher=()
  shift
  rm -f "$pidf"
  # setsid: the cluster gets its own session, so a Ctrl-C meant for the caller
  # (say `make run`) does not kill it halfway; `down` stops it. The child writes
  # its own pid just before exec, so the pid file names the real process.
  if command -v setsid >/dev/null; then launcher=(setsid); fi
  # 8>&- 9>&-: the component must not inherit the script's saved stderr or
  # the lock (see lock); a held lock would block the next up/down for as
  # long as the cluster runs.
  "${launcher[@]}" bash -c 'echo $$ >"$0"; exec "$@"' "$pidf" "$@" </dev/null >>"$logs/$name.log" 2>&1 8>&- 9>&- &
  local deadline=$((SECONDS + 10))
  until [ -s "$pidf" ]; do
    [ $SECONDS -lt $deadline ] || die "$name did not start; see $logs/$name.log"
    sleep 0.1
  done
  log "started $name (pid $(<"$pidf"))"
}

stop_components() { # stop_components NAME...: SIGTERM, up to 15 s grace, then SIGKILL
  local name pid live=() deadline
  for name in "$@"; do
    if pid=$(pid_of "$name"); then
      kill -TERM "$pid" 2>/dev/null || true
      live+=("$name:$pid")
    fi
    rm -f "$pids/$name.pid"
  done
  [ ${#live[@]} -gt 0 ] || return 0
  local t0=$SECONDS
  deadline=$((SECONDS + 15))
  while [ $SECONDS -lt $deadline ]; do
    local still=()
    for entry in "${live[@]}"; do alive "${entry#*:}" && still+=("$entry"); done
    [ ${#still[@]} -gt 0 ] || { log "stopped ${live[*]%%:*} ($((SECONDS - t0)) s)"; return 0; }
    sleep 0.2
  done
  for entry in "${live[@]}"; do
    if alive "${entry#*:}"; then
      log "${entry%%:*} (pid ${entry#*:}) ignored SIGTERM for 15 s; killing it"
      kill -KILL "${entry#*:}" 2>/dev/null || true
    fi
  done
}

processes() { # processes: "PID ARGS" of every process, arguments space separated (Linux only)
  [ -d /proc ] || return 0
  local p args
  for p in /proc/[0-9]*; do
    args=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue # gone meanwhile
    [ -n "$args" ] && echo "${p#/proc/} $args"
  done
  return 0
}

stray_pids() { # stray_pids: our components still running without a pid file (Linux only)
  local p args name
  while read -r p args; do
    [[ $args == *"$dir/"* ]] || continue
    name=${args%% *}
    name=${name##*/}
    case "$name" in etcd | kube-apiserver | kube-controller-manager | kube-scheduler | kwok | kubelet | containerd) echo "$p" ;; esac
  done < <(processes)
}

stop_all() {
  # The real node first (its pods, then containerd, then what they left on
  # the host), then clients, so they do not spin on a vanished API server;
  # etcd last. No step stops the others: what fails is recorded
  # (down_problem) and reported at the end, after everything was tried.
  real_node_down || down_problem "the real node did not go down cleanly"
  stop_components kwok kube-scheduler kube-controller-manager || down_problem "could not stop kwok, the scheduler or the controller-manager"
  stop_components kube-apiserver || down_problem "could not stop kube-apiserver"
  stop_components etcd || down_problem "could not stop etcd"
  # A process whose pid file was lost (DIR wiped while running, or an `up`
  # killed at the wrong moment) is still ours if its arguments point into DIR.
  local p
  for p in $(stray_pids); do
    log "stopping leftover process $p: $(cmdline_of "$p" | cut -c1-100)"
    kill -TERM "$p" 2>/dev/null || true
  done
  local deadline=$((SECONDS + 10))
  while [ -n "$(stray_pids)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  for p in $(stray_pids); do kill -KILL "$p" 2>/dev/null || true; done
}

running_components() { # running_components: names of our live components
  local name
  for name in "${ALL_COMPONENTS[@]}"; do
    pid_of "$name" >/dev/null && echo "$name"
  done
  return 0
}

# ---------------------------------------------------------------------------
# Ports
# ---------------------------------------------------------------------------

port_free() { # port_free PORT: nothing listens on it (a listener on 0.0.0.0 counts too)
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

pick_ports() { # pick_ports N: N distinct free ports, one a line
  # Below the kernel's ephemeral range, so an outgoing connection cannot be
  # holding the port by the time the component binds it. Random rather than
  # sequential so clusters started at the same moment are unlikely to collide.
  local lo=20000 hi=32767 eph picked=() p tries=0
  if read -r eph _ 2>/dev/null </proc/sys/net/ipv4/ip_local_port_range && [ "$eph" -gt $((lo + 1000)) ]; then
    hi=$((eph - 1))
  fi
  while [ ${#picked[@]} -lt "$1" ]; do
    tries=$((tries + 1))
    [ $tries -lt 1000 ] || die "found no free loopback ports in $lo-$hi"
    p=$((lo + (RANDOM * 32768 + RANDOM) % (hi - lo + 1)))
    [[ " ${picked[*]} " == *" $p "* ]] && continue
    port_free "$p" || continue
    picked+=("$p")
  done
  printf '%s\n' "${picked[@]}"
}

# ---------------------------------------------------------------------------
# Certificates, keys, kubeconfigs
# ---------------------------------------------------------------------------

# Client identities: file name, CN, O. kcm and scheduler get the identities the
# bootstrap RBAC policy grants their roles to; kwok plays every kubelet and
# needs wide access, so it is an admin like the user. The real node's kubelet
# is a node (the Node authorizer limits it to its own node and pods), and the
# API server reaches kubelets (logs, exec) as an admin.
readonly CLIENTS=(
  "admin kubernetes-admin system:masters"
  "kube-controller-manager system:kube-controller-manager -"
  "kube-scheduler system:kube-scheduler -"
  "kwok kwok system:masters"
  "kubelet system:node:$REAL_NODE_NAME system:nodes"
  "apiserver-kubelet-client kube-apiserver-kubelet-client system:masters"
)
readonly APISERVER_DNS=(localhost kubernetes kubernetes.default kubernetes.default.svc kubernetes.default.svc.cluster.local)
# The API server's addresses; `up` adds the real node's bridge address, where
# it serves then so that pods reach it without kube-proxy.
APISERVER_IPS=(127.0.0.1 "$SERVICE_IP")

gen_pki() { # gen_pki: the CA, the API server's and every client's certificate and key, the SA key pair (hack/local-cluster, Go)
  local clients=() entry name cn org
  for entry in "${CLIENTS[@]}"; do
    read -r name cn org <<<"$entry"
    [ "$org" = - ] && org=
    clients+=(-client "$name,$cn,$org")
  done
  rm -rf "$pki"
  mkdir -p "$pki"
  (cd "$root" && go run ./hack/local-cluster -out "$pki" \
    -dns "$(IFS=,; echo "${APISERVER_DNS[*]}")" -ips "$(IFS=,; echo "${APISERVER_IPS[*]}")" \
    "${clients[@]}") || die "certificate generation (go run ./hack/local-cluster) failed"
  chmod 600 "$pki"/*.key
  log "made certificates and keys"
}

b64() { base64 <"$1" | tr -d '\n'; } # portable: GNU and BSD base64 differ in wrap flags

write_kubeconfig() { # write_kubeconfig FILE CLIENT
  local file=$1 user=$2
  cat >"$file.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local-cluster
  cluster:
    server: https://$APISERVER_HOST:$APISERVER_PORT
    certificate-authority-data: $(b64 "$pki/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(b64 "$pki/$user.crt")
    client-key-data: $(b64 "$pki/$user.key")
contexts:
- name: local-cluster
  context:
    cluster: local-cluster
    user: $user
    namespace: default
current-context: local-cluster
EOF
  chmod 600 "$file.tmp"
  mv "$file.tmp" "$file"
}

# ---------------------------------------------------------------------------
# Components
# ---------------------------------------------------------------------------

start_etcd() {
  start_component etcd "$BIN_DIR/etcd" \
    --name=local \
    --data-dir="$dir/etcd" \
    --listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="local=http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster-state=new \
    --log-level=warn
}

start_apiserver() {
  local audit=()
  if [ -n "$AUDIT_POLICY" ]; then
    audit=(--audit-policy-file="$AUDIT_POLICY" --audit-log-path="$logs/audit.log"
      --audit-log-format=json --audit-log-mode=blocking)
  fi
  # --cert-dir keeps the API server from writing under /var/run/kubernetes.
  # --endpoint-reconciler-type=none: the reconciler refuses a loopback
  # advertise address, and nothing runs in-cluster to need the `kubernetes`
  # Service's endpoints.
  # --requestheader-*: the controller-manager and scheduler read this CA from
  # kube-system/extension-apiserver-authentication for their own /healthz
  # authentication and log an error every few seconds when it is missing. The
  # allowed name is one no certificate here carries, so no client can use
  # request headers to pose as another user.
  # With a real node it serves on the bridge address (a local one), so that
  # pods reach it without kube-proxy, and reaches the kubelet there with a
  # client certificate (kubectl logs/exec).
  local node_flags=()
  if [ "$NODE_MODE" != kwok ]; then
    node_flags=(--kubelet-client-certificate="$pki/apiserver-kubelet-client.crt"
      --kubelet-client-key="$pki/apiserver-kubelet-client.key"
      --kubelet-preferred-address-types=InternalIP)
  fi
  start_component kube-apiserver "$BIN_DIR/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address="$APISERVER_HOST" \
    --advertise-address="$APISERVER_HOST" \
    --endpoint-reconciler-type=none \
    --secure-port="$APISERVER_PORT" \
    --cert-dir="$dir/kube-apiserver" \
    --tls-cert-file="$pki/apiserver.crt" \
    --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --requestheader-client-ca-file="$pki/ca.crt" \
    --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User \
    --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --authorization-mode=Node,RBAC \
    --service-account-key-file="$pki/sa.pub" \
    --service-account-signing-key-file="$pki/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    "${node_flags[@]}" \
    "${audit[@]}"
}

start_controller_manager() {
  # Each controller runs as its own service account (as in kubeadm clusters),
  # so RBAC applies to controllers the way it does in production.
  local kcfg=$pki/kube-controller-manager.kubeconfig
  start_component kube-controller-manager "$BIN_DIR/kube-controller-manager" \
    --kubeconfig="$kcfg" \
    --authentication-kubeconfig="$kcfg" \
    --authorization-kubeconfig="$kcfg" \
    --bind-address=127.0.0.1 \
    --secure-port="$KCM_PORT" \
    --cert-dir="$dir/kube-controller-manager" \
    --leader-elect=false \
    --controllers="$KCM_CONTROLLERS" \
    --use-service-account-credentials=true \
    --service-account-private-key-file="$pki/sa.key" \
    --root-ca-file="$pki/ca.crt" \
    --kube-api-qps="$KCM_QPS" \
    --kube-api-burst="$KCM_BURST"
}

start_scheduler() {
  local kcfg=$pki/kube-scheduler.kubeconfig
  start_component kube-scheduler "$BIN_DIR/kube-scheduler" \
    --kubeconfig="$kcfg" \
    --authentication-kubeconfig="$kcfg" \
    --authorization-kubeconfig="$kcfg" \
    --bind-address=127.0.0.1 \
    --secure-port="$SCHEDULER_PORT" \
    --cert-dir="$dir/kube-scheduler" \
    --leader-elect=false
}

start_kwok() {
  # HOME inside DIR: kwok also reads ~/.kwok/kwok.yaml when present, and a
  # user's own kwok configuration must not change this cluster.
  mkdir -p "$dir/kwok"
  start_component kwok env HOME="$dir/kwok" "$BIN_DIR/kwok" \
    --kubeconfig="$pki/kwok.kubeconfig" \
    --config="$root/hack/kwok/stages.yaml" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --cidr="$POD_CIDR" \
    --node-lease-duration-seconds=40
}

create_node() {
  # kwok's node-initialize stage keeps the capacity and addresses set here.
  # The InternalIP (becoming each pod's hostIP) is on loopback, where nothing
  # answers as a kubelet (kubectl logs/exec of a simulated pod fail at once)
  # and nothing can leave the machine.
  kc create -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $NODE_NAME
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    kubernetes.io/hostname: $NODE_NAME
    node-role.kubernetes.io/agent: ""
status:
  addresses:
  - {type: InternalIP, address: $KWOK_NODE_IP}
  - {type: Hostname, address: $NODE_NAME}
  allocatable: {cpu: "1000", memory: 1Ti, pods: "$NODE_PODS"}
  capacity: {cpu: "1000", memory: 1Ti, pods: "$NODE_PODS"}
EOF
  log "created node $NODE_NAME (pods: $NODE_PODS)"
}

# ---------------------------------------------------------------------------
# Readiness
# ---------------------------------------------------------------------------

started=() # components started by this `up`, checked while waiting

wait_for() { # wait_for DESCRIPTION CMD...: poll CMD until it succeeds, within TIMEOUT
  local what=$1 deadline=$((SECONDS + TIMEOUT)) name
  shift
  until "$@" >/dev/null 2>&1; do
    for name in "${started[@]}"; do
      # A component that exited will not come back: fail now, not at the deadline.
      pid_of "$name" >/dev/null || die "$name exited while waiting for $what; see $logs/$name.log"
    done
    [ $SECONDS -lt $deadline ] || die "timed out after ${TIMEOUT}s waiting for $what"
    sleep 0.25
  done
  log "ready: $what"
}

etcd_healthy() { (exec 3<>"/dev/tcp/127.0.0.1/$ETCD_PORT") 2>/dev/null; }
apiserver_ready() { [ "$(kc get --raw /readyz 2>/dev/null)" = ok ]; }
https_healthz() { # https_healthz PORT: the component's /healthz (anonymous access is allowed there)
  if command -v curl >/dev/null; then
    curl -ksf --max-time 5 "https://127.0.0.1:$1/healthz" >/dev/null
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}
node_schedulable() { # node_schedulable NAME
  # Ready, and the node lifecycle controller has lifted the not-ready /
  # unreachable taints it puts on a new node; until then nothing schedules.
  local out
  out=$(kc get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.spec.taints[*].key}') || return 1
  [[ $out == True* && $out != *node.kubernetes.io/* ]]
}
default_sa_exists() { kc -n default get serviceaccount default; }

cluster_up() { # cluster_up: every component running and the API server ready
  load_state || return 1
  local name
  for name in $(components_for "${NODE_MODE:-kwok}"); do pid_of "$name" >/dev/null || return 1; done
  apiserver_ready
}

# ---------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------

lock() { # lock: one up/down at a time per DIR
  mkdir -p "$dir"
  if command -v flock >/dev/null; then
    exec 9>"$dir/.lock"
    flock -w 900 9 || die "another up/down on $dir is still running"
  fi
}

announce() {
  log "kubeconfig: $kubeconfig"
  printf 'export KUBECONFIG=%q\n' "$kubeconfig"
}

on_signal() { # on_signal STATUS: exit the script (and so run up_failed)
  # bash can run the trap in a command-substitution subshell forked just as
  # the signal arrived; exiting there would only end that subshell, so hand
  # the signal on to the script itself.
  if [ "${BASHPID:-$$}" != "$$" ]; then
    kill -s "$(kill -l "$(($1 - 128))")" "$$"
  fi
  exit "$1"
}

up_failed() {
  local rc=$?
  trap - EXIT
  [ $rc -ne 0 ] || return 0
  # A signal can land while a probe runs with stderr sent to /dev/null
  # (wait_for); report on the stderr the script started with.
  exec 2>&8
  log "up failed; last log lines:"
  local name
  for name in "${ALL_COMPONENTS[@]}"; do
    [ -s "$logs/$name.log" ] || continue
    printf '  --- %s\n' "$logs/$name.log" >&2
    tail -n 8 "$logs/$name.log" | sed 's/^/    /' >&2
  done
  log "stopping what was started"
  stop_all
  rm -f "$dir/kubeconfig.tmp-admin"
  exit $rc
}

cmd_up() {
  lock
  if cluster_up; then
    if [ "${SETTINGS:-}" = "$wanted_settings" ]; then
      log "already up in $dir"
      announce
      return 0
    fi
    log "running with ${SETTINGS:-unknown settings}; asked for $wanted_settings: restarting"
    stop_all
  fi
  if [ -n "$(running_components)$(stray_pids)" ]; then
    log "found a partly running cluster in $dir; restarting it"
    stop_all
  fi
  local t0=$SECONDS f entry name
  resolve_node_mode
  # shellcheck disable=SC2046 # a list of names
  BIN_DIR=$("$root/hack/k8s-binaries.sh" $(binaries_for "$NODE_MODE")) || die "could not get the Kubernetes binaries"

  # A fresh cluster each time: old etcd data, certs and component state go.
  rm -rf "$dir/etcd" "$pids" "$state_env" "$kubeconfig" "$dir"/kube-* "$dir/kwok"
  mkdir -p "$pids" "$logs"
  for f in "$logs"/*.log; do [ -f "$f" ] && mv "$f" "$f.prev"; done # keep one previous run

  read -r -d '' ETCD_PORT ETCD_PEER_PORT APISERVER_PORT KCM_PORT SCHEDULER_PORT KUBELET_PORT KUBELET_HEALTHZ_PORT < <(pick_ports 7 && printf '\0') || true
  [ -n "$KUBELET_HEALTHZ_PORT" ] || die "could not pick ports"
  KUBECONFIG_PATH=$kubeconfig
  SETTINGS=$wanted_settings
  APISERVER_HOST=127.0.0.1
  BRIDGE_NAME= BRIDGE_IP= POD_SUBNET= CGROUP_ROOT=
  # Signals become an exit, so the EXIT trap cleans up after Ctrl-C or kill too.
  trap up_failed EXIT
  trap 'on_signal 130' INT
  trap 'on_signal 143' TERM
  trap 'on_signal 129' HUP
  if [ "$NODE_MODE" != kwok ]; then
    pick_bridge
    APISERVER_HOST=$BRIDGE_IP
    APISERVER_IPS+=("$BRIDGE_IP")
    write_state # so a failed `up` below can be cleaned up by `down`
    real_node_prepare
  fi
  gen_pki
  for entry in "${CLIENTS[@]}"; do
    read -r name _ <<<"$entry"
    [ "$name" = admin ] || write_kubeconfig "$pki/$name.kubeconfig" "$name"
  done
  write_state
  log "ports: etcd $ETCD_PORT (peer $ETCD_PEER_PORT), apiserver $APISERVER_HOST:$APISERVER_PORT, controller-manager $KCM_PORT, scheduler $SCHEDULER_PORT"

  start_etcd
  started+=(etcd)
  wait_for "etcd on port $ETCD_PORT" etcd_healthy
  start_apiserver
  started+=(kube-apiserver)
  # The admin kubeconfig appears only once the API server answers, so a
  # caller that sees the file can use it.
  write_kubeconfig "$kubeconfig.tmp-admin" admin
  local kubeconfig_final=$kubeconfig
  kubeconfig=$kubeconfig.tmp-admin
  wait_for "kube-apiserver /readyz" apiserver_ready
  start_controller_manager
  start_scheduler
  started+=(kube-controller-manager kube-scheduler)
  if [ "$NODE_MODE" != real ]; then
    start_kwok
    started+=(kwok)
    create_node
    wait_for "node $NODE_NAME Ready and schedulable" node_schedulable "$NODE_NAME"
  fi
  if [ "$NODE_MODE" != kwok ]; then
    real_node_start
    wait_for "node $REAL_NODE_NAME (a real kubelet) Ready and schedulable" node_schedulable "$REAL_NODE_NAME"
  fi
  wait_for "default ServiceAccount" default_sa_exists
  wait_for "kube-scheduler /healthz" https_healthz "$SCHEDULER_PORT"
  wait_for "kube-controller-manager /healthz" https_healthz "$KCM_PORT"
  mv "$kubeconfig" "$kubeconfig_final"
  kubeconfig=$kubeconfig_final
  trap - EXIT INT TERM HUP

  log "up in $((SECONDS - t0)) s with $(describe_nodes) (state, logs and pids in $dir)"
  announce
}

cmd_down() {
  if [ ! -d "$dir" ]; then
    log "no cluster in $dir"
    return 0
  fi
  lock
  load_state || true # the real node's bridge, cgroup and binaries
  stop_all
  # Nothing in etcd outlives the processes (the next `up` starts afresh), so
  # drop it and the credentials; keep the logs for a post-mortem.
  rm -rf "$dir/etcd" "$pids" "$state_env" "$kubeconfig" "$kubeconfig.tmp-admin" "$pki" "$dir"/kube-* "$dir/kwok"
  check_host_clean
  local left
  left=$(stray_pids)
  [ -z "$left" ] || down_problem "processes still running: $left"
  if [ ${#DOWN_PROBLEMS[@]} -gt 0 ]; then
    log "down ($dir), but not clean:"
    printf 'local-cluster:   - %s\n' "${DOWN_PROBLEMS[@]}" >&2
    exit 1
  fi
  log "down ($dir)"
}

cmd_status() {
  if ! load_state; then
    log "not up (no cluster in $dir)"
    return 1
  fi
  local name pid up=true
  printf '%-24s %s\n' node "$(describe_nodes)"
  for name in $(components_for "${NODE_MODE:-kwok}"); do
    if pid=$(pid_of "$name"); then
      printf '%-24s running (pid %s)\n' "$name" "$pid"
    else
      printf '%-24s stopped\n' "$name"
      up=false
    fi
  done
  printf '%-24s etcd %s (peer %s), apiserver %s, controller-manager %s, scheduler %s\n' ports \
    "$ETCD_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT" "$KCM_PORT" "$SCHEDULER_PORT"
  printf '%-24s %s\n' settings "${SETTINGS:-}"
  if $up && apiserver_ready; then
    printf '%-24s ok\n' /readyz
    printf '%-24s %s\n' "node $NODE_NAME" "$(kc get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null | sed 's/^True$/Ready/;s/^$/missing/')"
    printf '%-24s %s\n' kubeconfig "$kubeconfig"
    return 0
  fi
  printf '%-24s not ready\n' /readyz
  return 1
}

# resolve_node_mode: NODE_MODE from LOCAL_CLUSTER_NODE; auto is real when
# this machine can run a kubelet (installing its packages if needed), kwok
# otherwise, and says which and why.
resolve_node_mode() {
  local why=
  NODE_MODE=$NODE_MODE_ASKED
  [ "$NODE_MODE" != kwok ] || return 0
  "$root/hack/real-node-deps.sh" || true
  why=$(real_node_unavailable) || true
  if [ -n "$why" ]; then
    [ "$NODE_MODE" = auto ] || die "LOCAL_CLUSTER_NODE=$NODE_MODE, but this machine cannot run a real node: $why"
    log "NOTE: no real node on this machine ($why): falling back to a kwok node, so pods are SIMULATED (no container runs)"
    NODE_MODE=kwok
    return 0
  fi
  [ "$NODE_MODE" != auto ] || NODE_MODE=real
}

describe_nodes() {
  case "${NODE_MODE:-kwok}" in
    real) echo "a real node ($REAL_NODE_NAME: kubelet, containerd, runc)" ;;
    kwok) echo "a kwok node ($NODE_NAME: simulated pods)" ;;
    both) echo "a real node ($REAL_NODE_NAME) and a kwok node ($NODE_NAME)" ;;
  esac
}

# check_host_clean: after `down`, nothing of the real node is left on the host.
check_host_clean() {
  local left=()
  [ -z "${BRIDGE_NAME:-}" ] || ! ip link show "$BRIDGE_NAME" >/dev/null 2>&1 || left+=("bridge $BRIDGE_NAME")
  grep -q " $dir/" /proc/self/mountinfo 2>/dev/null && left+=("mounts under $dir")
  [ ${#left[@]} -eq 0 ] || log "warning: left on the host: ${left[*]}"
}

cmd_load_image() {
  [ $# -gt 0 ] || die "load-image needs at least one image archive"
  load_state || die "no cluster in $dir"
  [ "${NODE_MODE:-kwok}" != kwok ] || { log "a kwok node runs no images: nothing to load"; return 0; }
  pid_of containerd >/dev/null || die "the real node's containerd is not running"
  load_images "$@"
}

cmd_start_kubelet() {
  load_state || die "no cluster in $dir"
  [ "${NODE_MODE:-kwok}" != kwok ] || die "this cluster has no real node"
  if pid_of kubelet >/dev/null; then
    log "the kubelet is running"
    return 0
  fi
  started=()
  start_kubelet
  started+=(kubelet)
  wait_for "node $REAL_NODE_NAME Ready" node_schedulable "$REAL_NODE_NAME"
}

cmd_kubeconfig() {
  [ -f "$kubeconfig" ] || die "no cluster in $dir; run: hack/local-cluster.sh up${dir_flag:+ --dir $dir}"
  echo "$kubeconfig"
}

main() {
  exec 8>&2 # the caller's stderr, for reports from traps (see up_failed)
  local cmd=${1:-}
  [ $# -gt 0 ] && shift
  dir_flag=
  args=()
  local d=${LOCAL_CLUSTER_DIR:-$root/tmp/local-cluster}
  while [ $# -gt 0 ]; do
    case "$1" in
      --dir) [ $# -ge 2 ] || die "--dir needs a value"; d=$2; dir_flag=1; shift 2 ;;
      --dir=*) d=${1#--dir=}; dir_flag=1; shift ;;
      -h | --help) usage; exit 0 ;;
      -*) usage; die "unknown argument: $1" ;;
      *) [ "$cmd" = load-image ] || { usage; die "unknown argument: $1"; }; args+=("$1"); shift ;;
    esac
  done
  set_dir "$d"
  case "$cmd" in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    kubeconfig) cmd_kubeconfig ;;
    load-image) cmd_load_image "${args[@]}" ;;
    start-kubelet) cmd_start_kubelet ;;
    -h | --help | help) usage ;;
    *) usage; die "unknown command: '${cmd}'" ;;
  esac
}

main "$@"
