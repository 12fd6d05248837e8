#!/usr/bin/env bash
# Fails when generated code or CRDs differ from what `make generate` would
# produce: regenerates into a scratch copy of the tree and diffs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$root/hack/build-tools.sh"
tar -C "$root" --exclude=./bin --exclude=./.git --exclude=./.phalanx -cf - . | tar -C "$scratch" -xf -
"$root/hack/update-codegen.sh" "$scratch" >/dev/null
status=0
for p in apis/scheduling/v1alpha1/zz_generated.deepcopy.go pkg/workloadbuilder/zz_generated.deepcopy.go pkg/generated manifests/crds manifests/components/scheduler-plugins-crd charts/phalanx/crds; do
  if ! diff -ru "$root/$p" "$scratch/$p"; then
    status=1
  fi
done
if [ $status -ne 0 ]; then
  echo "generated files are stale or hand-edited: run 'make generate' and commit the result" >&2
  exit 1
fi
echo "generated files are up to date"
