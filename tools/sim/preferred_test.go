package sim

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

func TestPreferredTopologyInScenarios(t *testing.T) {
	sc, err := Decode([]byte(`name: pref
cluster: {zones: 1, racks: 4, racksPerBlock: 2, nodesPerRack: 1}
steps:
- name: Create
  create:
    gangs:
    - {name: a, size: 2, topologyKey: zone, preferredTopology: [rack, block]}
    - {name: b, size: 2, api: upstream, preferredTopology: [rack]}
- name: Wait
  wait: {for: bound, group: a}
  expect: [{group: a, spans: {key: rack, count: 2}}]
`))
	require.NoError(t, err)

	nodes := sc.Cluster.nodes()
	require.Len(t, nodes, 4)
	assert.Equal(t, "zone-0-block-0", nodes[1].Labels[BlockLabel])
	assert.Equal(t, "zone-0-block-1", nodes[2].Labels[BlockLabel])
	assert.Contains(t, sc.Cluster.describe(), "4 racks (blocks of 2 racks)")

	a := &sc.Steps[0].Create.Gangs[0]
	assert.Equal(t, &v1alpha1.PodGroupSchedulingConstraints{
		Topology:          []v1alpha1.TopologyConstraint{{Key: ZoneLabel}},
		PreferredTopology: []v1alpha1.TopologyConstraint{{Key: RackLabel}, {Key: BlockLabel}},
	}, a.podGroup().Spec.SchedulingConstraints)
	b := &sc.Steps[0].Create.Gangs[1]
	assert.Equal(t, RackLabel, b.upstreamPodGroup().Annotations[v1alpha1.PreferredTopologyAnnotation], "upstream's API takes them as an annotation")
	assert.Contains(t, sc.Steps[0].describe(), "prefer one rack, else fewest racks in a block, one zone")

	for name, tc := range map[string]struct{ yaml, want string }{
		"a level twice":    {`{name: g, size: 1, preferredTopology: [rack, rack]}`, `steps[0].create.gangs[0].preferredTopology[1]: Duplicate value: "rack"`},
		"the topology key": {`{name: g, size: 1, topologyKey: rack, preferredTopology: [rack]}`, `steps[0].create.gangs[0].preferredTopology[0]: Invalid value: "rack": is the gang's topologyKey`},
		"not a key":        {`{name: g, size: 1, preferredTopology: ["a b"]}`, `steps[0].create.gangs[0].preferredTopology[0]: Invalid value: "a b"`},
		"on a label pair":  {`{name: g, size: 1, labelPair: true, preferredTopology: [rack]}`, `steps[0].create.gangs[0].preferredTopology: Forbidden`},
	} {
		_, err := Decode([]byte("name: bad\ncluster: {zones: 1, racks: 1, nodesPerRack: 1}\nsteps:\n- name: s\n  create: {gangs: [" + tc.yaml + "]}\n"))
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), tc.want, name)
	}
	_, err = Decode([]byte("name: bad\ncluster: {zones: 1, racks: 1, nodesPerRack: 1}\nsteps:\n- name: s\n  wait: {for: bound, group: g}\n  expect: [{group: g, spans: {key: rack, count: 0}}]\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "steps[0].expect[0].spans.count: Invalid value: 0")
}

// A group's PreferredTopology condition is shown under the table the first
// time it says something new, and beside the group in the HTML report.
func TestChoiceIsReported(t *testing.T) {
	labels := map[string]map[string]string{"n1": {RackLabel: "r1"}, "n2": {RackLabel: "r2"}}
	g := GroupState{Name: "workers", Kind: KindPodGroup, Policy: "gang min 2", PreferredKeys: []string{RackLabel}, Bound: 2,
		Domains: []string{"r1", "r2"}, Nodes: 2, Leaf: true, nodeNames: []string{"n1", "n2"},
		Choice: "placed in 2 topology.phalanx.dev/rack domains (r1, r2): no single topology.phalanx.dev/rack domain fits 2 pods"}
	snap := Snapshot{Groups: []GroupState{g}, nodeLabels: labels}
	assert.Equal(t, "rack r1, r2", g.Where())
	assert.True(t, spansCheck(g, labels, RackLabel, 2).Pass)
	assert.Equal(t, "workers: bound pods span 2 racks (r1, r2), want 1", spansCheck(g, labels, RackLabel, 1).Text)

	sc := &Scenario{Name: "s", Steps: []Step{{Name: "one"}, {Name: "two"}}}
	res := &Result{Scenario: sc, Steps: []StepResult{{Name: "one", Snapshot: snap, Duration: time.Second}, {Name: "two", Snapshot: snap}}}
	var out bytes.Buffer
	writeStep(&out, sc, 0, &res.Steps[0], Snapshot{})
	writeStep(&out, sc, 1, &res.Steps[1], res.Steps[0].Snapshot)
	assert.Equal(t, 1, strings.Count(out.String(), "> workers: placed in 2 topology.phalanx.dev/rack domains"), out.String())

	var html bytes.Buffer
	require.NoError(t, WriteReport(&html, []*Result{res}))
	assert.Contains(t, html.String(), `<tr class="note">`)
	assert.Contains(t, html.String(), "no single topology.phalanx.dev/rack domain fits 2 pods")
}
