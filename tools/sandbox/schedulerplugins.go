package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	restclient "k8s.io/client-go/rest"

	schedulerpluginscrd "github.com/phalanx-sched/phalanx/manifests/components/scheduler-plugins-crd"
)

// SchedulerPluginsCRD returns the scheduling.x-k8s.io PodGroup CRD of the
// optional kustomize component manifests/components/scheduler-plugins-crd,
// embedded in the binary: the sandbox, the bench and the tests serve
// exactly the manifest users install, with no dependency on a Go module
// cache at run time. make verify checks the component against the
// scheduler-plugins module the dialect's types come from.
func SchedulerPluginsCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	data := bytes.TrimPrefix(bytes.TrimSpace(schedulerpluginscrd.PodGroupCRD), []byte("---"))
	if err := yaml.Unmarshal(data, crd); err != nil {
		return nil, fmt.Errorf("decode the embedded scheduler-plugins PodGroup CRD: %w", err)
	}
	if crd.Name == "" {
		return nil, errors.New("the embedded scheduler-plugins PodGroup CRD has no name")
	}
	return crd, nil
}

// InstallSchedulerPluginsCRD creates scheduler-plugins' PodGroup CRD (kept
// if it exists) and waits until it is served.
func InstallSchedulerPluginsCRD(ctx context.Context, cfg *restclient.Config) error {
	crd, err := SchedulerPluginsCRD()
	if err != nil {
		return err
	}
	return installCRDObjects(ctx, cfg, []*apiextensionsv1.CustomResourceDefinition{crd})
}
