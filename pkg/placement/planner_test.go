package placement_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// expect is what a case checks. Zero fields are not checked, except that a
// nil infeasible means the plan must succeed.
type expect struct {
	placed      int               // number of assignments
	assignments map[string]string // exact assignments, when set
	onNodes     map[string]int    // pods per node, when set
	domains     map[string]string // exact domains, when set
	unplaced    []string
	unsatisfied []string // groups in Plan.Unsatisfied, in order
	infeasible  *placement.Infeasible
	check       func(t *testing.T, plan *placement.Plan)
}

type planCase struct {
	name  string
	nodes []placement.Node
	root  *placement.Group
	opts  placement.Options
	want  expect
}

func runCases(t *testing.T, cases []planCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := placement.PlanGroup(tc.nodes, tc.root, tc.opts)
			if tc.want.infeasible != nil {
				var inf *placement.Infeasible
				require.ErrorAs(t, err, &inf)
				assert.Nil(t, plan)
				assertInfeasible(t, tc.want.infeasible, inf)
				return
			}
			require.NoError(t, err)
			require.NotNil(t, plan)
			// Every plan the table produces must also pass the invariants the
			// randomised tests check.
			require.NoError(t, verify(tc.nodes, tc.root, tc.opts, plan, err))
			w := tc.want
			assert.Len(t, plan.Assignments, w.placed, "assignments: %v", plan.Assignments)
			if w.assignments != nil {
				assert.Equal(t, w.assignments, plan.Assignments)
			}
			if w.onNodes != nil {
				perNode := map[string]int{}
				for _, n := range plan.Assignments {
					perNode[n]++
				}
				assert.Equal(t, w.onNodes, perNode)
			}
			if w.domains != nil {
				assert.Equal(t, w.domains, plan.Domains)
			}
			assert.Equal(t, w.unplaced, plan.Unplaced)
			var unsat []string
			for _, u := range plan.Unsatisfied {
				unsat = append(unsat, u.Group)
			}
			assert.Equal(t, w.unsatisfied, unsat)
			if w.check != nil {
				w.check(t, plan)
			}
		})
	}
}

// assertInfeasible compares the fields want sets (Reason only when non-empty).
func assertInfeasible(t *testing.T, want, got *placement.Infeasible) {
	t.Helper()
	assert.Equal(t, want.Group, got.Group, "group")
	assert.Equal(t, want.TopologyKey, got.TopologyKey, "topology key")
	assert.Equal(t, want.BestDomain, got.BestDomain, "best domain")
	assert.Equal(t, want.Fits, got.Fits, "fits")
	assert.Equal(t, want.Need, got.Need, "need")
	if want.Short != nil {
		assert.Equal(t, want.Short, got.Short, "short")
	}
	if want.Reason != "" {
		assert.Equal(t, want.Reason, got.Reason, "reason")
	}
	if want.Cause != nil {
		require.NotNil(t, got.Cause, "cause")
		assertInfeasible(t, want.Cause, got.Cause)
	}
}

func TestPlanGroupSingleLevel(t *testing.T) {
	runCases(t, []planCase{
		{
			name:  "an unconstrained gang that fits is placed entirely on the first node with room",
			nodes: gpuNodes("n", 2, nil),
			root:  gang("ns/a", 4, 4, gpuShape(2)),
			want:  expect{placed: 4, onNodes: map[string]int{"n-0": 4}, domains: map[string]string{}},
		},
		{
			name:  "pods are packed onto the most used nodes first",
			nodes: gpuNodes("n", 3, []int64{8, 2, 5}),
			root:  gang("ns/a", 3, 3, gpuShape(1)),
			want:  expect{placed: 3, onNodes: map[string]int{"n-1": 2, "n-2": 1}},
		},
		{
			name:  "a gang larger than the cluster is infeasible",
			nodes: gpuNodes("n", 1, nil),
			root:  gang("ns/a", 5, 5, gpuShape(2)),
			want: expect{infeasible: &placement.Infeasible{
				Group: "ns/a", Fits: 4, Need: 5, Short: placement.Resources{gpu: 2},
				Reason: "only 4 of 5 pods fit (short 2 nvidia.com/gpu)",
			}},
		},
		{
			name: "a rack-constrained gang lands in a single rack",
			nodes: concat(
				gpuNodes("a", 2, []int64{4, 4}, at("", "r1")),
				gpuNodes("b", 2, nil, at("", "r2")),
			),
			root: withKey(gang("ns/a", 6, 6, gpuShape(1)), rackKey),
			want: expect{placed: 6, onNodes: map[string]int{"a-0": 4, "a-1": 2}, domains: map[string]string{"ns/a": "r1"}},
		},
		{
			name:  "a gang above its minCount places every pod that fits and leaves the rest",
			nodes: gpuNodes("n", 1, nil),
			root:  gang("ns/a", 4, 10, gpuShape(1)),
			want:  expect{placed: 8, unplaced: []string{"ns/a-8", "ns/a-9"}},
		},
		{
			name:  "a gang already satisfied by bound members places what fits",
			nodes: gpuNodes("n", 1, []int64{1}),
			root:  withBound(gang("ns/a", 2, 2, gpuShape(1)), "n-0", "n-0"),
			want:  expect{placed: 1, unplaced: []string{"ns/a-1"}},
		},
		{
			name:  "a gang without pods and without minCount is an empty plan",
			nodes: gpuNodes("n", 1, nil),
			root:  gang("ns/a", 0, 0, gpuShape(1)),
			want:  expect{placed: 0},
		},
		{
			name: "pod slots limit a node as much as resources do",
			nodes: []placement.Node{
				mkNode("n-0", placement.Resources{cpu: 64000}, podSlots(3, 1)),
				mkNode("n-1", placement.Resources{cpu: 64000}, podSlots(2, 2)),
			},
			root: gang("ns/a", 2, 3, cpuShape(100)),
			want: expect{placed: 2, onNodes: map[string]int{"n-0": 2}, unplaced: []string{"ns/a-2"}},
		},
		{
			name: "a resource the node does not list counts as zero",
			nodes: []placement.Node{
				mkNode("cpu-only", placement.Resources{cpu: 64000}),
				mkNode("gpu", placement.Resources{cpu: 64000, gpu: 1}),
			},
			root: gang("ns/a", 1, 1, placement.Shape{Requests: placement.Resources{gpu: 1, cpu: 1000}}),
			want: expect{placed: 1, assignments: map[string]string{"ns/a-0": "gpu"}},
		},
	})
}

func TestPlanGroupMultiLevel(t *testing.T) {
	zoneRack := concat(
		gpuNodes("a1", 1, []int64{4}, at("zone-a", "a1")),
		gpuNodes("a2", 1, []int64{4}, at("zone-a", "a2")),
		gpuNodes("b1", 2, nil, at("zone-b", "b1")),
	)
	twoRacksInB := concat(
		gpuNodes("a1", 1, []int64{4}, at("zone-a", "a1")),
		gpuNodes("b1", 1, []int64{4}, at("zone-b", "b1")),
		gpuNodes("b2", 1, []int64{4}, at("zone-b", "b2")),
	)
	// Rack names repeat across zones, as they do when racks are numbered
	// per zone; a1's r1 is the tightest r1 overall.
	sharedRackNames := concat(
		gpuNodes("a", 1, []int64{2}, at("zone-a", "r1")),
		gpuNodes("b", 2, nil, at("zone-b", "r1")),
		gpuNodes("c", 1, []int64{1}, at("zone-b", "r2")),
	)
	runCases(t, []planCase{
		{
			name:  "a rack gang inside a zone composite skips a zone whose racks are too small",
			nodes: zoneRack,
			root: composite("ns/job", placement.Gang, 1, zoneKey,
				withKey(gang("ns/w", 6, 6, gpuShape(1)), rackKey)),
			want: expect{placed: 6, domains: map[string]string{"ns/job": "zone-b", "ns/w": "b1"}},
		},
		{
			name:  "two rack gangs of one composite share its zone and get a rack each",
			nodes: twoRacksInB,
			root: composite("ns/job", placement.Gang, 2, zoneKey,
				withKey(gang("ns/x", 4, 4, gpuShape(1)), rackKey),
				withKey(gang("ns/y", 4, 4, gpuShape(1)), rackKey)),
			want: expect{placed: 8, domains: map[string]string{"ns/job": "zone-b", "ns/x": "b1", "ns/y": "b2"}},
		},
		{
			name:  "a child's rack is chosen only among the nodes of the parent's zone",
			nodes: sharedRackNames,
			root: composite("ns/job", placement.Gang, 2, zoneKey,
				withBound(gang("ns/s", 1, 0, gpuShape(1)), "c-0"),
				withKey(gang("ns/w", 2, 2, gpuShape(1)), rackKey)),
			want: expect{placed: 2, onNodes: map[string]int{"b-0": 2}, domains: map[string]string{"ns/job": "zone-b", "ns/w": "r1"}},
		},
	})
}

func TestPlanGroupPinning(t *testing.T) {
	racks := concat(
		gpuNodes("r1", 1, nil, at("", "r1")),
		gpuNodes("r2", 1, []int64{4}, at("", "r2")),
	)
	fullR1 := concat(
		gpuNodes("r1", 1, []int64{0}, at("", "r1")),
		gpuNodes("r2", 1, nil, at("", "r2")),
	)
	almostFullR1 := concat(
		gpuNodes("r1", 1, []int64{1}, at("", "r1")),
		gpuNodes("r2", 1, nil, at("", "r2")),
	)
	zones := concat(
		gpuNodes("a", 1, []int64{6}, at("zone-a", "")),
		gpuNodes("b", 1, nil, at("zone-b", "")),
	)
	runCases(t, []planCase{
		{
			name:  "bound pods pin the rack even when another rack is a tighter fit",
			nodes: racks,
			root:  withKey(withBound(gang("ns/a", 5, 4, gpuShape(1)), "r1-0"), rackKey),
			want:  expect{placed: 4, onNodes: map[string]int{"r1-0": 4}, domains: map[string]string{"ns/a": "r1"}},
		},
		{
			name:  "a full pinned rack leaves re-created pods pending when bound members meet minCount",
			nodes: fullR1,
			root:  withKey(withBound(gang("ns/a", 2, 1, gpuShape(1)), "r1-0", "r1-0", "r1-0"), rackKey),
			want:  expect{placed: 0, domains: map[string]string{"ns/a": "r1"}, unplaced: []string{"ns/a-0"}},
		},
		{
			name:  "a full pinned rack is infeasible when bound members fall short of minCount",
			nodes: almostFullR1,
			root:  withKey(withBound(gang("ns/a", 4, 2, gpuShape(1)), "r1-0", "r1-0"), rackKey),
			want: expect{infeasible: &placement.Infeasible{
				Group: "ns/a", TopologyKey: rackKey, BestDomain: "r1", Fits: 3, Need: 4,
				Short:  placement.Resources{gpu: 1},
				Reason: "bound pods pin the group to topology.phalanx.dev/rack=r1, where only 3 of 4 pods fit (2 bound) (short 1 nvidia.com/gpu)",
			}},
		},
		{
			name:  "a bound pod on a node missing from the snapshot counts but does not pin",
			nodes: racks,
			root:  withKey(withBound(gang("ns/a", 5, 4, gpuShape(1)), "gone"), rackKey),
			want:  expect{placed: 4, domains: map[string]string{"ns/a": "r2"}},
		},
		{
			name:  "bound pods of one child pin the composite's zone for every child",
			nodes: zones,
			root: composite("ns/job", placement.Gang, 2, zoneKey,
				withBound(gang("ns/x", 2, 1, gpuShape(1)), "b-0"),
				gang("ns/y", 4, 4, gpuShape(1))),
			want: expect{placed: 5, onNodes: map[string]int{"b-0": 5}, domains: map[string]string{"ns/job": "zone-b"}},
		},
	})
}

func TestPlanGroupBasicPolicy(t *testing.T) {
	racks := concat(
		gpuNodes("r1", 1, []int64{3}, at("", "r1")),
		gpuNodes("r2", 1, []int64{5}, at("", "r2")),
	)
	runCases(t, []planCase{
		{
			name:  "a basic group places what fits and leaves the rest unplaced",
			nodes: gpuNodes("n", 1, []int64{4}),
			root:  basic("ns/a", 6, gpuShape(1)),
			want:  expect{placed: 4, unplaced: []string{"ns/a-4", "ns/a-5"}},
		},
		{
			name:  "a basic group with a rack key takes the rack that holds the most pods",
			nodes: racks,
			root:  withKey(basic("ns/a", 8, gpuShape(1)), rackKey),
			want:  expect{placed: 5, domains: map[string]string{"ns/a": "r2"}, unplaced: []string{"ns/a-5", "ns/a-6", "ns/a-7"}},
		},
		{
			name:  "a basic group whose key no node carries places nothing and does not fail",
			nodes: gpuNodes("n", 1, nil),
			root:  withKey(basic("ns/a", 2, gpuShape(1)), rackKey),
			want:  expect{placed: 0, unplaced: []string{"ns/a-0", "ns/a-1"}},
		},
		{
			name:  "a basic composite places the child that fits and reports the one that does not",
			nodes: gpuNodes("n", 1, nil),
			root: composite("ns/job", placement.Basic, 0, "",
				gang("ns/x", 4, 4, gpuShape(1)),
				gang("ns/y", 10, 10, gpuShape(1))),
			want: expect{
				placed: 4, unsatisfied: []string{"ns/y"},
				unplaced: []string{"ns/y-0", "ns/y-1", "ns/y-2", "ns/y-3", "ns/y-4", "ns/y-5", "ns/y-6", "ns/y-7", "ns/y-8", "ns/y-9"},
				check: func(t *testing.T, plan *placement.Plan) {
					u := plan.Unsatisfied[0]
					assert.Equal(t, 4, u.Fits)
					assert.Equal(t, 10, u.Need)
					assert.Equal(t, placement.Resources{gpu: 6}, u.Short)
				},
			},
		},
		{
			name:  "a basic composite with a zone key keeps every child in the zone where most of them fit",
			nodes: concat(gpuNodes("a", 1, []int64{4}, at("zone-a", "")), gpuNodes("b", 1, nil, at("zone-b", ""))),
			root: composite("ns/job", placement.Basic, 0, zoneKey,
				gang("ns/x", 4, 4, gpuShape(1)),
				gang("ns/y", 4, 4, gpuShape(1))),
			want: expect{placed: 8, domains: map[string]string{"ns/job": "zone-b"}},
		},
	})
}

func TestPlanGroupHeterogeneousShapes(t *testing.T) {
	driver := placement.Shape{Requests: placement.Resources{cpu: 3000}}
	worker := placement.Shape{Requests: placement.Resources{cpu: 1000, gpu: 2}}
	job := func(workers int) *placement.Group {
		g := &placement.Group{Name: "ns/job", Policy: placement.Gang, MinCount: workers + 1, Shapes: []placement.Shape{driver, worker}}
		g.Pending = append(g.Pending, placement.Pod{Key: "ns/driver", Shape: 0})
		for i := range workers {
			g.Pending = append(g.Pending, placement.Pod{Key: "ns/worker-" + string(rune('0'+i)), Shape: 1})
		}
		return g
	}
	gpuBox := func(name string) placement.Node {
		return mkNode(name, placement.Resources{cpu: 4000, gpu: 4})
	}
	runCases(t, []planCase{
		{
			name:  "a driver and its GPU workers are placed together, workers first",
			nodes: []placement.Node{gpuBox("gpu-a"), gpuBox("gpu-b"), mkNode("z-cpu", placement.Resources{cpu: 3000})},
			root:  job(4),
			want:  expect{placed: 5, onNodes: map[string]int{"gpu-a": 2, "gpu-b": 2, "z-cpu": 1}},
		},
		{
			name:  "a driver that no longer fits after its workers makes the gang infeasible without overcommitting",
			nodes: []placement.Node{gpuBox("gpu-a"), gpuBox("gpu-b")},
			root:  job(4),
			want: expect{infeasible: &placement.Infeasible{
				Group: "ns/job", Fits: 4, Need: 5, Short: placement.Resources{},
				Reason: "only 4 of 5 pods fit (free capacity is fragmented across nodes)",
			}},
		},
		{
			name: "two shapes of one rack gang are counted against the same rack",
			nodes: concat(
				[]placement.Node{mkNode("r1-gpu", placement.Resources{cpu: 4000, gpu: 4}, at("", "r1"))},
				[]placement.Node{mkNode("r2-gpu", placement.Resources{cpu: 4000, gpu: 4}, at("", "r2")), mkNode("r2-cpu", placement.Resources{cpu: 4000}, at("", "r2"))},
			),
			root: withKey(job(2), rackKey),
			want: expect{placed: 3, domains: map[string]string{"ns/job": "r2"}, onNodes: map[string]int{"r2-gpu": 2, "r2-cpu": 1}},
		},
	})
}

func TestPlanGroupNodeFilters(t *testing.T) {
	whole := placement.Shape{Requests: placement.Resources{gpu: 8}}
	tolerant := whole
	tolerant.Tolerations = []corev1.Toleration{{Key: teamKey, Operator: corev1.TolerationOpExists}}
	taintedNodes := concat(
		gpuNodes("a-noschedule", 1, nil, tainted(teamKey, teamTol, corev1.TaintEffectNoSchedule)),
		gpuNodes("b-noexecute", 1, nil, tainted(teamKey, teamTol, corev1.TaintEffectNoExecute)),
		gpuNodes("c-prefer", 1, nil, tainted(teamKey, teamTol, corev1.TaintEffectPreferNoSchedule)),
	)
	cordonedNodes := concat(gpuNodes("a-cordoned", 1, nil, cordoned()), gpuNodes("b-open", 1, nil))
	tolerateCordon := whole
	tolerateCordon.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	ssd := whole
	ssd.NodeSelector = map[string]string{diskKey: "ssd"}
	labeled := concat(
		gpuNodes("a", 1, nil, at("zone-a", ""), label(diskKey, "hdd")),
		gpuNodes("b", 1, nil, at("zone-b", ""), label(diskKey, "ssd")),
		gpuNodes("c", 1, nil, at("zone-a", ""), label(diskKey, "ssd")),
	)
	inZoneA := whole
	inZoneA.RequiredAffinity = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: zoneKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a"}}},
	}}}
	ssdInZoneA := inZoneA
	ssdInZoneA.NodeSelector = ssd.NodeSelector
	byName := whole
	byName.RequiredAffinity = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"b-0"}}},
	}}}
	numeric := concat(gpuNodes("n", 1, nil, tainted("level", "5", corev1.TaintEffectNoSchedule)))
	above3 := whole
	above3.Tolerations = []corev1.Toleration{{Key: "level", Operator: corev1.TolerationOpGt, Value: "3", Effect: corev1.TaintEffectNoSchedule}}

	runCases(t, []planCase{
		{
			name:  "pods without a toleration avoid NoSchedule and NoExecute taints but not PreferNoSchedule",
			nodes: taintedNodes,
			root:  basic("ns/a", 3, whole),
			want:  expect{placed: 1, assignments: map[string]string{"ns/a-0": "c-prefer-0"}, unplaced: []string{"ns/a-1", "ns/a-2"}},
		},
		{
			name:  "a toleration opens every tainted node",
			nodes: taintedNodes,
			root:  basic("ns/a", 3, tolerant),
			want:  expect{placed: 3},
		},
		{
			name:  "a cordoned node is skipped",
			nodes: cordonedNodes,
			root:  basic("ns/a", 2, whole),
			want:  expect{placed: 1, assignments: map[string]string{"ns/a-0": "b-open-0"}, unplaced: []string{"ns/a-1"}},
		},
		{
			name:  "a pod that tolerates the unschedulable taint may use a cordoned node",
			nodes: cordonedNodes,
			root:  basic("ns/a", 2, tolerateCordon),
			want:  expect{placed: 2},
		},
		{
			name:  "a node selector restricts the nodes",
			nodes: labeled,
			root:  basic("ns/a", 3, ssd),
			want:  expect{placed: 2, onNodes: map[string]int{"b-0": 1, "c-0": 1}, unplaced: []string{"ns/a-2"}},
		},
		{
			name:  "required node affinity restricts the nodes",
			nodes: labeled,
			root:  basic("ns/a", 3, inZoneA),
			want:  expect{placed: 2, onNodes: map[string]int{"a-0": 1, "c-0": 1}, unplaced: []string{"ns/a-2"}},
		},
		{
			name:  "a node selector and affinity must both match",
			nodes: labeled,
			root:  basic("ns/a", 3, ssdInZoneA),
			want:  expect{placed: 1, assignments: map[string]string{"ns/a-0": "c-0"}, unplaced: []string{"ns/a-1", "ns/a-2"}},
		},
		{
			name:  "a matchFields affinity selects a node by name",
			nodes: labeled,
			root:  basic("ns/a", 1, byName),
			want:  expect{placed: 1, assignments: map[string]string{"ns/a-0": "b-0"}},
		},
		{
			name:  "a gang whose selector matches no node says so",
			nodes: gpuNodes("n", 2, nil),
			root:  gang("ns/a", 1, 1, ssd),
			want: expect{infeasible: &placement.Infeasible{
				Group: "ns/a", Fits: 0, Need: 1, Short: placement.Resources{gpu: 8, corev1.ResourcePods: 1},
				Reason: "only 0 of 1 pods fit (no node there matches the pods' node selector, affinity and tolerations)",
			}},
		},
		{
			name:  "a Gt toleration does not match while comparison operators are off",
			nodes: numeric,
			root:  basic("ns/a", 1, above3),
			want:  expect{placed: 0, unplaced: []string{"ns/a-0"}},
		},
		{
			name:  "a Gt toleration matches a larger taint value once comparison operators are on",
			nodes: numeric,
			root:  basic("ns/a", 1, above3),
			opts:  placement.Options{TaintComparisonOperators: true},
			want:  expect{placed: 1},
		},
	})
}

func TestPlanGroupCompositeMinGroupCount(t *testing.T) {
	twoGangs := func(minGroupCount int) *placement.Group {
		return composite("ns/job", placement.Gang, minGroupCount, "",
			gang("ns/x", 4, 4, gpuShape(1)),
			gang("ns/y", 4, 4, gpuShape(1)))
	}
	runCases(t, []planCase{
		{
			name:  "two gangs of four with room for four are infeasible",
			nodes: gpuNodes("n", 1, []int64{4}),
			root:  twoGangs(2),
			want: expect{infeasible: &placement.Infeasible{
				Group: "ns/job", Fits: 1, Need: 2, Short: placement.Resources{gpu: 4},
				Reason: "only 1 of 2 child groups fit (ns/y: only 0 of 4 pods fit (short 4 nvidia.com/gpu))",
				Cause:  &placement.Infeasible{Group: "ns/y", Fits: 0, Need: 4, Short: placement.Resources{gpu: 4}},
			}},
		},
		{
			name:  "two gangs of four with room for seven are infeasible: children never share capacity",
			nodes: gpuNodes("n", 1, []int64{7}),
			root:  twoGangs(2),
			want: expect{infeasible: &placement.Infeasible{
				Group: "ns/job", Fits: 1, Need: 2, Short: placement.Resources{gpu: 1},
				Cause: &placement.Infeasible{Group: "ns/y", Fits: 3, Need: 4, Short: placement.Resources{gpu: 1}},
			}},
		},
		{
			name:  "two gangs of four with room for eight are placed entirely",
			nodes: gpuNodes("n", 1, nil),
			root:  twoGangs(2),
			want:  expect{placed: 8},
		},
		{
			name:  "with minGroupCount 1 the gang that fits is placed and the other is reported",
			nodes: gpuNodes("n", 1, []int64{6}),
			root:  twoGangs(1),
			want: expect{
				placed: 4, unsatisfied: []string{"ns/y"},
				unplaced: []string{"ns/y-0", "ns/y-1", "ns/y-2", "ns/y-3"},
			},
		},
		{
			name:  "when only some children are needed the smallest quorums go first so that the most are satisfied",
			nodes: gpuNodes("n", 1, []int64{4}),
			root: composite("ns/job", placement.Gang, 2, "",
				gang("ns/big", 4, 4, gpuShape(1)),
				gang("ns/x", 2, 2, gpuShape(1)),
				gang("ns/y", 2, 2, gpuShape(1))),
			want: expect{
				placed: 4, unsatisfied: []string{"ns/big"},
				unplaced: []string{"ns/big-0", "ns/big-1", "ns/big-2", "ns/big-3"},
			},
		},
		{
			name:  "surplus pods of one gang never take a sibling's quorum",
			nodes: gpuNodes("n", 1, nil),
			root: composite("ns/job", placement.Gang, 2, "",
				gang("ns/x", 2, 6, gpuShape(1)),
				gang("ns/y", 4, 4, gpuShape(1))),
			want: expect{placed: 8, unplaced: []string{"ns/x-4", "ns/x-5"}},
		},
		{
			name: "a composite gang of composites needs each inner quorum",
			nodes: concat(
				gpuNodes("a", 1, []int64{8}, at("zone-a", "")),
				gpuNodes("b", 2, nil, at("zone-b", "")),
			),
			root: composite("ns/job", placement.Gang, 2, zoneKey,
				composite("ns/ps", placement.Gang, 1, "", gang("ns/ps-0", 4, 4, gpuShape(1))),
				composite("ns/workers", placement.Gang, 2, "",
					gang("ns/w-0", 4, 4, gpuShape(1)),
					gang("ns/w-1", 4, 4, gpuShape(1)))),
			want: expect{placed: 12, domains: map[string]string{"ns/job": "zone-b"}},
		},
		{
			name:  "a composite that needs more children than it has is infeasible",
			nodes: gpuNodes("n", 1, nil),
			root:  twoGangs(3),
			want: expect{infeasible: &placement.Infeasible{
				Group: "ns/job", Fits: 2, Need: 3,
				Reason: "only 2 of the 3 child groups it needs exist",
			}},
		},
	})
}

func TestPlanGroupDomainPolicy(t *testing.T) {
	racks := concat(
		gpuNodes("r1", 1, []int64{6}, at("", "r1")),
		gpuNodes("r2", 1, []int64{8}, at("", "r2")),
		gpuNodes("r3", 1, []int64{4}, at("", "r3")),
		gpuNodes("r4", 1, []int64{2}, at("", "r4")),
	)
	rackGang := func(minCount, pods int) *placement.Group {
		return withKey(gang("ns/a", minCount, pods, gpuShape(1)), rackKey)
	}
	domain := func(rack string) map[string]string { return map[string]string{"ns/a": rack} }
	runCases(t, []planCase{
		{
			name:  "best fit picks the tightest rack that fits",
			nodes: racks,
			root:  rackGang(4, 4),
			want:  expect{placed: 4, domains: domain("r3")},
		},
		{
			name:  "best fit moves to the next tightest rack when the tightest is too small",
			nodes: racks,
			root:  rackGang(5, 5),
			want:  expect{placed: 5, domains: domain("r1")},
		},
		{
			name:  "best fit prefers a rack that holds every pod over a tighter one that holds only minCount",
			nodes: racks,
			root:  rackGang(4, 6),
			want:  expect{placed: 6, domains: domain("r1")},
		},
		{
			name:  "worst fit picks the roomiest rack",
			nodes: racks,
			root:  rackGang(4, 4),
			opts:  placement.Options{DomainPolicy: placement.WorstFit},
			want:  expect{placed: 4, domains: domain("r2")},
		},
		{
			name:  "first fit picks the first rack by name that fits",
			nodes: racks,
			root:  rackGang(4, 4),
			opts:  placement.Options{DomainPolicy: placement.FirstFit},
			want:  expect{placed: 4, domains: domain("r1")},
		},
		{
			name:  "equally tight racks are broken by name",
			nodes: concat(gpuNodes("x", 1, []int64{4}, at("", "rb")), gpuNodes("y", 1, []int64{4}, at("", "ra"))),
			root:  rackGang(4, 4),
			want:  expect{placed: 4, domains: domain("ra")},
		},
		{
			name: "best fit picks the tightest zone for a composite",
			nodes: concat(
				gpuNodes("a", 2, nil, at("zone-a", "")),
				gpuNodes("b", 1, []int64{7}, at("zone-b", "")),
			),
			root: composite("ns/job", placement.Gang, 2, zoneKey,
				gang("ns/x", 3, 3, gpuShape(1)),
				gang("ns/y", 4, 4, gpuShape(1))),
			want: expect{placed: 7, domains: map[string]string{"ns/job": "zone-b"}},
		},
	})
}

func TestPlanGroupInfeasibleReport(t *testing.T) {
	specExample := concat(
		gpuNodes("rack-1", 1, []int64{4}, at("", "rack-1")),
		gpuNodes("rack-2", 1, []int64{8}, at("", "rack-2")),
		gpuNodes("rack-3", 2, []int64{8, 4}, at("", "rack-3")),
	)
	zoned := concat(
		gpuNodes("a", 1, []int64{4}, at("zone-a", "a1")),
		gpuNodes("b", 1, []int64{2}, at("zone-b", "b1")),
	)
	runCases(t, []planCase{
		{
			name:  "the best rack, its fit against minCount and the missing GPUs are reported",
			nodes: specExample,
			root:  withKey(gang("ns/a", 8, 8, gpuShape(2)), rackKey),
			want: expect{infeasible: &placement.Infeasible{
				Group: "ns/a", TopologyKey: rackKey, BestDomain: "rack-3", Fits: 6, Need: 8,
				Short:  placement.Resources{gpu: 4},
				Reason: "no topology.phalanx.dev/rack domain fits 8 pods: best rack-3 fits 6 (short 4 nvidia.com/gpu)",
			}},
		},
		{
			name:  "missing pod slots are reported as pods",
			nodes: []placement.Node{mkNode("n", placement.Resources{cpu: 64000}, podSlots(10, 8))},
			root:  gang("ns/a", 4, 4, cpuShape(100)),
			want: expect{infeasible: &placement.Infeasible{
				Group: "ns/a", Fits: 2, Need: 4, Short: placement.Resources{corev1.ResourcePods: 2},
				Reason: "only 2 of 4 pods fit (short 2 pods)",
			}},
		},
		{
			name:  "missing cpu and memory are written as quantities",
			nodes: []placement.Node{mkNode("n", placement.Resources{cpu: 2000, mem: 4 * gibibyte})},
			root:  gang("ns/a", 3, 3, placement.Shape{Requests: placement.Resources{cpu: 1500, mem: 3 * gibibyte}}),
			want: expect{infeasible: &placement.Infeasible{
				Group: "ns/a", Fits: 1, Need: 3, Short: placement.Resources{cpu: 2500, mem: 5 * gibibyte},
				Reason: "only 1 of 3 pods fit (short 2500m cpu, 5Gi memory)",
			}},
		},
		{
			name:  "a gang with fewer members than minCount says so",
			nodes: gpuNodes("n", 1, nil),
			root:  gang("ns/a", 5, 3, gpuShape(1)),
			want: expect{infeasible: &placement.Infeasible{
				Group: "ns/a", Fits: 3, Need: 5,
				Reason: "only 3 of the 5 pods the gang needs exist",
			}},
		},
		{
			name:  "a gang whose key no node carries says so",
			nodes: gpuNodes("n", 1, nil),
			root:  withKey(gang("ns/a", 1, 1, gpuShape(1)), rackKey),
			want: expect{infeasible: &placement.Infeasible{
				Group: "ns/a", TopologyKey: rackKey, Fits: 0, Need: 1,
				Reason: "no node has the topology.phalanx.dev/rack label",
			}},
		},
		{
			name:  "a rack gang inside a zone composite names the zone and the failing child",
			nodes: zoned,
			root: composite("ns/job", placement.Gang, 1, zoneKey,
				withKey(gang("ns/w", 5, 5, gpuShape(1)), rackKey)),
			want: expect{infeasible: &placement.Infeasible{
				Group: "ns/job", TopologyKey: zoneKey, BestDomain: "zone-a", Fits: 0, Need: 1,
				Short:  placement.Resources{gpu: 1},
				Reason: "no topology.kubernetes.io/zone domain fits 1 child groups: best zone-a fits 0 (ns/w: no topology.phalanx.dev/rack domain in zone-a fits 5 pods: best a1 fits 4 (short 1 nvidia.com/gpu))",
				Cause: &placement.Infeasible{
					Group: "ns/w", TopologyKey: rackKey, BestDomain: "a1", Fits: 4, Need: 5, Short: placement.Resources{gpu: 1},
				},
			}},
		},
	})

	t.Run("the error message names the group", func(t *testing.T) {
		_, err := placement.PlanGroup(gpuNodes("n", 1, nil), gang("ns/a", 9, 9, gpuShape(1)), placement.Options{})
		require.Error(t, err)
		assert.Equal(t, "group ns/a is unschedulable: only 8 of 9 pods fit (short 1 nvidia.com/gpu)", err.Error())
	})
}

func TestPlanGroupInvalidInput(t *testing.T) {
	cycle := composite("ns/loop", placement.Gang, 1, "")
	cycle.Children = []*placement.Group{cycle}
	withPods := composite("ns/job", placement.Gang, 1, "", gang("ns/x", 1, 1, gpuShape(1)))
	withPods.Pending = []placement.Pod{{Key: "ns/stray"}}
	badShape := gang("ns/a", 1, 1, gpuShape(1))
	badShape.Pending[0].Shape = 1
	dupPod := gang("ns/a", 1, 2, gpuShape(1))
	dupPod.Pending[1].Key = dupPod.Pending[0].Key
	boundTwice := withBound(gang("ns/a", 1, 1, gpuShape(1)), "n-0")
	boundTwice.Bound[0].Key = "ns/a-0"
	negative := gang("ns/a", 1, 1, placement.Shape{Requests: placement.Resources{cpu: -1}})
	cases := []struct {
		name  string
		nodes []placement.Node
		root  *placement.Group
		opts  placement.Options
		want  string
	}{
		{name: "a nil root is rejected", root: nil, want: "nil root"},
		{name: "a shape index out of range is rejected", root: badShape, want: `shape 1 out of range [0,1)`},
		{name: "a pod key used twice is rejected", root: dupPod, want: `pod "ns/a-0" appears twice`},
		{name: "a pod both bound and pending is rejected", root: boundTwice, want: `pod "ns/a-0" appears twice`},
		{name: "a group name used twice is rejected", root: composite("ns/job", placement.Gang, 1, "", gang("ns/x", 1, 1, gpuShape(1)), gang("ns/x", 1, 1, gpuShape(1))), want: `duplicate group name "ns/x"`},
		{name: "a cyclic tree is rejected", root: cycle, want: "appears twice in the tree"},
		{name: "a composite holding pods is rejected", root: withPods, want: "cannot hold shapes or pods"},
		{name: "a negative request is rejected", root: negative, want: "negative request"},
		{name: "a negative minCount is rejected", root: gang("ns/a", -1, 1, gpuShape(1)), want: "negative minCount"},
		{name: "an unknown policy is rejected", root: &placement.Group{Name: "ns/a", Policy: 7}, want: "unknown policy"},
		{name: "an unknown domain policy is rejected", root: gang("ns/a", 1, 1, gpuShape(1)), opts: placement.Options{DomainPolicy: 9}, want: "unknown domain policy"},
		{name: "duplicate node names are rejected", nodes: concat(gpuNodes("n", 1, nil), gpuNodes("n", 1, nil)), root: gang("ns/a", 1, 1, gpuShape(1)), want: `duplicate node "n-0"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes := tc.nodes
			if nodes == nil {
				nodes = gpuNodes("n", 1, nil)
			}
			plan, err := placement.PlanGroup(nodes, tc.root, tc.opts)
			require.Error(t, err)
			assert.Nil(t, plan)
			var inf *placement.Infeasible
			assert.False(t, errors.As(err, &inf), "invalid input must not read as infeasible: %v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestPlanGroupDeterminism(t *testing.T) {
	nodes := concat(
		gpuNodes("a", 20, []int64{3, 5, 8, 1, 2, 8, 4}, at("zone-a", "a1")),
		gpuNodes("b", 20, []int64{8, 8, 2, 6}, at("zone-a", "a2")),
		gpuNodes("c", 20, []int64{1, 7, 3}, at("zone-b", "b1")),
	)
	root := composite("ns/job", placement.Gang, 2, zoneKey,
		withKey(gang("ns/x", 10, 12, gpuShape(1)), rackKey),
		withKey(gang("ns/y", 20, 20, gpuShape(2)), rackKey),
		withKey(basic("ns/z", 30, gpuShape(3)), rackKey))
	want, err := placement.PlanGroup(nodes, root, placement.Options{})
	require.NoError(t, err)
	require.NoError(t, verify(nodes, root, placement.Options{}, want, err))

	t.Run("shuffling the node list does not change the plan", func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for range 20 {
			shuffled := append([]placement.Node(nil), nodes...)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			got, err := placement.PlanGroup(shuffled, root, placement.Options{})
			require.NoError(t, err)
			assert.Equal(t, want, got)
		}
	})
	t.Run("planning does not modify its input", func(t *testing.T) {
		before := append([]placement.Node(nil), nodes...)
		_, err := placement.PlanGroup(nodes, root, placement.Options{})
		require.NoError(t, err)
		assert.Equal(t, before, nodes)
		assert.Equal(t, []string{"ns/x", "ns/y", "ns/z"}, []string{root.Children[0].Name, root.Children[1].Name, root.Children[2].Name})
	})
}

func TestPlanGroupExplainDomains(t *testing.T) {
	racks := concat(
		gpuNodes("rack-1", 1, []int64{4}, at("zone-a", "rack-1")),
		gpuNodes("rack-2", 1, []int64{8}, at("zone-a", "rack-2")),
		gpuNodes("rack-3", 2, []int64{8, 4}, at("zone-b", "rack-3")),
	)
	leaf := func() *placement.Group { return withKey(gang("ns/a", 8, 8, gpuShape(2)), rackKey) }

	t.Run("off by default", func(t *testing.T) {
		_, err := placement.PlanGroup(racks, leaf(), placement.Options{})
		var inf *placement.Infeasible
		require.ErrorAs(t, err, &inf)
		assert.Nil(t, inf.Domains)
	})

	t.Run("a leaf lists its closest domains with their shortfall", func(t *testing.T) {
		_, err := placement.PlanGroup(racks, leaf(), placement.Options{ExplainDomains: 2})
		var inf *placement.Infeasible
		require.ErrorAs(t, err, &inf)
		assert.Equal(t, []placement.DomainFit{
			{Domain: "rack-3", Fits: 6, Need: 8, Short: placement.Resources{gpu: 4},
				Reason: "no topology.phalanx.dev/rack domain fits 8 pods: best rack-3 fits 6 (short 4 nvidia.com/gpu)"},
			{Domain: "rack-2", Fits: 4, Need: 8, Short: placement.Resources{gpu: 8},
				Reason: "no topology.phalanx.dev/rack domain fits 8 pods: best rack-2 fits 4 (short 8 nvidia.com/gpu)"},
		}, inf.Domains)
		assert.Equal(t, "rack-3", inf.BestDomain, "the first domain listed is the one reported")
	})

	t.Run("a composite lists its domains and its failing child its own", func(t *testing.T) {
		root := composite("ns/job", placement.Gang, 1, zoneKey, withKey(gang("ns/w", 8, 8, gpuShape(2)), rackKey))
		_, err := placement.PlanGroup(racks, root, placement.Options{ExplainDomains: 5})
		var inf *placement.Infeasible
		require.ErrorAs(t, err, &inf)
		require.Len(t, inf.Domains, 2)
		assert.Equal(t, []string{"zone-a", "zone-b"}, []string{inf.Domains[0].Domain, inf.Domains[1].Domain}, "zone-a estimates 6 pods, zone-b 6: ties keep the policy's order")
		for _, d := range inf.Domains {
			assert.Equal(t, 0, d.Fits)
			assert.Equal(t, 1, d.Need)
		}
		require.NotNil(t, inf.Cause)
		assert.NotEmpty(t, inf.Cause.Domains, "the failing child explains the racks of its zone")
	})

	t.Run("explaining leaves the plan unchanged", func(t *testing.T) {
		ok := withKey(gang("ns/b", 2, 2, gpuShape(2)), rackKey)
		want, err := placement.PlanGroup(racks, ok, placement.Options{})
		require.NoError(t, err)
		got, err := placement.PlanGroup(racks, withKey(gang("ns/b", 2, 2, gpuShape(2)), rackKey), placement.Options{ExplainDomains: 3})
		require.NoError(t, err)
		assert.Equal(t, want, got)
	})
}
