#!/usr/bin/env bash
# Regenerates deepcopy, clientset, listers, informers and CRD YAML, and
# copies the scheduler-plugins PodGroup CRD into its kustomize component
# and the Phalanx CRDs into the Helm chart.
# Usage: hack/update-codegen.sh [output-root]   (default: the repo itself)
# hack/verify-codegen.sh runs it into a scratch copy and diffs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root}
bin=$root/bin
mod=github.com/phalanx-sched/phalanx
header=$root/hack/boilerplate.go.txt

"$root/hack/build-tools.sh"

cd "$out"
rm -rf pkg/generated manifests/crds/*.yaml
"$bin/deepcopy-gen" --go-header-file "$header" --output-file zz_generated.deepcopy.go ./apis/scheduling/v1alpha1 ./pkg/workloadbuilder
"$bin/client-gen" --go-header-file "$header" --clientset-name versioned \
  --input-base "$mod/apis" --input scheduling/v1alpha1 \
  --output-pkg "$mod/pkg/generated/clientset" --output-dir pkg/generated/clientset
"$bin/lister-gen" --go-header-file "$header" \
  --output-pkg "$mod/pkg/generated/listers" --output-dir pkg/generated/listers ./apis/scheduling/v1alpha1
"$bin/informer-gen" --go-header-file "$header" \
  --versioned-clientset-package "$mod/pkg/generated/clientset/versioned" \
  --listers-package "$mod/pkg/generated/listers" \
  --output-pkg "$mod/pkg/generated/informers" --output-dir pkg/generated/informers ./apis/scheduling/v1alpha1
"$bin/controller-gen" crd:crdVersions=v1,maxDescLen=400 paths=./apis/... output:crd:artifacts:config=manifests/crds
"$root/hack/update-scheduler-plugins-crd.sh" "$out"
# The Helm chart installs the same CRDs from its crds/ (Helm does not
# template that folder), with the label kustomize's base adds to every
# object; TestHelmChart fails when they drift.
rm -f charts/phalanx/crds/*.yaml
for f in manifests/crds/*.yaml; do
  sed '0,/^metadata:$/s//metadata:\n  labels:\n    app.kubernetes.io\/part-of: phalanx/' "$f" > "charts/phalanx/crds/$(basename "$f")"
done
