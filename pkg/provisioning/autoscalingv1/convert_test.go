package autoscalingv1

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// The JSON keys are the autoscaler's: a request written here reads back
// with the fields where the autoscaler's schema has them.
func TestRequestRoundTripsThroughUnstructured(t *testing.T) {
	pr := &ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "ns"},
		Spec: ProvisioningRequestSpec{
			ProvisioningClassName: ClassBestEffortAtomicScaleUp,
			PodSets:               []PodSet{{PodTemplateRef: Reference{Name: "t"}, Count: 4}},
		},
	}
	u, err := ToUnstructured(pr)
	require.NoError(t, err)
	assert.Equal(t, "autoscaling.x-k8s.io/v1", u.GetAPIVersion())
	assert.Equal(t, "ProvisioningRequest", u.GetKind())
	sets, _, _ := unstructuredSlice(u.Object, "spec", "podSets")
	require.Len(t, sets, 1)
	assert.Equal(t, map[string]any{"podTemplateRef": map[string]any{"name": "t"}, "count": int64(4)}, sets[0])
	back, err := FromUnstructured(u)
	require.NoError(t, err)
	assert.Equal(t, pr.Spec, back.Spec)
}

func unstructuredSlice(obj map[string]any, path ...string) ([]any, bool, error) {
	cur := any(obj)
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false, nil
		}
		cur = m[p]
	}
	s, ok := cur.([]any)
	return s, ok, nil
}

func TestCRDDecodes(t *testing.T) {
	var crd map[string]any
	require.NoError(t, yaml.Unmarshal(CRD, &crd))
	assert.Equal(t, "provisioningrequests.autoscaling.x-k8s.io", crd["metadata"].(map[string]any)["name"])
}
