package placement_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// draRack is a rack of nodes with plenty of cpu whose devices of class
// gpu.example.com come through Options.Extra: free[i] of total on node i.
func draRack(rack string, total int64, free ...int64) ([]placement.Node, map[string]placement.ExtraRoom) {
	class := placement.DeviceResource("gpu.example.com")
	var nodes []placement.Node
	extra := map[string]placement.ExtraRoom{}
	for i, f := range free {
		n := mkNode(fmt.Sprintf("%s-n%d", rack, i), placement.Resources{cpu: 64000}, at("z", rack))
		nodes = append(nodes, n)
		extra[n.Name] = placement.ExtraRoom{
			Allocatable: placement.Resources{class: total},
			Requested:   placement.Resources{class: total - f},
		}
	}
	return nodes, extra
}

func deviceShape(count int64) placement.Shape {
	return placement.Shape{Requests: placement.Resources{cpu: 1000, placement.DeviceResource("gpu.example.com"): count}}
}

func TestDevicesCountLikeAnyResource(t *testing.T) {
	t.Run("a gang of one-device members gets one member per free device, several per node where several are free", func(t *testing.T) {
		nodes, extra := draRack("r1", 2, 2, 1, 0, 1)
		plan, err := placement.PlanGroup(nodes, withKey(gang("g", 4, 4, deviceShape(1)), rackKey), placement.Options{Extra: extra})
		require.NoError(t, err)
		perNode := map[string]int{}
		for _, n := range plan.Assignments {
			perNode[n]++
		}
		assert.Equal(t, map[string]int{"r1-n0": 2, "r1-n1": 1, "r1-n3": 1}, perNode)
	})

	t.Run("a gang the rack's devices cannot hold names the class and the shortfall", func(t *testing.T) {
		nodes, extra := draRack("r1", 1, 1, 1, 0)
		_, err := placement.PlanGroup(nodes, withKey(gang("g", 4, 4, deviceShape(1)), rackKey), placement.Options{Extra: extra})
		var inf *placement.Infeasible
		require.ErrorAs(t, err, &inf)
		assert.Equal(t, "r1", inf.BestDomain)
		assert.Equal(t, 2, inf.Fits)
		assert.Contains(t, inf.Reason, "short 2 devices of class gpu.example.com")
	})

	t.Run("nodes Extra does not list have no devices", func(t *testing.T) {
		nodes, extra := draRack("r1", 1, 1, 1)
		delete(extra, "r1-n1")
		_, err := placement.PlanGroup(nodes, gang("g", 2, 2, deviceShape(1)), placement.Options{Extra: extra})
		var inf *placement.Infeasible
		require.ErrorAs(t, err, &inf)
		assert.Contains(t, inf.Reason, "short 1 device of class gpu.example.com")
	})

	t.Run("preemption counts the devices its victims free", func(t *testing.T) {
		nodes, extra := draRack("r1", 1, 0, 0)
		victims := []placement.Victim{
			{Key: "low-0", Node: "r1-n0", Priority: 1, Requests: placement.Resources{cpu: 1000, placement.DeviceResource("gpu.example.com"): 1}},
			{Key: "other-class", Node: "r1-n1", Priority: 1, Requests: placement.Resources{cpu: 1000, placement.DeviceResource("nic.example.com"): 1}},
		}
		res, err := placement.FindVictims(nodes, victims, gang("g", 1, 1, deviceShape(1)), 100, placement.PreemptOptions{Options: placement.Options{Extra: extra}})
		require.NoError(t, err)
		assert.Equal(t, []string{"low-0"}, res.Victims)
	})
}

func TestDomainsFromOptions(t *testing.T) {
	// Two racks of 4 nodes whose devices fall into NVLink cliques that cut
	// across the racks: the clique, not the rack, is the domain asked for.
	nodes, extra := draRack("r1", 1, 1, 1, 1, 1)
	more, extra2 := draRack("r2", 1, 1, 1, 1, 1)
	nodes = append(nodes, more...)
	for k, v := range extra2 {
		extra[k] = v
	}
	clique := placement.DeviceAttributeKey("gpu.example.com/clique")
	domains := map[string]map[string]string{clique: {
		"r1-n0": "c1", "r1-n1": "c1", "r2-n0": "c1",
		"r1-n2": "c2", "r1-n3": "c2", "r2-n1": "c2", "r2-n2": "c2",
		// r2-n3's devices disagree: it is in no clique.
		// A node the snapshot lacks makes no domain of its own.
		"gone": "c9",
	}}

	t.Run("a required device level puts the gang in one domain of it, whatever the labels say", func(t *testing.T) {
		plan, err := placement.PlanGroup(nodes, withKey(gang("g", 4, 4, deviceShape(1)), clique), placement.Options{Extra: extra, Domains: domains})
		require.NoError(t, err)
		assert.Equal(t, "c2", plan.Domains["g"])
		for _, n := range plan.Assignments {
			assert.Equal(t, "c2", domains[clique][n], "node %s", n)
		}
	})

	t.Run("a gang no domain of the level holds names the level and its best domain", func(t *testing.T) {
		_, err := placement.PlanGroup(nodes, withKey(gang("g", 5, 5, deviceShape(1)), clique), placement.Options{Extra: extra, Domains: domains})
		var inf *placement.Infeasible
		require.ErrorAs(t, err, &inf)
		assert.Equal(t, "c2", inf.BestDomain)
		assert.Contains(t, inf.Reason, "no "+clique+" domain fits 5 pods: best c2 fits 4 (short 1 device of class gpu.example.com)")
	})

	t.Run("a level no node is in says what the nodes lack", func(t *testing.T) {
		_, err := placement.PlanGroup(nodes, withKey(gang("g", 2, 2, deviceShape(1)), clique),
			placement.Options{Extra: extra, Domains: map[string]map[string]string{clique: {}}})
		var inf *placement.Infeasible
		require.ErrorAs(t, err, &inf)
		assert.Contains(t, inf.Reason, "no node has devices of the group's classes that agree on one value of device attribute gpu.example.com/clique")
	})

	t.Run("a preferred device level falls back to the required rack", func(t *testing.T) {
		g := withKey(gang("g", 4, 4, deviceShape(1)), rackKey)
		g.PreferredKeys = []string{clique}
		// No clique holds 4 inside one rack (c2 has 2 nodes in r1 and 2 in
		// r2); rack r1 does, in its two cliques.
		plan, err := placement.PlanGroup(nodes, g, placement.Options{Extra: extra, Domains: domains})
		require.NoError(t, err)
		c := plan.Choices["g"]
		assert.False(t, c.Preferred)
		assert.Equal(t, clique, c.Key)
		assert.Equal(t, "r1", c.WithinDomain)
		assert.ElementsMatch(t, []string{"c1", "c2"}, c.Domains)
	})

	t.Run("a preferred device level without a required key takes the fullest clique that holds the gang", func(t *testing.T) {
		g := gang("g", 3, 3, deviceShape(1))
		g.PreferredKeys = []string{clique}
		plan, err := placement.PlanGroup(nodes, g, placement.Options{Extra: extra, Domains: domains})
		require.NoError(t, err)
		c := plan.Choices["g"]
		assert.True(t, c.Preferred, c.Message)
		assert.Equal(t, []string{"c1"}, c.Domains)
	})
}

func TestDeviceAttributeKeys(t *testing.T) {
	k := placement.DeviceAttributeKey("gpu.nvidia.com/cliqueId")
	assert.Equal(t, "device.phalanx.dev/gpu.nvidia.com/cliqueId", k)
	attr, ok := placement.DeviceAttributeOf(k)
	assert.True(t, ok)
	assert.Equal(t, "gpu.nvidia.com/cliqueId", attr)
	for _, label := range []string{"topology.phalanx.dev/rack", "device.phalanx.dev/rack", "zone"} {
		_, ok := placement.DeviceAttributeOf(label)
		assert.False(t, ok, label)
	}
}
