package preemption

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// TestMostMembersServesChildrenBeyondTheMinimum: the victim search asks
// room for every child that has members, not only for a composite's
// minimum, so pending gangs under a basic root, or a gang joining a root
// whose minimum its running children already meet, get room from
// lower-priority pods.
func TestMostMembersServesChildrenBeyondTheMinimum(t *testing.T) {
	const zone = "zone"
	// Four 2-cpu nodes, two per zone, each full with a low pod of 2 cpu.
	var nodes []placement.Node
	var victims []placement.Victim
	for i := 0; i < 4; i++ {
		name := fmt.Sprintf("n%d", i)
		nodes = append(nodes, placement.Node{
			Name: name, Labels: map[string]string{zone: fmt.Sprintf("z%d", i/2)},
			Allocatable: placement.Resources{corev1.ResourceCPU: 2000}, Requested: placement.Resources{corev1.ResourceCPU: 2000},
			MaxPods: 10, PodCount: 1,
		})
		victims = append(victims, placement.Victim{
			Key: "low-" + name, Node: name, Requests: placement.Resources{corev1.ResourceCPU: 2000}, Priority: 10, Unit: "low-" + name,
		})
	}
	gang := func(name string, pending int, bound ...string) *placement.Group {
		g := &placement.Group{
			Name: name, Policy: placement.Gang, MinCount: 2,
			Shapes: []placement.Shape{{Requests: placement.Resources{corev1.ResourceCPU: 1000}}},
		}
		for i := 0; i < pending; i++ {
			g.Pending = append(g.Pending, placement.Pod{Key: fmt.Sprintf("%s-p%d", name, i)})
		}
		for i, n := range bound {
			g.Bound = append(g.Bound, placement.BoundPod{Key: fmt.Sprintf("%s-b%d", name, i), Node: n})
		}
		return g
	}

	t.Run("two zone gangs under a basic root", func(t *testing.T) {
		root := &placement.Group{Name: "root", Policy: placement.Basic, Children: []*placement.Group{
			{Name: "sub1", Policy: placement.Gang, MinGroupCount: 1, TopologyKey: zone, Children: []*placement.Group{gang("a", 2)}},
			{Name: "sub2", Policy: placement.Gang, MinGroupCount: 1, TopologyKey: zone, Children: []*placement.Group{gang("b", 2)}},
		}}
		result, err := mostMembers(nodes, victims, root, 100, placement.Options{})
		require.NoError(t, err)
		assert.Len(t, result.Victims, 2, "room for both gangs: one 2-cpu node each")
		assert.Len(t, result.Plan.Assignments, 4)
	})

	t.Run("a gang joining a root whose minimum is met", func(t *testing.T) {
		// a and b run on free nodes of zone z0; c joins and needs a low
		// pod's node in z0.
		free := append([]placement.Node(nil), nodes...)
		free = append(free, placement.Node{
			Name: "f0", Labels: map[string]string{zone: "z0"},
			Allocatable: placement.Resources{corev1.ResourceCPU: 4000}, Requested: placement.Resources{corev1.ResourceCPU: 4000}, MaxPods: 10, PodCount: 4,
		})
		root := &placement.Group{Name: "root", Policy: placement.Gang, MinGroupCount: 2, TopologyKey: zone, Children: []*placement.Group{
			gang("a", 0, "f0", "f0"), gang("b", 0, "f0", "f0"), gang("c", 2),
		}}
		result, err := mostMembers(free, victims, root, 100, placement.Options{})
		require.NoError(t, err)
		require.Len(t, result.Victims, 1, "one low pod of z0 makes room for c")
		assert.Contains(t, []string{"low-n0", "low-n1"}, result.Victims[0])
		assert.Len(t, result.Plan.Assignments, 2)
	})

	t.Run("an empty child is not waited for", func(t *testing.T) {
		root := &placement.Group{Name: "root", Policy: placement.Basic, Children: []*placement.Group{
			gang("a", 2), gang("empty", 0),
		}}
		result, err := mostMembers(nodes, victims, root, 100, placement.Options{})
		require.NoError(t, err)
		assert.Len(t, result.Victims, 1)
	})
}
