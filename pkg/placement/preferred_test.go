package placement_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

const blockKey = "topology.phalanx.dev/block"

// rackNodes makes count nodes of 8 GPUs in zone/block/rack, with free[i]
// GPUs left free on node i (8 when free is shorter).
func rackNodes(zone, block, rack string, count int, free ...int64) []placement.Node {
	return gpuNodes(rack, count, free, at(zone, rack), label(blockKey, block))
}

// preferring gives g preferred levels, narrowest first.
func preferring(g *placement.Group, keys ...string) *placement.Group {
	g.PreferredKeys = keys
	return g
}

// racksOf counts the pods of a plan per rack label.
func racksOf(nodes []placement.Node, plan *placement.Plan) map[string]int {
	byName := map[string]placement.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	out := map[string]int{}
	for _, node := range plan.Assignments {
		out[byName[node].Labels[rackKey]]++
	}
	return out
}

// twoBlocks is one zone, two blocks of two racks of two 8-GPU nodes; free
// GPUs per rack are given node by node.
func twoBlocks(free map[string][]int64) []placement.Node {
	var nodes []placement.Node
	for _, b := range []string{"b0", "b1"} {
		for _, r := range []string{"0", "1"} {
			rack := b + "-r" + r
			nodes = append(nodes, rackNodes("z", b, rack, 2, free[rack]...)...)
		}
	}
	return nodes
}

func TestPreferredLevels(t *testing.T) {
	ladder := []string{rackKey, blockKey}
	runCases(t, []planCase{
		{
			name: "one rack when one holds the gang: the fullest such rack",
			// b0-r1 has 10 GPUs free, every other rack 16.
			nodes: twoBlocks(map[string][]int64{"b0-r1": {2, 8}}),
			root:  preferring(withKey(gang("ns/g", 8, 8, gpuShape(1)), zoneKey), ladder...),
			want: expect{placed: 8, domains: map[string]string{"ns/g": "z"}, check: func(t *testing.T, plan *placement.Plan) {
				c := plan.Choices["ns/g"]
				assert.True(t, c.Preferred)
				assert.Equal(t, []string{"b0-r1"}, c.Domains)
				assert.Equal(t, rackKey, c.Key)
				assert.Equal(t, blockKey, c.Within)
				assert.Equal(t, "b0", c.WithinDomain)
				assert.Equal(t, "placed in topology.phalanx.dev/rack b0-r1, its preferred level", c.Message)
			}},
		},
		{
			name: "no rack holds it: the fewest racks of the fullest block, and the status says why",
			// 12 pods of 2 GPUs: a rack holds at most 8. b0 offers 8+5,
			// b1 8+8: both need two racks; b0 keeps less room.
			nodes: twoBlocks(map[string][]int64{"b0-r1": {2, 8}}),
			root:  preferring(withKey(gang("ns/g", 12, 12, gpuShape(2)), zoneKey), ladder...),
			want: expect{placed: 12, check: func(t *testing.T, plan *placement.Plan) {
				c := plan.Choices["ns/g"]
				assert.False(t, c.Preferred)
				assert.Equal(t, []string{"b0-r0", "b0-r1"}, c.Domains)
				assert.Equal(t, "b0", c.WithinDomain)
				assert.Equal(t, "placed in 2 topology.phalanx.dev/rack domains of topology.phalanx.dev/block b0 (b0-r0, b0-r1): "+
					"no single topology.phalanx.dev/rack domain fits 12 pods: best b0-r0 fits 8 (short 8 nvidia.com/gpu)", c.Message)
			}},
		},
		{
			name: "the last rack is the smallest that holds the rest, so a big rack stays whole",
			// Block b0: racks of 16, 16 and 6 free GPUs; 10 one-GPU pods
			// take 16 + 6 rather than 16 + 16. Block b1 is empty.
			nodes: concat(
				rackNodes("z", "b0", "b0-r0", 2), rackNodes("z", "b0", "b0-r1", 2), rackNodes("z", "b0", "b0-r2", 2, 3, 3),
				rackNodes("z", "b1", "b1-r0", 1), rackNodes("z", "b1", "b1-r1", 1),
			),
			root: preferring(withKey(gang("ns/g", 20, 20, gpuShape(1)), zoneKey), ladder...),
			want: expect{placed: 20, check: func(t *testing.T, plan *placement.Plan) {
				assert.Equal(t, []string{"b0-r0", "b0-r2"}, plan.Choices["ns/g"].Domains)
			}},
		},
		{
			name:  "no block holds it: the fewest blocks of the zone",
			nodes: twoBlocks(nil),
			root:  preferring(withKey(gang("ns/g", 40, 40, gpuShape(1)), zoneKey), ladder...),
			want: expect{placed: 40, check: func(t *testing.T, plan *placement.Plan) {
				c := plan.Choices["ns/g"]
				assert.Equal(t, blockKey, c.Key)
				assert.Equal(t, []string{"b0", "b1"}, c.Domains)
				assert.Equal(t, zoneKey, c.Within)
				assert.Contains(t, c.Message, "no single topology.phalanx.dev/block domain fits 40 pods: best b0 fits 32")
			}},
		},
		{
			name:  "never beyond the required zone",
			nodes: concat(twoBlocks(nil), rackNodes("y", "b9", "b9-r0", 2)),
			root:  preferring(withKey(gang("ns/g", 70, 70, gpuShape(1)), zoneKey), ladder...),
			want: expect{infeasible: &placement.Infeasible{Group: "ns/g", TopologyKey: zoneKey, BestDomain: "z", Fits: 64, Need: 70,
				Reason: "no topology.kubernetes.io/zone domain fits 70 pods: best z fits 64 (short 6 nvidia.com/gpu)"}},
		},
		{
			name:  "without a required key the last level may span the cluster",
			nodes: concat(twoBlocks(nil), rackNodes("y", "b9", "b9-r0", 2)),
			root:  preferring(gang("ns/g", 70, 70, gpuShape(1)), ladder...),
			want: expect{placed: 70, check: func(t *testing.T, plan *placement.Plan) {
				c := plan.Choices["ns/g"]
				assert.Equal(t, blockKey, c.Key)
				assert.Equal(t, "", c.Within)
				assert.Equal(t, []string{"b0", "b1", "b9"}, c.Domains)
			}},
		},
		{
			name: "bound members keep their racks and add the fewest new ones",
			// Re-created: 4 bound in b1-r0 and b1-r1, 10 more wanted. The
			// block b0 would hold them in one rack; the group stays in b1.
			nodes: twoBlocks(map[string][]int64{"b1-r0": {6, 8}, "b1-r1": {6, 8}}),
			root: preferring(withKey(withBound(gang("ns/g", 14, 10, gpuShape(1)),
				"b1-r0-0", "b1-r0-0", "b1-r1-0", "b1-r1-0"), zoneKey), ladder...),
			want: expect{placed: 10, check: func(t *testing.T, plan *placement.Plan) {
				c := plan.Choices["ns/g"]
				assert.Equal(t, []string{"b1-r0", "b1-r1"}, c.Domains)
				assert.Equal(t, 2, c.Kept)
				assert.Equal(t, "b1", c.WithinDomain)
				assert.Contains(t, c.Message, "its bound members already span 2 topology.phalanx.dev/rack domains")
			}},
		},
		{
			name:  "bound members in one rack that cannot take the rest: one new rack of their block",
			nodes: twoBlocks(map[string][]int64{"b1-r0": {0, 4}}),
			root: preferring(withKey(withBound(gang("ns/g", 12, 8, gpuShape(1)),
				"b1-r0-0", "b1-r0-0", "b1-r0-0", "b1-r0-1"), zoneKey), ladder...),
			want: expect{placed: 8, check: func(t *testing.T, plan *placement.Plan) {
				c := plan.Choices["ns/g"]
				assert.Equal(t, []string{"b1-r0", "b1-r1"}, c.Domains)
				assert.Equal(t, 1, c.Kept)
				assert.Contains(t, c.Message, "topology.phalanx.dev/rack b1-r0, which holds its bound members, fits 4 of the 8 pods to place")
				assert.Contains(t, c.Message, "1 of them already held its bound members")
				assert.Equal(t, map[string]int{"b1-r0": 4, "b1-r1": 4}, racksOf(twoBlocks(nil), plan))
			}},
		},
		{
			name:  "a level no node has: the group waits and the status names the key",
			nodes: twoBlocks(nil),
			root:  preferring(withKey(gang("ns/g", 4, 4, gpuShape(1)), zoneKey), "example.com/pod-slice", rackKey),
			want: expect{infeasible: &placement.Infeasible{Group: "ns/g", TopologyKey: "example.com/pod-slice", Need: 4,
				Reason: "no node has the example.com/pod-slice label, a preferred topology level of the group"}},
		},
		{
			name:  "a preferred level wider than the required one is refused",
			nodes: twoBlocks(nil),
			root:  preferring(withKey(gang("ns/g", 4, 4, gpuShape(1)), rackKey), blockKey),
			want: expect{infeasible: &placement.Infeasible{Group: "ns/g", TopologyKey: blockKey, Need: 4,
				Reason: "preferred topology level topology.phalanx.dev/block is wider than topology.phalanx.dev/rack, the required level: " +
					"topology.phalanx.dev/block=b0 spans topology.phalanx.dev/rack=b0-r0 and topology.phalanx.dev/rack=b0-r1; list the levels narrowest first, below the required one"}},
		},
		{
			name:  "preferred levels out of order are refused",
			nodes: twoBlocks(nil),
			root:  preferring(withKey(gang("ns/g", 4, 4, gpuShape(1)), zoneKey), blockKey, rackKey),
			want: expect{infeasible: &placement.Infeasible{Group: "ns/g", TopologyKey: blockKey, Need: 4,
				Reason: "preferred topology level topology.phalanx.dev/block is wider than topology.phalanx.dev/rack, the next preferred level: " +
					"topology.phalanx.dev/block=b0 spans topology.phalanx.dev/rack=b0-r0 and topology.phalanx.dev/rack=b0-r1; list the levels narrowest first, below the required one"}},
		},
		{
			name: "rack names reused across zones are racks of their own zone",
			// r1 exists in both zones; zone a's r1 is nearly full, zone b's
			// r1 holds the gang. The nested domains keep them apart.
			nodes: concat(gpuNodes("a-r1", 2, []int64{1, 1}, at("a", "r1")), gpuNodes("a-r2", 1, []int64{0}, at("a", "r2")),
				gpuNodes("b-r1", 2, nil, at("b", "r1"))),
			root: preferring(gang("ns/g", 10, 10, gpuShape(1)), rackKey, zoneKey),
			want: expect{placed: 10, onNodes: map[string]int{"b-r1-0": 8, "b-r1-1": 2}, check: func(t *testing.T, plan *placement.Plan) {
				c := plan.Choices["ns/g"]
				assert.True(t, c.Preferred)
				assert.Equal(t, "b", c.WithinDomain)
			}},
		},
		{
			name:  "nodes without a level's label are left out",
			nodes: concat(rackNodes("z", "b0", "b0-r0", 1), gpuNodes("loose", 2, nil, at("z", ""), label(blockKey, "b0"))),
			root:  preferring(withKey(gang("ns/g", 12, 12, gpuShape(1)), zoneKey), ladder...),
			want: expect{infeasible: &placement.Infeasible{Group: "ns/g", TopologyKey: zoneKey, BestDomain: "z", Fits: 8, Need: 12,
				Reason: "no topology.kubernetes.io/zone domain fits 12 pods: best z fits 8 (short 4 nvidia.com/gpu)"}},
		},
		{
			name:  "a basic group spreads what no rack holds over the fewest racks",
			nodes: twoBlocks(nil),
			root:  preferring(basic("ns/g", 24, gpuShape(1)), ladder...),
			want: expect{placed: 24, check: func(t *testing.T, plan *placement.Plan) {
				assert.Len(t, plan.Choices["ns/g"].Domains, 2)
				assert.Equal(t, rackKey, plan.Choices["ns/g"].Key)
			}},
		},
		{
			name:  "a basic group larger than its scope places what fits",
			nodes: rackNodes("z", "b0", "b0-r0", 1),
			root:  preferring(basic("ns/g", 10, gpuShape(1)), ladder...),
			want:  expect{placed: 8, unplaced: []string{"ns/g-8", "ns/g-9"}},
		},
		{
			name: "a child's preferred rack sits inside its parent's zone",
			// Zone y has an empty rack that would take the workers alone,
			// but the driver only fits zone z, and the parent keeps both in
			// one zone.
			nodes: concat(twoBlocks(map[string][]int64{"b0-r0": {4, 4}, "b0-r1": {4, 4}, "b1-r0": {4, 4}, "b1-r1": {4, 4}}),
				rackNodes("y", "c0", "c0-r0", 2)),
			root: composite("ns/job", placement.Gang, 2, zoneKey,
				preferring(gang("ns/workers", 10, 10, gpuShape(1)), ladder...),
				withKey(gang("ns/driver", 1, 1, placement.Shape{Requests: placement.Resources{cpu: 1000}, NodeSelector: map[string]string{zoneKey: "z"}}), rackKey)),
			want: expect{placed: 11, check: func(t *testing.T, plan *placement.Plan) {
				assert.Equal(t, "z", plan.Domains["ns/job"])
				c := plan.Choices["ns/workers"]
				assert.Len(t, c.Domains, 2)
				assert.Equal(t, blockKey, c.Within)
			}},
		},
		{
			name:  "best fit among racks across required domains",
			nodes: concat(gpuNodes("a-r1", 1, nil, at("a", "a-r1")), gpuNodes("b-r1", 1, []int64{5}, at("b", "b-r1"))),
			root:  preferring(withKey(gang("ns/g", 4, 4, gpuShape(1)), zoneKey), rackKey),
			want:  expect{placed: 4, domains: map[string]string{"ns/g": "b"}},
		},
	})
}

func TestPreferredLevelsRejectBadInput(t *testing.T) {
	nodes := twoBlocks(nil)
	for name, root := range map[string]*placement.Group{
		"on a composite":   {Name: "ns/c", MinGroupCount: 1, PreferredKeys: []string{rackKey}, Children: []*placement.Group{gang("ns/g", 1, 1, gpuShape(1))}},
		"empty key":        preferring(gang("ns/g", 1, 1, gpuShape(1)), rackKey, ""),
		"twice":            preferring(gang("ns/g", 1, 1, gpuShape(1)), rackKey, rackKey),
		"the required one": preferring(withKey(gang("ns/g", 1, 1, gpuShape(1)), rackKey), rackKey),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := placement.PlanGroup(nodes, root, placement.Options{})
			require.Error(t, err)
			var inf *placement.Infeasible
			assert.NotErrorAs(t, err, &inf)
		})
	}
}

// TestPreferredRackAgainstBaselines is the reason for the feature in
// numbers: a stream of gangs on one block of four racks. Requiring a rack
// leaves the gangs larger than a rack pending; requiring only the block
// places them all but lets node-level best fit scatter a small gang over
// the racks' leftovers; preferring a rack places them all in the fewest
// racks.
func TestPreferredRackAgainstBaselines(t *testing.T) {
	var nodes []placement.Node
	for r := range 4 {
		rack := fmt.Sprintf("r%d", r)
		free := []int64{8, 8}
		if r < 3 {
			free = []int64{2, 8} // one pod of 2 GPUs fits the first node
		}
		nodes = append(nodes, rackNodes("z", "b0", rack, 2, free...)...)
	}
	sizes := []int{4, 10, 8}
	run := func(mk func(g *placement.Group) *placement.Group) (racks []int) {
		state := slices.Clone(nodes)
		for i, n := range state {
			state[i].Requested = placement.Resources{gpu: n.Requested[gpu]}
		}
		for i, size := range sizes {
			plan, err := placement.PlanGroup(state, mk(gang(fmt.Sprintf("ns/g%d", i), size, size, gpuShape(2))), placement.Options{})
			if err != nil {
				racks = append(racks, 0)
				continue
			}
			racks = append(racks, len(racksOf(state, plan)))
			for _, node := range plan.Assignments {
				for j := range state {
					if state[j].Name == node {
						state[j].Requested[gpu] += 2
					}
				}
			}
		}
		return racks
	}
	required := run(func(g *placement.Group) *placement.Group { return withKey(g, rackKey) })
	preferred := run(func(g *placement.Group) *placement.Group { return preferring(withKey(g, blockKey), rackKey) })
	blockOnly := run(func(g *placement.Group) *placement.Group { return withKey(g, blockKey) })
	assert.Equal(t, []int{1, 0, 1}, required, "racks per gang, 0 for a gang left pending")
	assert.Equal(t, []int{1, 2, 2}, preferred)
	assert.Equal(t, []int{3, 3, 2}, blockOnly)
}

// An elastic gang at its minimum (2 bound in zone z1's rack z1-r1, which
// has room for one more) grows its 2 members beyond the minimum into its
// preferred rack first, then elsewhere in its required zone, never into
// the other zone, whose nodes sort first; the choice then names the racks
// it spans.
func TestPreferredSurplusGrowsInsideTheRequiredDomain(t *testing.T) {
	nodes := concat(
		rackNodes("z0", "z0-b", "z0-r0", 1),
		rackNodes("z1", "z1-b", "z1-r0", 1),
		rackNodes("z1", "z1-b", "z1-r1", 3, 0, 0, 8),
	)
	g := preferring(withBound(withKey(gang("ns/elastic", 2, 2, gpuShape(8)), zoneKey), "z1-r1-0", "z1-r1-1"), rackKey)
	plan, err := placement.PlanGroup(nodes, g, placement.Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"ns/elastic-0": "z1-r1-2", "ns/elastic-1": "z1-r0-0"}, plan.Assignments)
	c := plan.Choices["ns/elastic"]
	assert.True(t, c.Outgrown, "%+v", c)
	assert.Equal(t, rackKey, c.Key)
	assert.Equal(t, []string{"z1-r1", "z1-r0"}, c.Domains, "the rack of its bound members first")
	assert.Equal(t, zoneKey, c.Within)
	assert.Equal(t, "z1", c.WithinDomain)
	t.Log(c.Message)

	// Room in its preferred rack for both: nothing outgrows it.
	nodes = concat(nodes, rackNodes("z1", "z1-b", "z1-r1", 4, 0, 0, 8, 8)[3:])
	plan, err = placement.PlanGroup(nodes, g, placement.Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"z1-r1": 2}, racksOf(nodes, plan))
	assert.False(t, plan.Choices["ns/elastic"].Outgrown)
}
