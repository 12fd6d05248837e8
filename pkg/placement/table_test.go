package placement_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// TestNodeTableReuseMatchesAFreshPlan: a table built for a different
// cluster state and then brought up to date node by node, with part of
// every node's usage passed as reserved usage instead, must plan exactly
// as PlanGroup does on the nodes as they are. This covers the column
// growth, the domain cache invalidated by label changes, and reserved
// usage, over the randomized scenarios of the property test.
func TestNodeTableReuseMatchesAFreshPlan(t *testing.T) {
	cases := min(*propertyCases, 3000)
	for seed := range int64(cases) {
		rng := rand.New(rand.NewPCG(uint64(seed), 7))
		nodes, root, opts := genScenario(randSource{rng})

		// The stale state: no labels, cpu only, nothing used.
		stale := make([]placement.Node, len(nodes))
		for i, n := range nodes {
			stale[i] = placement.Node{Name: n.Name, Labels: map[string]string{}, Allocatable: placement.Resources{cpu: 1000}, MaxPods: 10}
		}
		table, err := placement.NewNodeTable(stale)
		require.NoError(t, err)
		// Plan once on the stale state so that domain indexes are cached.
		_, _ = table.Plan(root, nil, opts)

		var reserved []placement.Usage
		for _, i := range rng.Perm(len(nodes)) {
			n := nodes[i]
			base := n
			base.Requested = placement.Resources{}
			u := placement.Usage{Node: n.Name, Requested: placement.Resources{}}
			for name, v := range n.Requested {
				cut := v / 2
				base.Requested[name] = v - cut
				u.Requested[name] = cut
			}
			u.Pods = n.PodCount / 2
			base.PodCount = n.PodCount - u.Pods
			require.NoError(t, table.Update(base))
			reserved = append(reserved, u)
		}
		// Usage on a node the table does not have is ignored.
		reserved = append(reserved, placement.Usage{Node: "gone", Requested: placement.Resources{cpu: 1 << 40}, Pods: 1000})

		want, wantErr := placement.PlanGroup(nodes, root, opts)
		got, gotErr := table.Plan(root, reserved, opts)
		if !assert.Equal(t, wantErr, gotErr, "seed %d", seed) || !assert.Equal(t, want, got, "seed %d\n%s", seed, describe(nodes, root, opts)) {
			return
		}
	}
}

func TestNodeTableRejectsBadInput(t *testing.T) {
	_, err := placement.NewNodeTable([]placement.Node{mkNode("a", placement.Resources{cpu: 1}), mkNode("a", placement.Resources{cpu: 1})})
	assert.ErrorContains(t, err, `duplicate node "a"`)
	_, err = placement.NewNodeTable([]placement.Node{mkNode("", placement.Resources{cpu: 1})})
	assert.ErrorContains(t, err, "empty name")

	table, err := placement.NewNodeTable([]placement.Node{mkNode("b", placement.Resources{cpu: 1}), mkNode("a", placement.Resources{cpu: 1})})
	require.NoError(t, err)
	assert.Equal(t, 2, table.Len())
	assert.True(t, table.Has("a"))
	assert.Equal(t, "a", table.Nodes()[0].Name, "nodes are kept in name order")
	assert.ErrorContains(t, table.Update(mkNode("c", placement.Resources{cpu: 1})), `node "c" is not in the table`)
	assert.ErrorContains(t, table.Update(mkNode("a", placement.Resources{cpu: 1}, podSlots(-1, 0))), "negative pod counts")

	g := gang("ns/g", 1, 1, placement.Shape{Requests: placement.Resources{cpu: 1}})
	_, err = table.Plan(g, []placement.Usage{{Node: "a", Requested: placement.Resources{cpu: -1}}}, placement.Options{})
	assert.ErrorContains(t, err, `usage on node "a": negative cpu`)
	_, err = table.Plan(g, []placement.Usage{{Node: "a", Pods: -1}}, placement.Options{})
	assert.ErrorContains(t, err, `usage on node "a": negative pods`)

	// Reserved room is not offered: both nodes' single cpu is taken.
	full := []placement.Usage{
		{Node: "a", Requested: placement.Resources{corev1.ResourceCPU: 1}},
		{Node: "b", Requested: placement.Resources{corev1.ResourceCPU: 1}},
	}
	_, err = table.Plan(g, full, placement.Options{})
	var inf *placement.Infeasible
	assert.ErrorAs(t, err, &inf)
	plan, err := table.Plan(g, full[:1], placement.Options{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"ns/g-0": "b"}, plan.Assignments)
}

// TestNodesWithNegativeTotalsAreLeftOut: the scheduler's int64 sums wrap
// negative when pods ask for Ei of memory. Such a node gets no pods, and
// every other node still serves plans and victim searches.
func TestNodesWithNegativeTotalsAreLeftOut(t *testing.T) {
	huge := int64(5) << 60 // 5Ei: two of them sum past int64
	overflowed := mkNode("a-overflowed", placement.Resources{cpu: 64000, mem: 64 << 30}, used(placement.Resources{mem: huge + huge}), podSlots(110, 2))
	healthy := []placement.Node{
		mkNode("b-healthy", placement.Resources{cpu: 4000, mem: 64 << 30}, podSlots(110, 0)),
		mkNode("c-healthy", placement.Resources{cpu: 4000, mem: 64 << 30}, podSlots(110, 0)),
	}
	require.Negative(t, overflowed.Requested[mem], "precondition: the requested total wrapped")
	nodes := append([]placement.Node{overflowed}, healthy...)
	shape := placement.Shape{Requests: placement.Resources{cpu: 4000, mem: 1 << 30}}

	t.Run("a gang that fits on the other nodes is planned there", func(t *testing.T) {
		table, err := placement.NewNodeTable(nodes)
		require.NoError(t, err)
		plan, err := table.Plan(gang("ns/a", 2, 2, shape), nil, placement.Options{})
		require.NoError(t, err)
		assert.ElementsMatch(t, []string{"b-healthy", "c-healthy"}, values(plan.Assignments))
	})
	t.Run("a gang that would need the overflowed node is infeasible, not an error", func(t *testing.T) {
		table, err := placement.NewNodeTable(nodes)
		require.NoError(t, err)
		_, err = table.Plan(gang("ns/a", 3, 3, shape), nil, placement.Options{})
		var inf *placement.Infeasible
		assert.ErrorAs(t, err, &inf)
	})
	t.Run("the table names the node and the resource", func(t *testing.T) {
		table, err := placement.NewNodeTable(nodes)
		require.NoError(t, err)
		bad := table.Unusable()
		require.Len(t, bad, 1)
		assert.Equal(t, "a-overflowed", bad[0].Name)
		assert.Contains(t, bad[0].Reason, "requested memory is negative")
	})
	t.Run("a node fixed by an update is used again", func(t *testing.T) {
		table, err := placement.NewNodeTable(nodes)
		require.NoError(t, err)
		fixed := overflowed
		fixed.Requested = placement.Resources{}
		require.NoError(t, table.Update(fixed))
		assert.Empty(t, table.Unusable())
		plan, err := table.Plan(gang("ns/a", 3, 3, shape), nil, placement.Options{})
		require.NoError(t, err)
		assert.Contains(t, values(plan.Assignments), "a-overflowed")
	})
	t.Run("victims are still found on the other nodes", func(t *testing.T) {
		full := []placement.Node{overflowed,
			mkNode("b-healthy", placement.Resources{cpu: 4000, mem: 64 << 30}, used(placement.Resources{cpu: 4000}), podSlots(110, 1)),
		}
		victims := []placement.Victim{
			{Key: "ns/huge-0", Node: "a-overflowed", Requests: placement.Resources{mem: huge}, Priority: 0},
			{Key: "ns/huge-1", Node: "a-overflowed", Requests: placement.Resources{mem: huge}, Priority: 0},
			{Key: "ns/filler", Node: "b-healthy", Requests: placement.Resources{cpu: 4000}, Priority: 0},
		}
		result, err := placement.FindVictims(full, victims, gang("ns/a", 1, 1, shape), 100, placement.PreemptOptions{})
		require.NoError(t, err)
		assert.Equal(t, []string{"ns/filler"}, result.Victims)
	})
}

func values(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestPlansOnOneTableStartFromTheTable: plans on one table share working
// memory, and what an earlier plan left in it must not count as room. A
// node that took the earlier plan's pods and then overflowed gets nothing
// from the next plan, as from a plan on a fresh table.
func TestPlansOnOneTableStartFromTheTable(t *testing.T) {
	shape := placement.Shape{Requests: placement.Resources{cpu: 1000}}
	nodes := []placement.Node{
		mkNode("a", placement.Resources{cpu: 4000, mem: 64 << 30}),
		mkNode("b", placement.Resources{cpu: 4000, mem: 64 << 30}),
	}
	table, err := placement.NewNodeTable(nodes)
	require.NoError(t, err)
	_, err = table.Plan(gang("ns/first", 2, 2, shape), nil, placement.Options{})
	require.NoError(t, err)

	broken := nodes[0]
	broken.Requested = placement.Resources{mem: -1}
	require.NoError(t, table.Update(broken))
	plan, err := table.Plan(gang("ns/second", 4, 4, shape), nil, placement.Options{})
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "b", "b", "b"}, values(plan.Assignments))
	_, err = table.Plan(gang("ns/third", 5, 5, shape), nil, placement.Options{})
	var inf *placement.Infeasible
	assert.ErrorAs(t, err, &inf, "node b has room for 4 pods, node a for none")
}
