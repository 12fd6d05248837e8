package placement_test

import (
	"fmt"
	"testing"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// BenchmarkRankOrder plans one gang in one zone of a 5,000-node cluster
// (benchCluster: racks of 100 nodes with 0 to 8 GPUs free) against a node
// table kept across plans, as the scheduler keeps it, its pods keyed
// by random UIDs, with ranks and without (unordered: the planner sees no
// ranks, the ring is still taken in rank order). Besides the cost it
// reports the ring's boundary crossings per gang at the rack and node
// levels, so that the two variants read side by side.
func BenchmarkRankOrder(b *testing.B) {
	nodes := benchCluster(5000)
	for _, size := range []int{32, 256, 1000} {
		for _, ranked := range []bool{true, false} {
			variant := map[bool]string{true: "ranked", false: "unordered"}[ranked]
			b.Run(fmt.Sprintf("nodes=5000/gang=%d/%s", size, variant), func(b *testing.B) {
				g := withKey(rankedGang("ns/job", size, uint64(size)), zoneKey)
				for i := range g.Pending {
					g.Pending[i].Shape = 0
					g.Pending[i].Ranked = ranked
				}
				g.Shapes = []placement.Shape{benchShape}
				opts := placement.Options{RankLevels: []string{zoneKey, rackKey}}
				table, err := placement.NewNodeTable(nodes)
				if err != nil {
					b.Fatal(err)
				}
				plan, err := table.Plan(g, nil, opts)
				if err != nil {
					b.Fatalf("benchmark scenario is infeasible: %v", err)
				}
				ring := make([]string, size)
				for i, p := range g.Pending {
					ring[i] = plan.Assignments[p.Key]
				}
				c := placement.Crossings(ring, labelsOf(nodes), []string{rackKey})
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if _, err := table.Plan(g, nil, opts); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*size), "ns/pod")
				b.ReportMetric(float64(c[0]), "rack-crossings")
				b.ReportMetric(float64(c[1]), "node-crossings")
			})
		}
	}
}
