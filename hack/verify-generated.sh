#!/usr/bin/env bash
# Regenerates the CRD, RBAC, deepcopy code and the chart's generated
# templates into a scratch folder and fails
# when the committed files differ, so nothing generated is edited by hand or
# left stale.
set -euo pipefail
cd "$(dirname "$0")/.."
cg=${CONTROLLER_GEN:?set CONTROLLER_GEN to the controller-gen binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cg" crd output:crd:artifacts:config="$tmp/crd" rbac:roleName=task-operator-manager output:rbac:artifacts:config="$tmp/rbac" paths="./..."
# One output folder per API package: each has its own zz_generated.deepcopy.go.
api_packages="api/v1alpha1 api/cli/v1alpha1"
for p in $api_packages; do
  "$cg" object:headerFile="hack/boilerplate.go.txt" output:object:dir="$tmp/object/$p" paths="./$p"
done
go run ./hack/release chart "$tmp/chart"
stale=0
for f in "$tmp"/chart/*; do
  diff "$f" "charts/task-operator/templates/$(basename "$f")" || stale=1
done
diff -r "$tmp/crd" config/crd/bases || stale=1
diff "$tmp/rbac/role.yaml" config/rbac/role.yaml || stale=1
for p in $api_packages; do
  diff "$tmp/object/$p/zz_generated.deepcopy.go" "$p/zz_generated.deepcopy.go" || stale=1
done
if [ "$(find api -name zz_generated.deepcopy.go -printf '%h\n' | sort)" != "$(printf '%s\n' $api_packages | sort)" ]; then
  echo "api_packages in $0 does not name every package with generated deepcopy code" >&2
  stale=1
fi
if [ $stale -ne 0 ]; then
  echo "generated files are stale: run 'make manifests generate' and commit the result" >&2
  exit 1
fi
echo "generated files are up to date"
