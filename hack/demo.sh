#!/usr/bin/env bash
# `make demo`: what task-operator does, end to end, in a few minutes, on a
# fresh local control plane of its own with a real node (hack/local-cluster.sh:
# a kubelet with containerd and runc, so every pod is a real container; on a
# machine that cannot run one it falls back to kwok, says why, and skips the
# chapters whose outcome only a real container gives).
#
#   hack/demo.sh [--keep]
#
# Starts the cluster in tmp/demo-cluster (or $DEMO_DIR), installs the CRD,
# builds and starts the operator in the background (log: DIR/operator.log),
# applies the Tasks in samples/demo/ to the namespace `demo` (which enforces
# the `restricted` Pod Security Standard), and narrates what happens: a Task
# that succeeds (and its real output), one whose script fails and, once
# patched, succeeds on a retry, one that exhausts its retries, an http Task
# calling a server the demo starts on the node's bridge, and a cron Task's
# first run. At the end
# (also on failure or Ctrl-C) it stops the operator and the cluster.
#
# --keep leaves the cluster running (the operator is stopped either way), to
# look around or to run `make run` against it: the script prints how.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

dir=${DEMO_DIR:-$root/tmp/demo-cluster}
[[ $dir == /* ]] || dir=$root/$dir
ns=demo
keep=false
case "${1:-}" in
  --keep) keep=true ;;
  "") ;;
  -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
  *) echo "demo: unknown argument: $1 (see hack/demo.sh --help)" >&2; exit 2 ;;
esac

# ---------------------------------------------------------------------------
# Output and timing
# ---------------------------------------------------------------------------

now() { # seconds since the epoch, with milliseconds when bash can tell
  if [ -n "${EPOCHREALTIME:-}" ]; then echo "${EPOCHREALTIME/,/.}"; else date +%s; fi
}
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

t_start=$(now)
t_step=$t_start
timings=()
bold='' reset=''
if [ -t 1 ]; then bold=$'\e[1m' reset=$'\e[0m'; fi

step() { # step TITLE: a new chapter of the story
  finish_step
  step_name=$1
  t_step=$(now)
  printf '\n%s== %s%s\n' "$bold" "$1" "$reset"
}
finish_step() {
  [ -n "${step_name:-}" ] || return 0
  timings+=("$(printf '%6ss  %s' "$(elapsed "$t_step")" "$step_name")")
  step_name=
}
say() { printf '   %s\n' "$*"; }
quote() { # quote ARG...: the args as a reader would type them in a shell
  local a out=()
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./:=,@+-]*$ ]]; then out+=("$a"); else out+=("'${a//\'/\'\\\'\'}'"); fi
  done
  printf '%s' "${out[*]}"
}
show() { # show CMD...: print a kubectl command as the reader would type it, then run it
  printf '   $ kubectl %s\n' "$(quote "$@")"
  k "$@" 2>&1 | sed 's/^/     /'
  return "${PIPESTATUS[0]}"
}
k() { "$kubectl" --request-timeout=20s -n "$ns" "$@"; }

# ---------------------------------------------------------------------------
# Teardown
# ---------------------------------------------------------------------------

operator_pid=
build_pid=
httpd_pid=

stop_operator() {
  [ -n "$operator_pid" ] || return 0
  local t0 how=exited
  t0=$(now)
  if kill -0 "$operator_pid" 2>/dev/null; then
    kill -TERM "$operator_pid" 2>/dev/null || true
    local deadline=$((SECONDS + 15))
    while kill -0 "$operator_pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    if kill -KILL "$operator_pid" 2>/dev/null; then how="killed (it ignored SIGTERM for 15 s)"; else how=stopped; fi
  fi
  wait "$operator_pid" 2>/dev/null || true
  operator_pid=
  say "operator $how in $(elapsed "$t0") s (its log: $dir/operator.log)"
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM HUP
  finish_step
  if [ $rc -ne 0 ]; then
    printf '\n%s== the demo FAILED (exit %s)%s\n' "$bold" "$rc" "$reset"
    if [ -n "${KUBECONFIG:-}" ] && [ -f "$KUBECONFIG" ]; then
      k get tasks,jobs,pods -o wide 2>&1 | sed 's/^/   /' || true
      k get events --sort-by=.lastTimestamp 2>/dev/null | tail -n 15 | sed 's/^/   /' || true
    fi
    if [ -f "$dir/operator.log" ]; then
      say "last lines of the operator log ($dir/operator.log):"
      tail -n 20 "$dir/operator.log" | sed 's/^/     /'
    fi
  fi
  printf '\n%s== cleaning up%s\n' "$bold" "$reset"
  local t_clean
  t_clean=$(now)
  if [ -n "$build_pid" ] && kill -0 "$build_pid" 2>/dev/null; then
    kill -TERM "$build_pid" 2>/dev/null || true
    wait "$build_pid" 2>/dev/null || true
  fi
  stop_operator
  if [ -n "$httpd_pid" ]; then kill "$httpd_pid" 2>/dev/null || true; wait "$httpd_pid" 2>/dev/null || true; fi
  if $keep && [ $rc -eq 0 ]; then
    say "the cluster keeps running (--keep). To use it:"
    printf '     export KUBECONFIG=%q\n' "$dir/kubeconfig"
    printf '     alias kubectl=%q\n' "$kubectl"
    say "  kubectl -n $ns get tasks -o wide"
    say "  make run      # runs the operator against it again"
    printf '   stop it with: hack/local-cluster.sh down --dir %q\n' "$dir"
  else
    "$root/hack/local-cluster.sh" down --dir "$dir" 2>&1 | sed 's/^/   /' || rc=1
  fi
  timings+=("$(printf '%6ss  cleanup: stop the operator%s' "$(elapsed "$t_clean")" "$($keep && [ $rc -eq 0 ] || echo ' and the cluster')")")
  printf '\n%s== timing%s\n' "$bold" "$reset"
  local line
  for line in "${timings[@]}"; do printf '   %s\n' "$line"; done
  printf '   %6ss  total%s\n' "$(elapsed "$t_start")" "$([ $rc -eq 0 ] || echo ' (failed)')"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# ---------------------------------------------------------------------------
# The story
# ---------------------------------------------------------------------------

step "1. A fresh local control plane (etcd, kube-apiserver, controller-manager, scheduler) and a real node"
say "state, logs and kubeconfig in $dir"
kubectl_dir=$(hack/k8s-binaries.sh kubectl)
kubectl=$kubectl_dir/kubectl
mkdir -p "$dir"
# Build the operator while the cluster starts: on a cold Go cache the build
# is the slow part.
go build -o "$dir/manager" ./cmd/manager >"$dir/build.log" 2>&1 &
build_pid=$!
if hack/local-cluster.sh status --dir "$dir" >/dev/null 2>&1; then
  say "a cluster from an earlier demo is still up there; starting afresh"
  hack/local-cluster.sh down --dir "$dir" 2>&1 | sed 's/^/   /'
fi
hack/local-cluster.sh up --dir "$dir" 2>&1 >"$dir/.demo-export" | sed 's/^/   /'
eval "$(cat "$dir/.demo-export")"
rm -f "$dir/.demo-export"
export KUBECONFIG
node_mode=$(sed -n 's/^NODE_MODE=//p' "$dir/cluster.env")
real=false
if [ "$node_mode" = real ]; then
  real=true
  # The release image (make image): http Tasks run its /task-runner.
  image_archive=${DEMO_IMAGE_ARCHIVE:-$root/bin/image/task-operator.tar}
  [ -f "$image_archive" ] || { echo "demo: no $image_archive: run make image (make demo does)" >&2; exit 1; }
  hack/local-cluster.sh load-image --dir "$dir" "$image_archive" 2>&1 | sed 's/^/   /'
else
  say "NOTE: this machine has no real node (see above), so pods are SIMULATED by kwok:"
  say "every Task succeeds, and the chapters that need a real container are skipped"
fi

step "2. Install the Task CRD and a namespace that enforces the restricted Pod Security Standard"
show apply --server-side -f config/crd/bases
# `kubectl wait` fails rather than waits while the CRD has no conditions yet.
for _ in $(seq 120); do
  [ "$(k get crd tasks.batch.taskops.io -o 'jsonpath={.status.conditions[?(@.type=="Established")].status}' 2>/dev/null)" = True ] && break
  sleep 0.5
done
k create namespace "$ns" >/dev/null
show label namespace "$ns" pod-security.kubernetes.io/enforce=restricted pod-security.kubernetes.io/warn=restricted

step "3. Build and start the operator in the background"
t_build=$(now)
if ! wait "$build_pid"; then
  cat "$dir/build.log" >&2
  echo "demo: go build ./cmd/manager failed" >&2
  exit 1
fi
build_pid=
say "operator built into $dir/manager (waited $(elapsed "$t_build") s for the build after the cluster was up)"
"$dir/manager" --log-format=console --metrics-bind-address=0 --health-probe-bind-address=0 >"$dir/operator.log" 2>&1 &
operator_pid=$!
deadline=$((SECONDS + 60))
until grep -q 'Starting workers' "$dir/operator.log" 2>/dev/null; do
  kill -0 "$operator_pid" 2>/dev/null || { echo "demo: the operator exited; see $dir/operator.log" >&2; exit 1; }
  [ $SECONDS -lt $deadline ] || { echo "demo: the operator did not start its workers within 60 s" >&2; exit 1; }
  sleep 0.2
done
say "operator running (pid $operator_pid), log: $dir/operator.log"

step "4. Apply the demo Tasks (samples/demo/)"
url=https://hooks.example.com/deploy.json
if $real; then
  # A web server on the node's bridge: pods reach it, nothing outside does.
  bridge_ip=$(sed -n 's/^BRIDGE_IP=//p' "$dir/cluster.env")
  mkdir -p "$dir/www"
  printf '{"deployed":true,"service":"billing"}\n' >"$dir/www/deploy.json"
  port=$(( (RANDOM % 5000) + 35000 ))
  busybox httpd -f -p "$bridge_ip:$port" -h "$dir/www" &
  httpd_pid=$!
  url=http://$bridge_ip:$port/deploy.json
  say "started a web server on the node's bridge: $url"
fi
printf '   $ kubectl apply -f samples/demo/\n'
for f in samples/demo/*.yaml; do
  sed "s|http://demo-server.invalid/deploy.json|$url|" "$f" | k apply -f - 2>&1 | sed 's/^/     /'
done

step "5. demo-hello: a shell Task that succeeds"
show wait --for=condition=Ready task/demo-hello --timeout=90s
show get task demo-hello
if $real; then
  say "what its container printed:"
  show logs -l batch.taskops.io/task=demo-hello
fi

step "6. demo-webhook: an http Task"
say "its pod runs /task-runner from the operator's image and calls $url"
show wait --for=condition=Ready task/demo-webhook --timeout=90s
say "the runner's summary, in the run's history:"
show get task demo-webhook -o jsonpath='{.status.history[0].message}{"\n"}'

step "7. demo-flaky: its script fails, then succeeds on a retry"
if $real; then
  say "its script writes to stderr and exits 1; wait for attempt 1 to fail:"
  say "the Task waits out its backoff (phase Retrying)"
  show wait --for=jsonpath='{.status.phase}'=Retrying task/demo-flaky --timeout=90s
  show get task demo-flaky -o jsonpath='{.status.lastError}{"\n"}'
  say "\"fix the problem\": spec edits apply to the next attempt"
  show patch task demo-flaky --type=merge -p='{"spec":{"shell":"echo schema is up to date"}}'
  show wait --for=condition=Ready task/demo-flaky --timeout=90s
  show get task demo-flaky
else
  say "skipped: a simulated pod does not run the script"
fi

step "8. demo-doomed: exit code 3 on every attempt, maxRetry 1"
if $real; then
  show wait --for=condition=Failed task/demo-doomed --timeout=90s
  show get task demo-doomed -o jsonpath='{.status.conditions[?(@.type=="Failed")].reason}{"\n"}'
  show get task demo-doomed -o jsonpath='{.status.lastError}{"\n"}'
else
  say "skipped: a simulated pod does not run the script"
fi

step "9. demo-every-20s: a cron Task (@every 20s) and its first run"
show get task demo-every-20s -o jsonpath='next run at {.status.nextScheduleTime}{"\n"}'
show wait --for=jsonpath='{.status.history[0].result}'=Succeeded task/demo-every-20s --timeout=90s
show get jobs -l batch.taskops.io/task=demo-every-20s -L batch.taskops.io/run

step "10. Everything at a glance"
show get tasks -o wide
say "demo-flaky's run history (status.history, newest first):"
show get task demo-flaky -o jsonpath='{range .status.history[*]}run {.runID}: {.result} after {.attempts} attempt(s), {.startTime} .. {.completionTime}: {.message}{"\n"}{end}'
say "and its story in events (kubectl describe task demo-flaky):"
printf '   $ kubectl describe task demo-flaky\n'
k describe task demo-flaky | sed -n '/^Events:/,$p' | sed 's/^/     /'
finish_step
printf '\n%s== the demo succeeded%s\n' "$bold" "$reset"
