#!/usr/bin/env bash
# Builds (or reuses) Kueue, for `make test-kueue`, and prints two lines: the
# kueue binary and the folder of Kueue's CRDs (from the same module).
#
#   hack/kueue.sh
#
# Kueue is built from the Go module proxy at KUEUE_VERSION (its go.mod has
# no replace directives) into bin/kueue-<version>/, an ignored folder,
# reused on later runs (~3 min on 2 cores the first time). The operator does
# not depend on Kueue: only this test does.
set -euo pipefail

KUEUE_VERSION=v0.17.0

root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/bin/kueue-$KUEUE_VERSION"
mkdir -p "$out"
if [ ! -x "$out/kueue" ]; then
  start=$SECONDS
  echo "kueue: building sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION (~3 min on 2 cores)" >&2
  tmp="$out/.gobin.$$"
  GOBIN="$tmp" GOFLAGS=-mod=mod CGO_ENABLED=0 go install "sigs.k8s.io/kueue/cmd/kueue@$KUEUE_VERSION" >&2
  mv "$tmp/kueue" "$out/kueue" && rmdir "$tmp"
  echo "kueue: built in $((SECONDS - start)) s" >&2
fi
# The module's source is in the module cache once it was built.
dir=$(cd "$out" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$dir/config/components/crd/bases" ] || { echo "kueue: no CRDs under $dir" >&2; exit 1; }
echo "$out/kueue"
echo "$dir/config/components/crd/bases"
