#!/usr/bin/env bash
# Smoke check of the local control plane (hack/local-cluster.sh) and of the
# simulated pods (hack/kwok/stages.yaml): brings a cluster up in its own folder,
# runs Jobs through the simulated outcomes, deletes a namespace with a running
# Job in it, and brings the cluster down again, also on failure.
#
#   hack/local-cluster-smoke.sh
#
# Uses its own state folder (default <repo>/tmp/local-cluster-smoke, or
# $LOCAL_CLUSTER_SMOKE_DIR), so it neither reuses nor stops a cluster a
# developer has running in the default folder; the two get different ports.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${LOCAL_CLUSTER_SMOKE_DIR:-$root/tmp/local-cluster-smoke}
cluster=("$root/hack/local-cluster.sh")
ns=smoke
ns_del=smoke-delete

t_start=$SECONDS
t_step=$SECONDS

say() { printf 'smoke: %s\n' "$*" >&2; }
step() { t_step=$SECONDS; printf '\nsmoke: == %s\n' "$*" >&2; }
pass() { say "ok: $* ($((SECONDS - t_step)) s)"; }
fail() { say "FAIL: $*"; exit 1; }

# ---------------------------------------------------------------------------
# Setup and teardown
# ---------------------------------------------------------------------------

diagnose() { # what was going on, for a failed run
  [ -n "${KUBECONFIG:-}" ] && [ -f "$KUBECONFIG" ] || return 0
  say "diagnostics:"
  k get nodes,jobs,pods -A -o wide >&2 || true
  k get pods -A -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name}: {.status.phase} {.status.containerStatuses[*].state}{"\n"}{end}' >&2 || true
  k get events -A --sort-by=.lastTimestamp 2>/dev/null | tail -n 20 >&2 || true
  say "component logs are in $dir/logs (kept after down)"
}

cleanup() {
  local rc=$?
  trap - EXIT
  [ $rc -eq 0 ] || diagnose
  step "bring the cluster down"
  if ! "${cluster[@]}" down --dir "$dir"; then
    say "FAIL: down did not stop everything"
    rc=1
  fi
  if "${cluster[@]}" status --dir "$dir" >/dev/null 2>&1; then
    say "FAIL: status still reports the cluster up after down"
    rc=1
  fi
  if [ $rc -eq 0 ]; then
    say "PASSED in $((SECONDS - t_start)) s"
  else
    say "FAILED after $((SECONDS - t_start)) s"
  fi
  exit $rc
}

k() { "$kubectl" --request-timeout=20s "$@"; }

poll() { # poll SECONDS DESCRIPTION CMD...: run CMD until it succeeds, or fail at the deadline
  local timeout=$1 what=$2 deadline=$((SECONDS + $1))
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || fail "timed out after ${timeout}s waiting for $what"
    sleep 0.25
  done
}

holds_for() { # holds_for SECONDS DESCRIPTION CMD...: CMD keeps succeeding for that long
  # An observation window, not a wait: the point is that nothing changes.
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  while [ $SECONDS -lt $deadline ]; do
    "$@" >/dev/null 2>&1 || fail "$what stopped holding"
    sleep 0.5
  done
}

# ---------------------------------------------------------------------------
# Objects
# ---------------------------------------------------------------------------

job() { # job NAMESPACE NAME [ANNOTATION=VALUE...]: a Job that passes the restricted Pod Security Standard
  local namespace=$1 name=$2 a
  shift 2
  {
    cat <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $name
  namespace: $namespace
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations:
EOF
    echo '        smoke.taskops.io/case: "'"$name"'"'
    for a in "$@"; do echo "        ${a%%=*}: \"${a#*=}\""; done
    cat <<EOF
    spec:
      restartPolicy: Never
      securityContext:
        runAsNonRoot: true
        runAsUser: 65534
        seccompProfile:
          type: RuntimeDefault
      containers:
      - name: main
        image: busybox:1.36
        command: ["sh", "-c", "echo hello from $name"]
        securityContext:
          allowPrivilegeEscalation: false
          capabilities:
            drop: ["ALL"]
EOF
  } | k apply -f - >/dev/null
}

pod_field() { # pod_field NAMESPACE JOB JSONPATH: a field of the Job's (first) pod
  k -n "$1" get pods -l "job-name=$2" -o jsonpath="{.items[0]$3}"
}

pod_is() { # pod_is NAMESPACE JOB JSONPATH VALUE
  [ "$(pod_field "$1" "$2" "$3")" = "$4" ]
}

namespace_gone() { ! k get namespace "$1" >/dev/null 2>&1; }

# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------

trap cleanup EXIT

step "bring the cluster up in $dir"
eval "$("${cluster[@]}" up --dir "$dir")"
[ -f "$KUBECONFIG" ] || fail "up printed no usable kubeconfig"
[ "$("${cluster[@]}" kubeconfig --dir "$dir")" = "$KUBECONFIG" ] || fail "kubeconfig command disagrees with up"
# The cluster's own kubectl, the same version as the server, not whatever is on PATH.
kubectl="$("$root/hack/k8s-binaries.sh" kubectl)/kubectl"
"${cluster[@]}" status --dir "$dir" >/dev/null || fail "status does not report the cluster up"
pass "cluster up at $(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')"

step "up again is a no-op"
t=$SECONDS
out=$("${cluster[@]}" up --dir "$dir" 2>/dev/null)
[ "$out" = "export KUBECONFIG=$KUBECONFIG" ] || fail "second up printed: $out"
[ $((SECONDS - t)) -le 5 ] || fail "second up took $((SECONDS - t)) s"
pass "second up only printed the kubeconfig"

step "namespace $ns enforcing the restricted Pod Security Standard, service-account tokens"
k create namespace "$ns" >/dev/null
k label namespace "$ns" pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/warn=restricted >/dev/null
poll 30 "ServiceAccount $ns/default" k -n "$ns" get serviceaccount default
token=$(k -n "$ns" create token default)
[ -n "$token" ] || fail "no token for $ns/default"
pass "namespace ready; TokenRequest works"

step "a plain Job completes"
job "$ns" ok
k -n "$ns" wait --for=condition=Complete job/ok --timeout=60s >/dev/null || fail "job ok did not complete"
pod_is "$ns" ok '.status.containerStatuses[0].state.terminated.exitCode' 0 || fail "job ok's pod did not exit 0"
pass "job ok Complete, pod exit code 0"

step "sim.taskops.io/exit-code: \"3\" fails the Job with exit code 3 and the termination message"
job "$ns" fail sim.taskops.io/exit-code=3 "sim.taskops.io/message=simulated failure: disk full"
k -n "$ns" wait --for=condition=Failed job/fail --timeout=60s >/dev/null || fail "job fail did not fail"
terminated='.status.containerStatuses[0].state.terminated'
code=$(pod_field "$ns" fail "$terminated.exitCode")
reason=$(pod_field "$ns" fail "$terminated.reason")
message=$(pod_field "$ns" fail "$terminated.message")
[ "$code" = 3 ] || fail "exit code is '$code', want 3"
[ "$reason" = Error ] || fail "reason is '$reason', want Error"
[ "$message" = "simulated failure: disk full" ] || fail "message is '$message'"
pass "job fail Failed; container exitCode=$code reason=$reason message='$message'"

step "sim.taskops.io/start: never keeps the pod Pending in ImagePullBackOff"
job "$ns" never sim.taskops.io/start=never
waiting='.status.containerStatuses[0].state.waiting.reason'
poll 30 "job never's pod to report ImagePullBackOff" pod_is "$ns" never "$waiting" ImagePullBackOff
still_backing_off() { pod_is "$ns" never .status.phase Pending && pod_is "$ns" never "$waiting" ImagePullBackOff; }
holds_for 5 "Pending with ImagePullBackOff" still_backing_off
pass "pod still Pending / ImagePullBackOff after 5 s"

step "sim.taskops.io/duration: \"3\" runs 3 s, then completes"
t=$SECONDS
job "$ns" slow sim.taskops.io/duration=3
poll 30 "job slow's pod to run" pod_is "$ns" slow .status.phase Running
k -n "$ns" wait --for=condition=Complete job/slow --timeout=60s >/dev/null || fail "job slow did not complete"
[ $((SECONDS - t)) -ge 3 ] || fail "job slow completed after $((SECONDS - t)) s, before its 3 s"
pass "job slow Complete after $((SECONDS - t)) s"

step "deleting a namespace with a running Job (sim.taskops.io/run: forever) removes it within 60 s"
k create namespace "$ns_del" >/dev/null
job "$ns_del" forever sim.taskops.io/run=forever
poll 30 "job forever's pod to run" pod_is "$ns_del" forever .status.phase Running
holds_for 3 "job forever's pod Running" pod_is "$ns_del" forever .status.phase Running
k delete namespace "$ns_del" --wait=false >/dev/null
t=$SECONDS
poll 60 "namespace $ns_del to disappear" namespace_gone "$ns_del"
pass "namespace $ns_del gone after $((SECONDS - t)) s"

say "all checks passed in $((SECONDS - t_start)) s"
