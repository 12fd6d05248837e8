package placement_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

const highPriority = 1000

var (
	wholeNode = placement.Resources{gpu: 8, cpu: 8000, mem: 32 * gibibyte}
	// wholeNodeShape asks for a whole gpuNodes node, one pod per node.
	wholeNodeShape = placement.Shape{Requests: wholeNode}
)

type victimOpt func(*placement.Victim)

// victim runs on node and holds req.
func victim(key, node string, req placement.Resources, priority int32, opts ...victimOpt) placement.Victim {
	v := placement.Victim{Key: key, Node: node, Requests: req, Priority: priority}
	for _, o := range opts {
		o(&v)
	}
	return v
}

func inUnit(id string) victimOpt { return func(v *placement.Victim) { v.Unit = id } }
func created(t int64) victimOpt  { return func(v *placement.Victim) { v.Created = t } }
func violatesPDB() victimOpt     { return func(v *placement.Victim) { v.ViolatesPDB = true } }
func balloon(node string, priority int32, opts ...victimOpt) placement.Victim {
	return victim("ns/balloon-"+node, node, wholeNode, priority, opts...)
}

// searchMode is one way of running FindVictims; every table case must give
// the same answer in each.
type searchMode struct {
	name     string
	maxUnits int
	// exhaustive says whether the mode searches exhaustively with this many
	// candidate units.
	exhaustive func(units int) bool
}

var searchModes = []searchMode{
	{name: "by default", maxUnits: 0, exhaustive: func(units int) bool { return units <= placement.DefaultMaxUnits }},
	{name: "heuristically", maxUnits: -1, exhaustive: func(int) bool { return false }},
	{name: "exhaustively", maxUnits: 16, exhaustive: func(units int) bool { return units <= 16 }},
}

type victimCase struct {
	name     string
	nodes    []placement.Node // before the victims are added
	victims  []placement.Victim
	root     *placement.Group
	priority int32 // highPriority when 0
	// candidates is how many units may be evicted, which decides whether a
	// mode searches exhaustively.
	candidates int

	want       []string // victims; nil for none
	units      []string
	maxPrio    int32             // checked when want is set
	domains    map[string]string // exact plan domains, when set
	placed     int               // plan assignments, when set
	infeasible *placement.Infeasible
}

func runVictimCases(t *testing.T, cases []victimCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			priority := tc.priority
			if priority == 0 {
				priority = highPriority
			}
			nodes := occupy(tc.nodes, tc.victims)
			for _, mode := range searchModes {
				t.Run(mode.name, func(t *testing.T) {
					sc := preemptScenario{nodes: nodes, victims: tc.victims, root: tc.root, priority: priority,
						opts: placement.PreemptOptions{MaxUnits: mode.maxUnits}}
					pr, err := placement.FindVictims(sc.nodes, sc.victims, sc.root, sc.priority, sc.opts)
					if tc.infeasible != nil {
						var inf *placement.Infeasible
						require.ErrorAs(t, err, &inf)
						assert.Nil(t, pr, "nothing is evicted")
						assertInfeasible(t, tc.infeasible, inf)
						return
					}
					require.NoError(t, err)
					require.NotNil(t, pr)
					_, err = checkSound(sc, pr)
					require.NoError(t, err)
					assert.Equal(t, tc.want, pr.Victims, "victims")
					assert.Equal(t, tc.units, pr.Units, "units")
					if tc.want == nil {
						assert.Equal(t, int32(math.MinInt32), pr.MaxVictimPriority)
						assert.True(t, pr.Exhaustive, "no victims is always minimal")
					} else {
						assert.Equal(t, tc.maxPrio, pr.MaxVictimPriority, "highest victim priority")
						assert.Equal(t, mode.exhaustive(tc.candidates), pr.Exhaustive, "exhaustive")
					}
					if tc.domains != nil {
						assert.Equal(t, tc.domains, pr.Plan.Domains, "domains")
					}
					if tc.placed > 0 {
						assert.Len(t, pr.Plan.Assignments, tc.placed, "placed pods")
					}
					// Small cases are also checked against the brute force.
					if tc.candidates <= placement.DefaultMaxUnits {
						best, ok := bruteForce(sc)
						require.True(t, ok)
						assert.Equal(t, best.keys, pr.Victims, "brute force")
					}
				})
			}
		})
	}
}

func TestFindVictimsBalloons(t *testing.T) {
	var balloons []placement.Victim
	for i := range 16 {
		balloons = append(balloons, balloon(fmt.Sprintf("n-%d", i), 0, created(int64(i))))
	}
	var youngest []string
	for i := 8; i < 16; i++ {
		youngest = append(youngest, fmt.Sprintf("ns/balloon-n-%d", i))
	}
	runVictimCases(t, []victimCase{
		{
			name:       "a gang of eight whole-node pods evicts exactly eight balloons, the youngest",
			nodes:      gpuNodes("n", 16, nil),
			victims:    balloons,
			root:       gang("ns/job", 8, 8, wholeNodeShape),
			candidates: 16,
			want:       slices.Sorted(slices.Values(youngest)),
			maxPrio:    0,
			placed:     8,
		},
		{
			name:       "a gang that fits as it is evicts nothing",
			nodes:      concat(gpuNodes("n", 2, nil), gpuNodes("free", 1, nil)),
			victims:    []placement.Victim{balloon("n-0", 0), balloon("n-1", 0)},
			root:       gang("ns/job", 1, 1, wholeNodeShape),
			candidates: 2,
			placed:     1,
		},
		{
			name:  "a full node's pod slot is freed by evicting one small pod",
			nodes: []placement.Node{mkNode("n", placement.Resources{cpu: 8000}, podSlots(2, 0))},
			victims: []placement.Victim{
				victim("ns/a", "n", placement.Resources{cpu: 100}, 0),
				victim("ns/b", "n", placement.Resources{cpu: 100}, 0, created(5)),
			},
			root:       gang("ns/job", 1, 1, cpuShape(1000)),
			candidates: 2,
			want:       []string{"ns/b"},
			maxPrio:    0,
		},
		{
			name:  "two pods that each hold half a node are evicted together rather than one pod of higher priority",
			nodes: gpuNodes("n", 2, nil),
			victims: []placement.Victim{
				victim("ns/half-a", "n-0", placement.Resources{gpu: 4, cpu: 4000, mem: 16 * gibibyte}, 0),
				victim("ns/half-b", "n-0", placement.Resources{gpu: 4, cpu: 4000, mem: 16 * gibibyte}, 0),
				balloon("n-1", 1),
			},
			root:       gang("ns/job", 1, 1, wholeNodeShape),
			candidates: 3,
			want:       []string{"ns/half-a", "ns/half-b"},
			maxPrio:    0,
		},
		{
			name:  "a pod on a node the group cannot use is never evicted, however cheap",
			nodes: concat(gpuNodes("tainted", 1, nil, tainted(teamKey, teamTol, corev1.TaintEffectNoSchedule)), gpuNodes("n", 1, nil)),
			victims: []placement.Victim{
				balloon("tainted-0", 0),
				balloon("n-0", 2),
			},
			root:       gang("ns/job", 1, 1, wholeNodeShape),
			candidates: 1,
			want:       []string{"ns/balloon-n-0"},
			maxPrio:    2,
		},
	})
}

func TestFindVictimsUnits(t *testing.T) {
	runVictimCases(t, []victimCase{
		{
			name:  "an all-or-nothing unit over four nodes loses to two independent pods because it disrupts more pods",
			nodes: concat(gpuNodes("a", 4, nil), gpuNodes("b", 2, nil)),
			victims: []placement.Victim{
				balloon("a-0", 1, inUnit("ns/mpi"), created(9)), balloon("a-1", 1, inUnit("ns/mpi"), created(9)),
				balloon("a-2", 1, inUnit("ns/mpi"), created(9)), balloon("a-3", 1, inUnit("ns/mpi"), created(9)),
				balloon("b-0", 1), balloon("b-1", 1),
			},
			root:       gang("ns/job", 2, 2, wholeNodeShape),
			candidates: 3,
			want:       []string{"ns/balloon-b-0", "ns/balloon-b-1"},
			maxPrio:    1,
			placed:     2,
		},
		{
			name:  "an all-or-nothing unit is evicted whole when nothing smaller makes room",
			nodes: concat(gpuNodes("a", 4, nil), gpuNodes("b", 1, nil)),
			victims: []placement.Victim{
				balloon("a-0", 1, inUnit("ns/mpi")), balloon("a-1", 1, inUnit("ns/mpi")),
				balloon("a-2", 1, inUnit("ns/mpi")), balloon("a-3", 1, inUnit("ns/mpi")),
				balloon("b-0", 1),
			},
			root:       gang("ns/job", 2, 2, wholeNodeShape),
			candidates: 2,
			want:       []string{"ns/balloon-a-0", "ns/balloon-a-1", "ns/balloon-a-2", "ns/balloon-a-3"},
			units:      []string{"ns/mpi"},
			maxPrio:    1,
		},
		{
			name:  "a unit of two pods beats two independent pods because it is one unit",
			nodes: concat(gpuNodes("a", 2, nil), gpuNodes("b", 2, nil)),
			victims: []placement.Victim{
				balloon("a-0", 1, inUnit("ns/pair")), balloon("a-1", 1, inUnit("ns/pair")),
				balloon("b-0", 1, created(9)), balloon("b-1", 1, created(9)),
			},
			root:       gang("ns/job", 2, 2, wholeNodeShape),
			candidates: 3,
			want:       []string{"ns/balloon-a-0", "ns/balloon-a-1"},
			units:      []string{"ns/pair"},
			maxPrio:    1,
		},
		{
			name:  "a unit with one pod at the preemptor's priority is untouchable, so other pods go instead",
			nodes: concat(gpuNodes("a", 2, nil), gpuNodes("b", 2, nil)),
			victims: []placement.Victim{
				balloon("a-0", 0, inUnit("ns/mixed")), balloon("a-1", highPriority, inUnit("ns/mixed")),
				balloon("b-0", 3), balloon("b-1", 3),
			},
			root:       gang("ns/job", 2, 2, wholeNodeShape),
			candidates: 2,
			want:       []string{"ns/balloon-b-0", "ns/balloon-b-1"},
			maxPrio:    3,
		},
		{
			name:  "a unit that spans two racks is evicted whole, its pod in the other rack included",
			nodes: concat(gpuNodes("a", 2, nil, at("", "A")), gpuNodes("b", 2, nil, at("", "B"))),
			victims: []placement.Victim{
				balloon("a-1", 0, inUnit("ns/wide")), balloon("b-0", 0, inUnit("ns/wide")),
				balloon("b-1", 1),
			},
			root:       withKey(gang("ns/job", 2, 2, wholeNodeShape), rackKey),
			candidates: 2,
			want:       []string{"ns/balloon-a-1", "ns/balloon-b-0"},
			units:      []string{"ns/wide"},
			maxPrio:    0,
			domains:    map[string]string{"ns/job": "A"},
		},
	})
}

func TestFindVictimsPriorities(t *testing.T) {
	cpuNode := func(name string) placement.Node { return mkNode(name, placement.Resources{cpu: 3000}) }
	runVictimCases(t, []victimCase{
		{
			name:     "pods at the preemptor's own priority are never evicted, and nothing is",
			nodes:    gpuNodes("n", 2, nil),
			victims:  []placement.Victim{balloon("n-0", highPriority), balloon("n-1", highPriority+1)},
			root:     gang("ns/job", 1, 1, wholeNodeShape),
			priority: highPriority,
			infeasible: &placement.Infeasible{
				Group: "ns/job", Fits: 0, Need: 1,
				Reason: "no lower-priority pod runs where the group could go, and only 0 of 1 pods fit (short 8 nvidia.com/gpu)",
			},
		},
		{
			name:  "three priority-1 pods are evicted rather than one priority-5 pod: the highest victim priority comes first",
			nodes: []placement.Node{cpuNode("x"), cpuNode("y")},
			victims: []placement.Victim{
				victim("ns/x", "x", placement.Resources{cpu: 3000}, 5),
				victim("ns/y-0", "y", placement.Resources{cpu: 1000}, 1),
				victim("ns/y-1", "y", placement.Resources{cpu: 1000}, 1),
				victim("ns/y-2", "y", placement.Resources{cpu: 1000}, 1),
			},
			root:       gang("ns/job", 1, 1, cpuShape(3000)),
			candidates: 4,
			want:       []string{"ns/y-0", "ns/y-1", "ns/y-2"},
			maxPrio:    1,
		},
		{
			name:  "when evicting every lower-priority pod would still leave the gang short, nothing is evicted",
			nodes: gpuNodes("n", 5, nil),
			victims: []placement.Victim{
				balloon("n-0", 0), balloon("n-1", 0), balloon("n-2", 1), balloon("n-3", 1),
				balloon("n-4", highPriority),
			},
			root: gang("ns/job", 5, 5, wholeNodeShape),
			infeasible: &placement.Infeasible{
				Group: "ns/job", Fits: 4, Need: 5,
				Reason: "even with all 4 lower-priority pods that could make room evicted, only 4 of 5 pods fit (short 8 nvidia.com/gpu)",
			},
		},
	})
}

func TestFindVictimsTieBreaks(t *testing.T) {
	runVictimCases(t, []victimCase{
		{
			name:       "between otherwise equal victims, the one whose eviction keeps a PodDisruptionBudget goes",
			nodes:      gpuNodes("n", 2, nil),
			victims:    []placement.Victim{balloon("n-0", 1, violatesPDB(), created(10)), balloon("n-1", 1, created(1))},
			root:       gang("ns/job", 1, 1, wholeNodeShape),
			candidates: 2,
			want:       []string{"ns/balloon-n-1"},
			maxPrio:    1,
		},
		{
			name:       "between otherwise equal victims, the younger goes",
			nodes:      gpuNodes("n", 2, nil),
			victims:    []placement.Victim{balloon("n-0", 1, created(1)), balloon("n-1", 1, created(10))},
			root:       gang("ns/job", 1, 1, wholeNodeShape),
			candidates: 2,
			want:       []string{"ns/balloon-n-1"},
			maxPrio:    1,
		},
		{
			name:  "the set whose oldest victim is youngest goes, whatever the sum of ages",
			nodes: gpuNodes("n", 4, nil),
			victims: []placement.Victim{
				balloon("n-0", 1, inUnit("ns/u1"), created(5)), balloon("n-1", 1, inUnit("ns/u1"), created(100)),
				balloon("n-2", 1, inUnit("ns/u2"), created(10)), balloon("n-3", 1, inUnit("ns/u2"), created(11)),
			},
			root:       gang("ns/job", 2, 2, wholeNodeShape),
			candidates: 2,
			want:       []string{"ns/balloon-n-2", "ns/balloon-n-3"},
			units:      []string{"ns/u2"},
			maxPrio:    1,
		},
		{
			name:       "victims equal in every respect are broken by key",
			nodes:      gpuNodes("n", 2, nil),
			victims:    []placement.Victim{balloon("n-1", 1), balloon("n-0", 1)},
			root:       gang("ns/job", 1, 1, wholeNodeShape),
			candidates: 2,
			want:       []string{"ns/balloon-n-0"},
			maxPrio:    1,
		},
	})
}

func TestFindVictimsTopology(t *testing.T) {
	racks := concat(gpuNodes("a", 4, nil, at("", "A")), gpuNodes("b", 4, nil, at("", "B")))
	runVictimCases(t, []victimCase{
		{
			name:       "the rack that needs one victim is chosen over the rack that needs three",
			nodes:      racks,
			victims:    []placement.Victim{balloon("a-1", 1), balloon("a-2", 1), balloon("a-3", 1), balloon("b-3", 1)},
			root:       withKey(gang("ns/job", 4, 4, wholeNodeShape), rackKey),
			candidates: 4,
			want:       []string{"ns/balloon-b-3"},
			maxPrio:    1,
			domains:    map[string]string{"ns/job": "B"},
			placed:     4,
		},
		{
			name:       "the rack that needs three victims of lower priority is chosen over one victim of higher priority",
			nodes:      racks,
			victims:    []placement.Victim{balloon("a-1", 0), balloon("a-2", 0), balloon("a-3", 0), balloon("b-3", 1)},
			root:       withKey(gang("ns/job", 4, 4, wholeNodeShape), rackKey),
			candidates: 4,
			want:       []string{"ns/balloon-a-1", "ns/balloon-a-2", "ns/balloon-a-3"},
			maxPrio:    0,
			domains:    map[string]string{"ns/job": "A"},
		},
		{
			name:  "at equal pods the rack whose victims form fewer units is chosen",
			nodes: concat(gpuNodes("a", 2, nil, at("", "A")), gpuNodes("b", 2, nil, at("", "B"))),
			victims: []placement.Victim{
				balloon("a-0", 1), balloon("a-1", 1),
				balloon("b-0", 1, inUnit("ns/pair")), balloon("b-1", 1, inUnit("ns/pair")),
			},
			root:       withKey(gang("ns/job", 2, 2, wholeNodeShape), rackKey),
			candidates: 3,
			want:       []string{"ns/balloon-b-0", "ns/balloon-b-1"},
			units:      []string{"ns/pair"},
			maxPrio:    1,
			domains:    map[string]string{"ns/job": "B"},
		},
		{
			name:  "bound members pin the gang to their rack, so its victims come from there",
			nodes: concat(gpuNodes("a", 4, []int64{0, 8, 8, 0}, at("", "A")), gpuNodes("b", 4, nil, at("", "B"))),
			victims: []placement.Victim{
				balloon("a-1", 1), balloon("a-2", 1),
				balloon("b-0", 0), balloon("b-1", 0), balloon("b-2", 0), balloon("b-3", 0),
			},
			root:       withKey(withBound(gang("ns/job", 4, 3, wholeNodeShape), "a-0", "a-3"), rackKey),
			candidates: 6,
			want:       []string{"ns/balloon-a-1", "ns/balloon-a-2"},
			maxPrio:    1,
			domains:    map[string]string{"ns/job": "A"},
		},
		{
			name: "a composite gang needing two of three children evicts only what two need, in one zone",
			nodes: concat(
				gpuNodes("a", 4, nil, at("zone-a", "")),
				gpuNodes("b", 4, nil, at("zone-b", "")),
			),
			victims: []placement.Victim{
				balloon("a-2", 0), balloon("a-3", 0),
				balloon("b-0", 0), balloon("b-1", 0), balloon("b-2", 0), balloon("b-3", 0),
			},
			root: composite("ns/job", placement.Gang, 2, zoneKey,
				gang("ns/x", 2, 2, wholeNodeShape),
				gang("ns/y", 2, 2, wholeNodeShape),
				gang("ns/z", 2, 2, wholeNodeShape)),
			candidates: 6,
			want:       []string{"ns/balloon-a-2", "ns/balloon-a-3"},
			maxPrio:    0,
			domains:    map[string]string{"ns/job": "zone-a"},
			placed:     4,
		},
	})
}

func TestFindVictimsSearchBoundary(t *testing.T) {
	run := func(t *testing.T, nodes, balloons, maxUnits int) *placement.Preemption {
		t.Helper()
		var victims []placement.Victim
		for i := range balloons {
			victims = append(victims, balloon(fmt.Sprintf("n-%05d", i), 0))
		}
		var ns []placement.Node
		for i := range nodes {
			ns = append(ns, mkNode(fmt.Sprintf("n-%05d", i), placement.Resources{gpu: 8, cpu: 64000, mem: 256 * gibibyte}))
		}
		pr, err := placement.FindVictims(occupy(ns, victims), victims, gang("ns/job", nodes, nodes, wholeNodeShape), highPriority,
			placement.PreemptOptions{MaxUnits: maxUnits})
		require.NoError(t, err)
		assert.Len(t, pr.Victims, balloons)
		return pr
	}
	for _, tc := range []struct {
		name                      string
		nodes, balloons, maxUnits int
		exhaustive                bool
	}{
		{name: "twelve candidate units are searched exhaustively by default", nodes: 12, balloons: 12, exhaustive: true},
		{name: "thirteen candidate units are searched heuristically by default", nodes: 13, balloons: 13},
		{name: "MaxUnits raises the bound", nodes: 13, balloons: 13, maxUnits: 13, exhaustive: true},
		{name: "a negative MaxUnits always uses the heuristic", nodes: 2, balloons: 2, maxUnits: -1},
		{name: "twelve units over 5,000 nodes exceed the work bound and are searched heuristically", nodes: 5000, balloons: 12},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.exhaustive, run(t, tc.nodes, tc.balloons, tc.maxUnits).Exhaustive)
		})
	}
}

func TestFindVictimsInvalidInput(t *testing.T) {
	nodes := occupy(gpuNodes("n", 1, nil), []placement.Victim{balloon("n-0", 0)})
	root := gang("ns/job", 1, 1, wholeNodeShape)
	for _, tc := range []struct {
		name    string
		victims []placement.Victim
		opts    placement.PreemptOptions
		want    string
	}{
		{name: "a victim without a key is rejected", victims: []placement.Victim{victim("", "n-0", wholeNode, 0)}, want: "empty pod key"},
		{name: "a victim listed twice is rejected", victims: []placement.Victim{balloon("n-0", 0), balloon("n-0", 0)}, want: "appears twice"},
		{name: "a negative request is rejected", victims: []placement.Victim{victim("ns/v", "n-0", placement.Resources{cpu: -1}, 0)}, want: "negative request"},
		{
			name: "requests on one node that overflow int64 are rejected",
			victims: []placement.Victim{
				victim("ns/a", "n-0", placement.Resources{gpu: math.MaxInt64}, 0),
				victim("ns/b", "n-0", placement.Resources{gpu: 1}, 0),
			},
			want: "more nvidia.com/gpu than an int64 holds",
		},
		{name: "what PlanGroup rejects is rejected", victims: []placement.Victim{balloon("n-0", 0)}, opts: placement.PreemptOptions{Options: placement.Options{DomainPolicy: 7}}, want: "unknown domain policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, err := placement.FindVictims(nodes, tc.victims, root, highPriority, tc.opts)
			require.Error(t, err)
			assert.Nil(t, pr)
			var inf *placement.Infeasible
			assert.False(t, errors.As(err, &inf), "invalid input is not an infeasibility")
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func surplus() victimOpt { return func(v *placement.Victim) { v.Surplus = true } }

func TestFindVictimsSurplusFirst(t *testing.T) {
	runVictimCases(t, []victimCase{
		{
			name:       "a member beyond its gang's minimum goes before a younger pod that is not",
			nodes:      gpuNodes("n", 2, nil),
			victims:    []placement.Victim{balloon("n-0", 1, surplus(), created(1)), balloon("n-1", 1, created(10))},
			root:       gang("ns/job", 1, 1, wholeNodeShape),
			candidates: 2,
			want:       []string{"ns/balloon-n-0"},
			maxPrio:    1,
		},
		{
			name:  "two surplus members go before a whole unit of two of equal priority",
			nodes: gpuNodes("n", 4, nil),
			victims: []placement.Victim{
				balloon("n-0", 1, surplus(), created(1)), balloon("n-1", 1, surplus(), created(1)),
				balloon("n-2", 1, inUnit("ns/u"), created(10)), balloon("n-3", 1, inUnit("ns/u"), created(10)),
			},
			root:       gang("ns/job", 2, 2, wholeNodeShape),
			candidates: 3,
			want:       []string{"ns/balloon-n-0", "ns/balloon-n-1"},
			maxPrio:    1,
		},
		{
			name:       "priority still comes first: a lower-priority pod goes before a surplus member",
			nodes:      gpuNodes("n", 2, nil),
			victims:    []placement.Victim{balloon("n-0", 2, surplus()), balloon("n-1", 1)},
			root:       gang("ns/job", 1, 1, wholeNodeShape),
			candidates: 2,
			want:       []string{"ns/balloon-n-1"},
			maxPrio:    1,
		},
	})
}
