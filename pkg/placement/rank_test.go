package placement_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// rankedGang is a leaf of n one-GPU pods whose keys sort in an order
// unrelated to their ranks, as pod UIDs do.
func rankedGang(name string, n int, seed uint64) *placement.Group {
	g := gang(name, n, n, gpuShape(1))
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range g.Pending {
		g.Pending[i].Key = fmt.Sprintf("uid-%08x", r.Uint32())
		g.Pending[i].Rank, g.Pending[i].Ranked = int64(i), true
	}
	return g
}

// ring lists the planned node of every ranked pod of g, lowest rank first.
func ring(t *testing.T, g *placement.Group, plan *placement.Plan) []string {
	t.Helper()
	pods := slices.Clone(g.Pending)
	slices.SortFunc(pods, func(a, b placement.Pod) int { return int(a.Rank - b.Rank) })
	var out []string
	for _, p := range pods {
		node, ok := plan.Assignments[p.Key]
		if !ok {
			t.Fatalf("rank %d (%s) not placed", p.Rank, p.Key)
		}
		out = append(out, node)
	}
	return out
}

func labelsOf(nodes []placement.Node) func(node, key string) string {
	byName := map[string]map[string]string{}
	for _, n := range nodes {
		byName[n.Name] = n.Labels
	}
	return func(node, key string) string { return byName[node][key] }
}

// A rack-constrained 32-member gang over the 4 nodes of 8 free GPUs of one
// rack: ranks 0-7, 8-15, 16-23 and 24-31 share a node each, nodes in name
// order, so the ring crosses 4 node boundaries and no rack boundary.
func TestRankOrderFillsOneNodePerEightRanks(t *testing.T) {
	nodes := concat(
		gpuNodes("r0-n", 4, nil, at("z", "r0")),
		gpuNodes("r1-n", 2, nil, at("z", "r1")),
	)
	g := withKey(rankedGang("train", 32, 7), rackKey)
	plan, err := placement.PlanGroup(nodes, g, placement.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := ring(t, g, plan)
	for r, node := range got {
		if want := fmt.Sprintf("r0-n-%d", r/8); node != want {
			t.Fatalf("rank %d on %s, want %s; ring %v", r, node, want, got)
		}
	}
	if c := placement.Crossings(got, labelsOf(nodes), []string{rackKey}); !slices.Equal(c, []int{0, 4}) {
		t.Fatalf("crossings (rack, node) = %v, want [0 4]", c)
	}
}

// Unranked members take the nodes left after the ranked ones, and a gang
// larger than its room leaves out its highest ranks, not random ones.
func TestRankOrderUnrankedAfterRankedAndHighestLeftOut(t *testing.T) {
	nodes := gpuNodes("n", 2, []int64{4, 4}, at("z", "r"))
	g := rankedGang("train", 6, 3)
	g.MinCount = 4
	g.Pending = append(g.Pending, placement.Pod{Key: "aaa-launcher"}) // sorts first by key
	g.Pending[0].Ranked = false                                       // rank 0's pod loses its rank: it goes after the others
	plan, err := placement.PlanGroup(nodes, g, placement.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 8 slots, 7 pods: ranks 1-5 first (1-4 on n-0, 5 on n-1), then the
	// unranked pods by key.
	for _, p := range g.Pending {
		node := plan.Assignments[p.Key]
		want := "n-1"
		if p.Ranked && p.Rank <= 4 {
			want = "n-0"
		}
		if node != want {
			t.Errorf("pod %s (rank %d, ranked %v) on %q, want %s", p.Key, p.Rank, p.Ranked, node, want)
		}
	}

	small := gpuNodes("m", 1, []int64{3})
	h := rankedGang("big", 5, 9)
	h.MinCount = 2
	plan, err = placement.PlanGroup(small, h, placement.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range h.Pending {
		if _, placed := plan.Assignments[p.Key]; placed != (p.Rank < 3) {
			t.Errorf("rank %d placed=%v, want ranks 0-2 placed and the rest left out", p.Rank, placed)
		}
	}
}

// A re-created rank returns to the node it ran on, even when best fit
// would choose another node of its rack.
func TestRankOrderPreferredNodeForRecreatedRank(t *testing.T) {
	// The rank ran on n-a-0 (2 GPUs free now, its own and one more);
	// n-b-0 has 1 free, so best fit alone would pick n-b-0.
	nodes := concat(
		gpuNodes("n-a", 1, []int64{2}, at("z", "r")),
		gpuNodes("n-b", 1, []int64{1}, at("z", "r")),
	)
	g := gang("train", 4, 1, gpuShape(1))
	g.Pending[0].Rank, g.Pending[0].Ranked, g.Pending[0].Prefer = 2, true, "n-a-0"
	g = withBound(g, "n-a-0", "n-a-0", "n-a-0")
	plan, err := placement.PlanGroup(nodes, g, placement.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.Assignments[g.Pending[0].Key]; got != "n-a-0" {
		t.Fatalf("re-created rank planned on %s, want its old node n-a-0", got)
	}
	g.Pending[0].Prefer = ""
	plan, err = placement.PlanGroup(nodes, g, placement.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.Assignments[g.Pending[0].Key]; got != "n-b-0" {
		t.Fatalf("without a preference best fit plans %s, want n-b-0 (the test's premise)", got)
	}
}

// Oracle: on small three-level clusters (zone, block, rack, one or two
// nodes per rack), the ring the planner orders crosses every level as few
// times as any assignment of the ranks to the nodes the plan chose. The
// levels are listed to the planner out of order; it nests them itself.
func TestRankOrderOracleMinimumCrossings(t *testing.T) {
	levels := []string{zoneKey, blockKey, rackKey}
	r := rand.New(rand.NewPCG(32, 32))
	cases := 0
	for seed := range 300 {
		var nodes []placement.Node
		for z := range 2 {
			for b := range 2 {
				for k := range 2 {
					for n := range 1 + r.IntN(2) {
						name := fmt.Sprintf("z%d-b%d-r%d-n%d", z, b, k, n)
						free := int64(r.IntN(4))
						nodes = append(nodes, gpuNodes(name, 1, []int64{free},
							label(zoneKey, fmt.Sprintf("z%d", z)),
							label(blockKey, fmt.Sprintf("z%d-b%d", z, b)),
							label(rackKey, fmt.Sprintf("z%d-b%d-r%d", z, b, k)))...)
					}
				}
			}
		}
		n := 2 + r.IntN(6)
		g := rankedGang("g", n, uint64(seed))
		// Ranks with gaps, in a random order of keys.
		for i := range g.Pending {
			g.Pending[i].Rank = int64(3 * i)
		}
		if r.IntN(2) == 0 {
			g.TopologyKey = zoneKey
		}
		opts := placement.Options{RankLevels: []string{rackKey, zoneKey, blockKey}}
		plan, err := placement.PlanGroup(nodes, g, opts)
		if err != nil {
			continue
		}
		cases++
		got := ring(t, g, plan)
		gotC := placement.Crossings(got, labelsOf(nodes), levels)
		best := minCrossings(got, labelsOf(nodes), levels)
		if !slices.Equal(gotC, best) {
			t.Fatalf("seed %d: planner's ring %v crosses (zone, block, rack, node) %v times; the least for these nodes is %v", seed, got, gotC, best)
		}
	}
	if cases < 100 {
		t.Fatalf("only %d feasible cases; the oracle proves little", cases)
	}
}

// minCrossings tries every distinct order of slots (a multiset of nodes)
// around the ring and returns, per level, the fewest crossings any order
// achieves.
func minCrossings(slots []string, domain func(node, key string) string, keys []string) []int {
	best := make([]int, len(keys)+1)
	for i := range best {
		best[i] = len(slots) + 1
	}
	perm := slices.Clone(slots)
	slices.Sort(perm)
	for {
		c := placement.Crossings(perm, domain, keys)
		for i := range best {
			best[i] = min(best[i], c[i])
		}
		if !nextPermutation(perm) {
			return best
		}
	}
}

// nextPermutation steps s to its next lexicographic permutation, skipping
// repeats, and reports false after the last.
func nextPermutation(s []string) bool {
	i := len(s) - 2
	for i >= 0 && s[i] >= s[i+1] {
		i--
	}
	if i < 0 {
		return false
	}
	j := len(s) - 1
	for s[j] <= s[i] {
		j--
	}
	s[i], s[j] = s[j], s[i]
	slices.Reverse(s[i+1:])
	return true
}

// With preferred levels, the gang still goes into the fewest racks of one
// block (12 ranks over racks of 2 × 4 free GPUs: two racks), and its ranks
// run through one rack, then the other: 2 rack and 3 node crossings.
func TestRankOrderWithPreferredTopology(t *testing.T) {
	nodes := concat(
		rackNodes("z", "b0", "r0", 2, 4, 4),
		rackNodes("z", "b0", "r1", 2, 4, 4),
		rackNodes("z", "b1", "r2", 2, 2, 2),
	)
	g := preferring(withKey(rankedGang("train", 12, 5), zoneKey), rackKey, blockKey)
	plan, err := placement.PlanGroup(nodes, g, placement.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := ring(t, g, plan)
	c := placement.Crossings(got, labelsOf(nodes), []string{blockKey, rackKey})
	if !slices.Equal(c, []int{0, 2, 3}) {
		t.Fatalf("crossings (block, rack, node) = %v, want [0 2 3]; ring %v", c, got)
	}
}

// A ranked gang that must preempt: the victim search's plan, whose nodes
// the gang is nominated to, puts its ranks in order as PlanGroup does. Its
// rack's nodes have 3, 8 (once a balloon goes) and 5 GPUs for it: ranks
// 0-2, 3-10 and 11-15 in node order, although best fit fills the nodes in
// another order.
func TestRankOrderInVictimSearchPlan(t *testing.T) {
	nodes := gpuNodes("r0-n", 3, []int64{3, 8, 5}, at("z", "r0"))
	victims := []placement.Victim{victim("ns/balloon", "r0-n-1", wholeNode, 1)}
	g := withKey(rankedGang("train", 16, 11), rackKey)
	want := []string{}
	for node, n := range []int{3, 8, 5} {
		for range n {
			want = append(want, fmt.Sprintf("r0-n-%d", node))
		}
	}
	for _, maxUnits := range []int{0, -1} {
		pr, err := placement.FindVictims(occupy(nodes, victims), victims, g, highPriority, placement.PreemptOptions{MaxUnits: maxUnits})
		if err != nil {
			t.Fatal(err)
		}
		if got := ring(t, g, pr.Plan); !slices.Equal(got, want) {
			t.Fatalf("maxUnits %d: ring %v, want %v", maxUnits, got, want)
		}
	}
}
