package placement_test

import (
	"fmt"
	"testing"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// BenchmarkPlanGroupPreferred is what preferred levels cost against the
// required key alone, on benchCluster's nodes with blocks of 5 racks: a
// gang a rack holds (64 pods), one that needs racks of a block (500), and
// one that needs blocks of a zone (1,500; a block of 500 nodes holds about
// 1,100 free GPUs). The nodes are a prepared NodeTable, as the scheduler
// keeps them, so the plan itself is measured.
func BenchmarkPlanGroupPreferred(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		nodes := benchCluster(n)
		for i := range nodes {
			nodes[i].Labels[blockKey] = fmt.Sprintf("block-%02d", i/500)
		}
		for _, size := range []int{64, 500, 1500} {
			if size > n/2 {
				continue
			}
			for name, mk := range map[string]func() *placement.Group{
				"zone": func() *placement.Group { return withKey(gang("ns/job", size, size, benchShape), zoneKey) },
				"zone+prefer-rack-block": func() *placement.Group {
					return preferring(withKey(gang("ns/job", size, size, benchShape), zoneKey), rackKey, blockKey)
				},
			} {
				root := mk()
				b.Run(fmt.Sprintf("nodes=%d/gang=%d/topology=%s", n, size, name), func(b *testing.B) {
					table, err := placement.NewNodeTable(nodes)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := table.Plan(root, nil, placement.Options{}); err != nil {
						b.Fatalf("benchmark scenario is infeasible: %v", err)
					}
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						if _, err := table.Plan(root, nil, placement.Options{}); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
