// Package crds embeds the generated CustomResourceDefinitions so that the
// sandbox and tests install exactly what `make generate` produced.
package crds

import "embed"

// FS holds the CRD manifests of this folder.
//
//go:embed *.yaml
var FS embed.FS
