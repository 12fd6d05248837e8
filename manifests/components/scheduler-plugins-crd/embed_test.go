package schedulerpluginscrd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"
)

func TestPodGroupCRDIsSchedulerPluginsPodGroup(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	require.NoError(t, yaml.Unmarshal(PodGroupCRD, crd))
	assert.Equal(t, "podgroups."+spv1alpha1.SchemeGroupVersion.Group, crd.Name)
	assert.Equal(t, "PodGroup", crd.Spec.Names.Kind)
	assert.Equal(t, apiextensionsv1.NamespaceScoped, crd.Spec.Scope)
	served := map[string]bool{}
	for _, v := range crd.Spec.Versions {
		served[v.Name] = v.Served
		if v.Name == spv1alpha1.SchemeGroupVersion.Version {
			require.NotNil(t, v.Subresources, "status is a subresource: its controller writes it there")
			assert.NotNil(t, v.Subresources.Status)
			props := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties
			for _, field := range []string{"minMember", "minResources", "scheduleTimeoutSeconds"} {
				assert.Contains(t, props, field)
			}
		}
	}
	assert.True(t, served[spv1alpha1.SchemeGroupVersion.Version], "serves %s", spv1alpha1.SchemeGroupVersion)
}

// An overlay that lists the component renders the CRD and nothing else of
// it.
func TestComponentAddsTheCRD(t *testing.T) {
	here, err := filepath.Abs(".")
	require.NoError(t, err)
	overlay := t.TempDir()
	// kustomize wants the component's path relative to the overlay.
	rel, err := filepath.Rel(overlay, here)
	require.NoError(t, err)
	kustomization := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncomponents:\n- " + rel + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644))
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), overlay)
	require.NoError(t, err)
	require.Len(t, resources.Resources(), 1)
	r := resources.Resources()[0]
	assert.Equal(t, "CustomResourceDefinition", r.GetKind())
	assert.Equal(t, "podgroups.scheduling.x-k8s.io", r.GetName())
}
