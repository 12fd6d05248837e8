package groups

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

// TestGatedPodsAreNotMembers: a pod still gated (by Kueue's TAS, say,
// which writes its node selector when it lifts the gate) is not counted
// toward its gang's quorum and not planned, until its last gate goes.
func TestGatedPodsAreNotMembers(t *testing.T) {
	c := NewCache()
	c.SetPodGroup(podGroup("g", 2, ""))
	addMembers(c, inPodGroup("g"), "g", Pending)
	gated := newPod("g-gated", inPodGroup("g"))
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/topology"}}
	c.AddOrUpdatePod(gated)

	ok, short, err := c.Quorum(gated, ByExisting)
	assert.NoError(t, err)
	assert.False(t, ok, "the gated pod does not complete the gang")
	assert.Equal(t, 1, short.Have)

	ungated := gated.DeepCopy()
	ungated.Spec.SchedulingGates = nil
	ungated.Spec.NodeSelector = map[string]string{corev1.LabelHostname: "node-1"}
	c.AddOrUpdatePod(ungated)
	ok, _, err = c.Quorum(ungated, ByExisting)
	assert.NoError(t, err)
	assert.True(t, ok, "ungated, it completes the gang")
	pending := c.HierarchyMembers(ungated, func(s State) bool { return s == Pending })
	assert.Len(t, pending, 2)
	for _, p := range pending {
		if p.UID == ungated.UID {
			assert.Equal(t, "node-1", p.Spec.NodeSelector[corev1.LabelHostname], "the member is planned with the spec its gate-holder wrote")
		}
	}
}
