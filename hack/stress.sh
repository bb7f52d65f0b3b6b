#!/usr/bin/env bash
# Runs the envtest suites (the Task controller with and without its speed
# shortcuts, the queue controller, the kubectl plugin, the fuzz seeds)
# STRESS_N times while STRESS_HOGS busy loops take the cores, then once
# under the race detector, and reports every failure by its test name.
# It is `make test-stress`, not part of `make test`: a suite that passes
# only on an idle machine fails by chance on CI (docs/development.md).
#
#   STRESS_N=10 STRESS_HOGS=2 hack/stress.sh
#
# Logs go to tmp/stress/ (one file per run); the exit code is 1 when any
# run failed.
set -euo pipefail
cd "$(dirname "$0")/.."

n=${STRESS_N:-10}
hogs=${STRESS_HOGS:-2}
out=tmp/stress
rm -rf "$out" && mkdir -p "$out"

KUBEBUILDER_ASSETS=$(hack/k8s-binaries.sh etcd kube-apiserver)
export KUBEBUILDER_ASSETS

# The suites, each run as `make test` runs it.
suites=(
  "shortcuts|./internal/reconciler/ ./internal/taskqueue/ ./internal/cli/ ./test/fuzz/|"
  "no-fast-path|./internal/reconciler/ ./internal/taskqueue/ ./test/fuzz/|TASK_OPERATOR_FAST_PATH=false"
)

hog_pids=()
stop_hogs() {
  for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${hog_pids[@]}"; do wait "$p" 2>/dev/null || true; done
  hog_pids=()
}
trap stop_hogs EXIT INT TERM

# Compile first, without the hogs: the runs then measure the tests, not the
# compiler.
for s in "${suites[@]}"; do
  IFS='|' read -r _ pkgs _ <<<"$s"
  # shellcheck disable=SC2086
  go test -count=1 -run '^$' $pkgs >/dev/null
done

for ((h = 0; h < hogs; h++)); do
  (while :; do :; done) &
  hog_pids+=($!)
done
echo "stress: $n runs of each suite with $hogs busy loops (TEST_TIMEOUT_SCALE=${TEST_TIMEOUT_SCALE:-default})"

failures=0
start=$SECONDS
for ((i = 1; i <= n; i++)); do
  for s in "${suites[@]}"; do
    IFS='|' read -r name pkgs envs <<<"$s"
    log="$out/run-$i-$name.log"
    t0=$SECONDS
    # shellcheck disable=SC2086
    if env $envs go test -count=1 -timeout 30m -v $pkgs >"$log" 2>&1; then
      echo "stress: run $i $name: ok ($((SECONDS - t0)) s)"
    else
      failures=$((failures + 1))
      echo "stress: run $i $name: FAILED ($((SECONDS - t0)) s, $log):"
      grep -E '^\s*--- FAIL|^FAIL|^panic:|timed out after' "$log" | sed 's/^/    /' || true
    fi
  done
done
stop_hogs
echo "stress: $n runs in $((SECONDS - start)) s, $failures failed run(s)"

# The race detector, once, on an idle machine: it looks for data races, not
# timing, and makes every test several times slower.
race_failed=0
for s in "${suites[@]}"; do
  IFS='|' read -r name pkgs envs <<<"$s"
  log="$out/race-$name.log"
  t0=$SECONDS
  # shellcheck disable=SC2086
  if env $envs go test -race -count=1 -timeout 30m -v $pkgs >"$log" 2>&1; then
    echo "stress: -race $name: ok ($((SECONDS - t0)) s)"
  else
    race_failed=1
    echo "stress: -race $name: FAILED ($((SECONDS - t0)) s, $log):"
    grep -E '^\s*--- FAIL|^FAIL|^WARNING: DATA RACE|^panic:' "$log" | sed 's/^/    /' || true
  fi
done

if [ "$failures" -gt 0 ] || [ "$race_failed" -ne 0 ]; then
  exit 1
fi
echo "stress: all passed"
