package bench

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

func findCase(t *testing.T, cases []Case, suffix string) Case {
	t.Helper()
	for _, c := range cases {
		if strings.HasSuffix(c.Name, "Pods"+suffix) {
			return c
		}
	}
	t.Fatalf("no case ending in %s", suffix)
	return Case{}
}

// The preferred-topology stream runs under four constraints on the same
// cluster and gangs, so the baselines read against the preferred case.
func TestPreferredCasesAndTheirBaselines(t *testing.T) {
	for _, quick := range []bool{true, false} {
		all := Cases(quick)
		pref := findCase(t, all, "_PreferredRack_RequiredBlock")
		for suffix, want := range map[string][2]string{
			"_PreferredRack_RequiredBlock": {sandbox.BlockLabel, sandbox.RackLabel},
			"_RequiredBlock":               {sandbox.BlockLabel, ""},
			"_RequiredRack":                {sandbox.RackLabel, ""},
			"_Unconstrained":               {"", ""},
		} {
			c := findCase(t, all, suffix)
			assert.Equal(t, want[0], c.TopologyKey, c.Name)
			if want[1] == "" {
				assert.Empty(t, c.PreferredTopology, c.Name)
			} else {
				assert.Equal(t, []string{want[1]}, c.PreferredTopology, c.Name)
			}
			assert.Equal(t, pref.gangSizes(), c.gangSizes(), "%s has the stream's gangs", c.Name)
			assert.Equal(t, pref.NodeCount(), c.NodeCount())
			assert.Equal(t, sandbox.RackLabel, c.fragmentationKey(), "%s measures racks", c.Name)
		}
		nodes := pref.topology().Nodes()
		assert.Len(t, nodes, pref.NodeCount())
		blocks, racks := map[string]bool{}, map[string]bool{}
		for _, n := range nodes {
			blocks[n.Labels[sandbox.BlockLabel]] = true
			racks[n.Labels[sandbox.RackLabel]] = true
		}
		assert.Equal(t, len(racks), 4*len(blocks), "blocks of 4 racks")
		assert.Equal(t, pref.PodCount()*128, 86*pref.NodeCount(), "86 pods per 128 nodes")
	}
}

// Only Phalanx's arms and kueue-tas (through Kueue's own preferred
// level) can express a preferred level: the others skip the case instead
// of running it as something else.
func TestPreferredCaseSkipsOtherArms(t *testing.T) {
	h := &Harness{opts: Options{Logf: func(string, ...interface{}) {}}}
	c := findCase(t, Cases(true), "_PreferredRack_RequiredBlock")
	for _, arm := range []Arm{ArmUpstream, ArmCeiling, ArmSchedulerPlugins} {
		res := h.RunCase(context.Background(), c, arm, 1)
		assert.Contains(t, res.Skipped, "Phalanx extension", arm)
	}
	sc := phalanxPodGroup(c, gangSpec{name: "gang-0", size: 6}, false).Spec.SchedulingConstraints
	require.NotNil(t, sc)
	assert.Equal(t, sandbox.BlockLabel, sc.Topology[0].Key)
	assert.Equal(t, sandbox.RackLabel, sc.PreferredTopology[0].Key)
	assert.Nil(t, phalanxPodGroup(c, gangSpec{name: "low-0", size: 4}, true).Spec.SchedulingConstraints, "a preemption filler is unconstrained")
}
