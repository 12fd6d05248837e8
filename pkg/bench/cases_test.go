package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/sandbox"
)

// The two schedulers must be measured on the same constraint: if one arm's
// pods carried a different term or selector, the comparison would measure
// the difference, not the schedulers.
func TestAntiAffinityPodsMatchAcrossArms(t *testing.T) {
	c := Case{Gangs: 2, PodsPerGang: 8, AntiAffinity: true, Zones: 1, RacksPerZone: 1, NodesPerRack: 10}
	ph := benchPod(c, "gang-1-0", "gang-1", ArmPhalanx, "")
	up := benchPod(c, "gang-1-0", "gang-1", ArmUpstream, "")

	require.NotNil(t, ph.Spec.Affinity)
	assert.Equal(t, ph.Spec.Affinity, up.Spec.Affinity, "the same anti-affinity on both arms")
	assert.Equal(t, "gang-1", ph.Labels[GangLabel])
	assert.Equal(t, "gang-1", up.Labels[GangLabel])
	assert.Equal(t, "gang-1", ph.Labels[v1alpha1.PodGroupLabel], "Phalanx still finds the gang by its own label")

	terms := up.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	require.Len(t, terms, 1)
	assert.Equal(t, sandbox.HostnameLabel, terms[0].TopologyKey)
	assert.Equal(t, map[string]string{GangLabel: "gang-1"}, terms[0].LabelSelector.MatchLabels, "selects its own gang only")

	for _, n := range c.topology().Nodes() {
		assert.Equal(t, n.Name, n.Labels[sandbox.HostnameLabel], "every bench node carries its hostname label")
	}
	for _, g := range c.groups() {
		assert.Equal(t, sandbox.HostnameLabel, g.OnePerValueKey, "the placement check looks for shared nodes")
	}
}

func TestPodsWithoutAntiAffinityUnchanged(t *testing.T) {
	c := Case{Gangs: 1, PodsPerGang: 3}
	up := benchPod(c, "gang-0-0", "gang-0", ArmUpstream, "")
	assert.Nil(t, up.Spec.Affinity)
	assert.Empty(t, up.Labels)
	ph := benchPod(c, "gang-0-0", "gang-0", ArmPhalanx, "")
	assert.Equal(t, map[string]string{v1alpha1.PodGroupLabel: "gang-0"}, ph.Labels)
	for _, g := range c.groups() {
		assert.Empty(t, g.OnePerValueKey)
	}
}

// The ceiling's round-robin must itself pass the anti-affinity check, or
// its row would read as a violation that no scheduler caused.
func TestCeilingPlanKeepsAntiAffineGangsOnePerNode(t *testing.T) {
	c := Case{Gangs: 30, PodsPerGang: 8, AntiAffinity: true, Zones: 1, RacksPerZone: 2, NodesPerRack: 10}
	pods, nodes := ceilingPlan(c)
	nodeOf := map[string]string{}
	for i, p := range pods {
		nodeOf[p] = nodes[i]
	}
	for _, g := range c.groups() {
		seen := map[string]bool{}
		for _, m := range g.Members {
			assert.False(t, seen[nodeOf[m]], "gang %s has two members on %s", g.Name, nodeOf[m])
			seen[nodeOf[m]] = true
		}
	}
}
