package groups

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

// TestKueueTopologyGatedPodsAreNotMembers: a pod Kueue's TAS still gates
// (Kueue writes its node selector when it lifts the gate) is not counted
// toward its gang's quorum and not planned until the gate goes; a pod
// held by any other gate is a member, as before.
func TestKueueTopologyGatedPodsAreNotMembers(t *testing.T) {
	c := NewCache()
	c.SetPodGroup(podGroup("g", 2, ""))
	addMembers(c, inPodGroup("g"), "g", Pending)
	gated := newPod("g-gated", inPodGroup("g"))
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: KueueTopologyGate}}
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

	held := newPod("g-held", inPodGroup("g"))
	held.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
	c.AddOrUpdatePod(held)
	assert.Len(t, c.HierarchyMembers(held, func(s State) bool { return s == Pending }), 3, "a pod held by another gate is a member")
}
