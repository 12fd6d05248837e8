package planinput

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

func TestPlanInputCarriesPreferredLevels(t *testing.T) {
	tree := &groups.Tree{
		Info: groups.Info{Key: groups.Key{Kind: groups.PodGroupKind, Namespace: "ns", Name: "g"}, Gang: true, MinCount: 1,
			TopologyKey: "zone", PreferredKeys: []string{"rack", "block"}},
		Members: []groups.Member{{Pod: testPod("a", "1", ""), State: groups.Pending}},
	}
	g, _ := PlanInput(tree)
	assert.Equal(t, "zone", g.TopologyKey)
	assert.Equal(t, []string{"rack", "block"}, g.PreferredKeys)
}

// A self-matching required pod affinity pins the members to one domain of
// its key: a preferred level equal to it becomes required, and the levels
// above it no longer mean anything.
func TestAffinityKeyTrimsPreferredLevels(t *testing.T) {
	levels := []string{"host", "rack", "block"}
	assert.Equal(t, []string{"host"}, belowAffinity(levels, "rack"))
	assert.Empty(t, belowAffinity(levels, "host"))
	assert.Equal(t, levels, belowAffinity(levels, "zone"), "a wider key leaves them all")
	trimmed := belowAffinity(levels, "block")
	_ = append(trimmed, "x")
	assert.Equal(t, "block", levels[2], "the cache's slice is never written")
}
