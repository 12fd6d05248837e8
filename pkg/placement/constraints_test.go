package placement_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

func onePerNode(s placement.Shape, class string) placement.Shape {
	s.Classes = append(s.Classes, class)
	s.Limits = append(s.Limits, placement.DomainLimit{Class: class, Max: 1, Reason: "one member per kubernetes.io/hostname (pod anti-affinity)"})
	return s
}

func cpuNodes(prefix string, count int, milli int64, opts ...nodeOpt) []placement.Node {
	var out []placement.Node
	for i := range count {
		out = append(out, mkNode(fmt.Sprintf("%s-%d", prefix, i), placement.Resources{cpu: milli}, opts...))
	}
	return out
}

func nodesOf(plan *placement.Plan) map[string]int {
	out := map[string]int{}
	for _, n := range plan.Assignments {
		out[n]++
	}
	return out
}

func TestPlanGroupMemberConstraints(t *testing.T) {
	t.Run("a one-per-node gang takes one node per member where resources would pack them", func(t *testing.T) {
		g := gang("ns/w", 3, 3, onePerNode(cpuShape(1000), "w"))
		plan, err := placement.PlanGroup(cpuNodes("n", 3, 32000), g, placement.Options{})
		require.NoError(t, err)
		assert.Equal(t, map[string]int{"n-0": 1, "n-1": 1, "n-2": 1}, nodesOf(plan))
	})

	t.Run("a one-per-node gang larger than the nodes is infeasible and says which constraint", func(t *testing.T) {
		g := gang("ns/w", 3, 3, onePerNode(cpuShape(1000), "w"))
		_, err := placement.PlanGroup(cpuNodes("n", 2, 32000), g, placement.Options{})
		var inf *placement.Infeasible
		require.True(t, errors.As(err, &inf), "want infeasible, got %v", err)
		assert.Equal(t, 2, inf.Fits)
		assert.Contains(t, inf.Reason, "one member per kubernetes.io/hostname (pod anti-affinity)")
	})

	t.Run("the limit holds across the leaves of a composite that share the class", func(t *testing.T) {
		a := gang("ns/a", 2, 2, onePerNode(cpuShape(1000), "job"))
		b := gang("ns/b", 2, 2, onePerNode(cpuShape(2000), "job"))
		root := composite("ns/job", placement.Gang, 2, "", a, b)
		plan, err := placement.PlanGroup(cpuNodes("n", 4, 32000), root, placement.Options{})
		require.NoError(t, err)
		assert.Len(t, nodesOf(plan), 4, "four members of one class on four nodes")
	})

	t.Run("a shape outside the class stays out of domains that hold it", func(t *testing.T) {
		// The driver carries rack anti-affinity against workers; workers
		// carry the symmetric term, as the adapter builds it.
		worker := cpuShape(1000)
		worker.Classes = []string{"worker"}
		worker.Limits = []placement.DomainLimit{{Key: rackKey, Class: "driver", Max: 1}}
		driver := cpuShape(1000)
		driver.Classes = []string{"driver"}
		driver.Limits = []placement.DomainLimit{{Key: rackKey, Class: "worker", Max: 1}}
		w := gang("ns/w", 2, 2, worker)
		d := gang("ns/d", 1, 1, driver)
		nodes := concat(cpuNodes("r1", 2, 32000, at("z", "r1")), cpuNodes("r2", 2, 32000, at("z", "r2")))
		plan, err := placement.PlanGroup(nodes, composite("ns/job", placement.Gang, 2, "", w, d), placement.Options{})
		require.NoError(t, err)
		racks := map[string]string{}
		for _, n := range nodes {
			racks[n.Name] = n.Labels[rackKey]
		}
		driverRack := racks[plan.Assignments["ns/d-0"]]
		for _, k := range []string{"ns/w-0", "ns/w-1"} {
			assert.NotEqual(t, driverRack, racks[plan.Assignments[k]], "worker %s shares the driver's rack", k)
		}
	})

	t.Run("a zone spread limit spreads the gang and counts the room running pods took", func(t *testing.T) {
		s := cpuShape(1000)
		s.Classes = []string{"spread"}
		// maxSkew 1 with za already one pod ahead: za takes nothing more
		// until the others catch up, zb and zc take one each.
		s.Limits = []placement.DomainLimit{{Key: zoneKey, Class: "spread", Max: 1, PerDomain: map[string]int{"za": 0}, Reason: "topology spread on " + zoneKey}}
		nodes := concat(cpuNodes("a", 2, 32000, at("za", "")), cpuNodes("b", 2, 32000, at("zb", "")), cpuNodes("c", 2, 32000, at("zc", "")))
		plan, err := placement.PlanGroup(nodes, gang("ns/s", 2, 2, s), placement.Options{})
		require.NoError(t, err)
		zones := map[string]int{}
		for _, n := range plan.Assignments {
			zones[n[:1]]++
		}
		assert.Equal(t, map[string]int{"b": 1, "c": 1}, zones)

		_, err = placement.PlanGroup(nodes, gang("ns/s", 3, 3, s), placement.Options{})
		var inf *placement.Infeasible
		require.True(t, errors.As(err, &inf), "want infeasible, got %v", err)
		assert.Contains(t, inf.Reason, "topology spread on "+zoneKey)
	})

	t.Run("node limits exclude nodes and cap others, and the exclusion is explained", func(t *testing.T) {
		s := cpuShape(1000)
		s.NodeLimit = map[string]int{"n-0": 0, "n-1": 2}
		s.Excluded = "1 node rejected by the scheduler's filters: node(s) had volume node affinity conflict"
		plan, err := placement.PlanGroup(cpuNodes("n", 2, 32000), gang("ns/g", 2, 3, s), placement.Options{})
		require.NoError(t, err)
		assert.Equal(t, map[string]int{"n-1": 2}, nodesOf(plan))
		assert.Equal(t, []string{"ns/g-2"}, plan.Unplaced)

		s.NodeLimit = map[string]int{"n-0": 0, "n-1": 0}
		_, err = placement.PlanGroup(cpuNodes("n", 2, 32000), gang("ns/g", 2, 3, s), placement.Options{})
		var inf *placement.Infeasible
		require.True(t, errors.As(err, &inf), "want infeasible, got %v", err)
		assert.Contains(t, inf.Reason, "volume node affinity conflict")
	})

	t.Run("shapes that differ only in their constraints are not merged", func(t *testing.T) {
		free := cpuShape(1000)
		limited := onePerNode(cpuShape(1000), "x")
		g := &placement.Group{Name: "ns/g", Policy: placement.Gang, MinCount: 4, Shapes: []placement.Shape{free, limited}}
		for i := range 4 {
			g.Pending = append(g.Pending, placement.Pod{Key: fmt.Sprintf("p%d", i), Shape: i % 2})
		}
		plan, err := placement.PlanGroup(cpuNodes("n", 2, 32000), g, placement.Options{})
		require.NoError(t, err)
		assert.NotEqual(t, plan.Assignments["p1"], plan.Assignments["p3"], "the limited pods share a node")
	})

	t.Run("invalid limits are input errors", func(t *testing.T) {
		s := cpuShape(1000)
		s.Limits = []placement.DomainLimit{{Max: 1}}
		_, err := placement.PlanGroup(cpuNodes("n", 1, 32000), gang("ns/g", 1, 1, s), placement.Options{})
		require.Error(t, err)
		var inf *placement.Infeasible
		assert.False(t, errors.As(err, &inf))
	})
}

func TestFindVictimsClearsBlockedNodes(t *testing.T) {
	// n-0 has room but a low-priority pod there refuses the shape (its
	// anti-affinity); n-1 is full of two low-priority pods. Evicting the
	// blocker helps only if the search knows it unblocks n-0.
	nodes := []placement.Node{
		mkNode("n-0", placement.Resources{cpu: 8000}, used(placement.Resources{cpu: 1000}), podSlots(110, 1)),
		mkNode("n-1", placement.Resources{cpu: 8000}, used(placement.Resources{cpu: 8000}), podSlots(110, 2)),
	}
	victims := []placement.Victim{
		{Key: "blocker", Node: "n-0", Requests: placement.Resources{cpu: 1000}, Priority: 1},
		{Key: "fat-a", Node: "n-1", Requests: placement.Resources{cpu: 4000}, Priority: 1},
		{Key: "fat-b", Node: "n-1", Requests: placement.Resources{cpu: 4000}, Priority: 1},
	}
	s := cpuShape(4000)
	s.BlockedBy = map[string][]string{"n-0": {"blocker"}}

	t.Run("planning alone keeps the shape off the blocked node", func(t *testing.T) {
		_, err := placement.PlanGroup(nodes, gang("ns/g", 1, 1, s), placement.Options{})
		var inf *placement.Infeasible
		require.True(t, errors.As(err, &inf), "want infeasible, got %v", err)
	})

	t.Run("preemption evicts the blocker and places the pod where it was", func(t *testing.T) {
		res, err := placement.FindVictims(nodes, victims, gang("ns/g", 1, 1, s), 100, placement.PreemptOptions{})
		require.NoError(t, err)
		assert.Equal(t, []string{"blocker"}, res.Victims)
		assert.Equal(t, "n-0", res.Plan.Assignments["ns/g-0"])
	})

	t.Run("a blocker that may not be evicted leaves the node blocked", func(t *testing.T) {
		high := append([]placement.Victim(nil), victims...)
		high[0].Priority = 1000
		res, err := placement.FindVictims(nodes, high, gang("ns/g", 1, 1, s), 100, placement.PreemptOptions{})
		require.NoError(t, err)
		assert.Equal(t, []string{"fat-a"}, res.Victims, "one of the pods on n-1 makes room")
		assert.Equal(t, "n-1", res.Plan.Assignments["ns/g-0"])
	})

	t.Run("the heuristic search clears blocked nodes too", func(t *testing.T) {
		res, err := placement.FindVictims(nodes, victims, gang("ns/g", 1, 1, s), 100, placement.PreemptOptions{MaxUnits: -1})
		require.NoError(t, err)
		assert.Equal(t, "n-0", res.Plan.Assignments["ns/g-0"])
		assert.Contains(t, res.Victims, "blocker")
	})
}

func TestFindVictimsCreditsCountedVictims(t *testing.T) {
	// A topology spread over hostnames that the members (steered to n-0 by
	// selector) carry and match. Both nodes have room for every member;
	// only the spread limits them. Max-PerDomain is what each domain counts.
	const host = "kubernetes.io/hostname"
	nodes := []placement.Node{
		mkNode("n-0", placement.Resources{cpu: 16000}, label(host, "n-0"), label("pick", "yes")),
		mkNode("n-1", placement.Resources{cpu: 16000}, label(host, "n-1")),
	}
	spread := func(maxSkew int, counts map[string]int, fixed bool, victims map[string]string) placement.Shape {
		floor := 0
		if !fixed {
			floor = counts["n-0"]
			for _, n := range counts {
				floor = min(floor, n)
			}
		}
		per := map[string]int{}
		for d, n := range counts {
			per[d] = maxSkew + floor - n
		}
		s := cpuShape(1000)
		s.NodeSelector = map[string]string{"pick": "yes"}
		s.Classes = []string{"spread"}
		s.Limits = []placement.DomainLimit{{Key: host, Class: "spread", Max: maxSkew + floor, PerDomain: per,
			Victims: victims, FixedFloor: fixed, Reason: "topology spread"}}
		return s
	}
	pod := func(key, node string, priority int32) placement.Victim {
		return placement.Victim{Key: key, Node: node, Requests: placement.Resources{cpu: 100}, Priority: priority}
	}
	find := func(t *testing.T, s placement.Shape, members int, victims []placement.Victim, maxUnits int) (*placement.Preemption, error) {
		t.Helper()
		return placement.FindVictims(nodes, victims, gang("ns/g", members, members, s), 100, placement.PreemptOptions{MaxUnits: maxUnits})
	}
	infeasible := func(t *testing.T, err error) {
		t.Helper()
		var inf *placement.Infeasible
		assert.True(t, errors.As(err, &inf), "want infeasible, got %v", err)
	}

	t.Run("evicting a counted pod opens its domain by one", func(t *testing.T) {
		// maxSkew 2 with a floor minDomains holds at zero: n-0 takes one
		// member beside low, two without it. other is cheaper, but it is
		// counted where no member may go.
		s := spread(2, map[string]int{"n-0": 1, "n-1": 1}, true, map[string]string{"low": "n-0", "other": "n-1"})
		victims := []placement.Victim{pod("low", "n-0", 10), pod("other", "n-1", 5)}
		_, err := placement.PlanGroup(nodes, gang("ns/g", 2, 2, s), placement.Options{})
		infeasible(t, err)
		for _, mode := range searchModes {
			t.Run(mode.name, func(t *testing.T) {
				res, err := find(t, s, 2, victims, mode.maxUnits)
				require.NoError(t, err)
				assert.Equal(t, []string{"low"}, res.Victims)
				assert.Equal(t, map[string]int{"n-0": 2}, nodesOf(res.Plan))
			})
		}
	})

	t.Run("emptying the least loaded domain closes every domain by one", func(t *testing.T) {
		// maxSkew 1: n-0 counts a and b, n-1 counts c, so n-0 is full.
		// Evicting a opens it for one member. Evicting b too empties n-0
		// below n-1, and the floor falls with it: still one member, which
		// a limit that only credited n-0 would have made two.
		s := spread(1, map[string]int{"n-0": 2, "n-1": 1}, false, map[string]string{"a": "n-0", "b": "n-0", "c": "n-1"})
		victims := []placement.Victim{pod("a", "n-0", 10), pod("b", "n-0", 20), pod("c", "n-1", 5)}
		for _, mode := range searchModes {
			t.Run(mode.name, func(t *testing.T) {
				res, err := find(t, s, 1, victims, mode.maxUnits)
				require.NoError(t, err)
				assert.Equal(t, []string{"a"}, res.Victims)
				_, err = find(t, s, 2, victims, mode.maxUnits)
				infeasible(t, err)
			})
		}
	})

	t.Run("a floor minDomains holds does not fall", func(t *testing.T) {
		s := spread(2, map[string]int{"n-0": 2, "n-1": 1}, true, map[string]string{"a": "n-0", "b": "n-0", "c": "n-1"})
		victims := []placement.Victim{pod("a", "n-0", 10), pod("b", "n-0", 20), pod("c", "n-1", 5)}
		res, err := find(t, s, 2, victims, 0)
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "b"}, res.Victims)
	})

	t.Run("a domain past its limit needs every pod it is over evicted", func(t *testing.T) {
		// Four counted pods, maxSkew 1 over a floor of zero: n-0 is three
		// past its limit, so one member needs all four evicted.
		s := spread(1, map[string]int{"n-0": 4, "n-1": 0}, true, map[string]string{"a": "n-0", "b": "n-0", "c": "n-0", "d": "n-0"})
		var victims []placement.Victim
		for i, k := range []string{"a", "b", "c", "d"} {
			victims = append(victims, pod(k, "n-0", int32(i+1)))
		}
		res, err := find(t, s, 1, victims, 0)
		require.NoError(t, err)
		assert.Equal(t, []string{"a", "b", "c", "d"}, res.Victims)
		_, err = find(t, s, 2, victims, 0)
		infeasible(t, err)
	})

	t.Run("a pod the preemptor may not evict opens nothing", func(t *testing.T) {
		s := spread(2, map[string]int{"n-0": 1, "n-1": 1}, true, map[string]string{"low": "n-0"})
		_, err := find(t, s, 2, []placement.Victim{pod("low", "n-0", 100)}, 0)
		infeasible(t, err)
	})
}
