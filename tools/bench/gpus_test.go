package bench

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// A DRA case and its twin must differ only in how the GPUs are described,
// or the ratio between them would measure something else too: the same
// nodes, gangs and pods, with a claim from the template on one side and
// nvidia.com/gpu on the other.
func TestGPUCaseAndItsTwin(t *testing.T) {
	for _, quick := range []bool{true, false} {
		byName := map[string]Case{}
		for _, c := range Cases(quick) {
			byName[c.Name] = c
		}
		found := 0
		for name, dra := range byName {
			if !strings.HasSuffix(name, "_DRA") {
				continue
			}
			found++
			twin, ok := byName[strings.TrimSuffix(name, "_DRA")+"_ExtendedResource"]
			require.True(t, ok, "%s has its twin", name)
			require.True(t, dra.dra())
			require.False(t, twin.dra())
			assert.Equal(t, dra.NodeCount(), twin.NodeCount())
			assert.Equal(t, dra.gangSizes(), twin.gangSizes())

			dp := benchPod(dra, "gang-0-0", "gang-0", ArmUpstream, "")
			tp := benchPod(twin, "gang-0-0", "gang-0", ArmUpstream, "")
			require.Len(t, dp.Spec.ResourceClaims, 1)
			assert.Equal(t, gpuClaimTemplate, *dp.Spec.ResourceClaims[0].ResourceClaimTemplateName)
			assert.Equal(t, []corev1.ResourceClaim{{Name: gpuClaimTemplate}}, dp.Spec.Containers[0].Resources.Claims)
			assert.Empty(t, tp.Spec.ResourceClaims)
			want := *resource.NewQuantity(int64(twin.GPUs.PerPod), resource.DecimalSI)
			assert.True(t, want.Equal(tp.Spec.Containers[0].Resources.Requests[sandbox.GPUResource]), "the twin requests its GPUs")
			assert.True(t, want.Equal(tp.Spec.Containers[0].Resources.Limits[sandbox.GPUResource]), "and limits them, as an extended resource must")
			delete(tp.Spec.Containers[0].Resources.Requests, sandbox.GPUResource)
			assert.Equal(t, dp.Spec.Containers[0].Resources.Requests, tp.Spec.Containers[0].Resources.Requests, "cpu and memory alike")

			_, has := dra.topology().Nodes()[0].Status.Allocatable[sandbox.GPUResource]
			assert.False(t, has, "DRA nodes offer their GPUs as devices only")
			tn := twin.topology().Nodes()[0].Status.Allocatable[sandbox.GPUResource]
			assert.Equal(t, int64(twin.GPUs.PerNode), tn.Value())

			// The ceiling's plan must fit the devices, or its claim
			// writes would allocate one device twice.
			pods, nodes := ceilingPlan(dra)
			perNode := map[string]int{}
			for i := range pods {
				perNode[nodes[i]]++
			}
			for n, k := range perNode {
				assert.LessOrEqual(t, k*dra.GPUs.PerPod, dra.GPUs.PerNode, "node %s", n)
			}
		}
		assert.Positive(t, found, "quick=%v has a DRA case", quick)
	}
}
