// Package schedulerpluginscrd embeds the scheduler-plugins PodGroup CRD
// (scheduling.x-k8s.io/v1alpha1) of this optional kustomize component, so
// that the bench and tests install exactly the manifest shipped here.
package schedulerpluginscrd

import _ "embed"

// PodGroupCRD is podgroups.scheduling.x-k8s.io, as
// hack/update-scheduler-plugins-crd.sh copied it.
//
//go:embed scheduling.x-k8s.io_podgroups.yaml
var PodGroupCRD []byte
