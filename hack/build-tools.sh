#!/usr/bin/env bash
# Builds the pinned generators and linters (hack/tools/go.mod) into bin/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/hack/tools"
go build -o "$root/bin/" \
  k8s.io/code-generator/cmd/client-gen \
  k8s.io/code-generator/cmd/deepcopy-gen \
  k8s.io/code-generator/cmd/informer-gen \
  k8s.io/code-generator/cmd/lister-gen \
  sigs.k8s.io/controller-tools/cmd/controller-gen \
  honnef.co/go/tools/cmd/staticcheck
