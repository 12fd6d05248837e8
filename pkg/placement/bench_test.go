package placement_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// benchCluster builds GPU nodes in racks of 100 and zones of 25 racks
// (2,500 nodes), partly used in a repeating pattern so that free GPUs per
// node run from 0 to 8 and best-fit has real choices to make.
func benchCluster(count int) []placement.Node {
	nodes := make([]placement.Node, count)
	for i := range nodes {
		rack := i / 100
		usedGPUs := int64((i * 7) % 9)
		nodes[i] = placement.Node{
			Name:        fmt.Sprintf("node-%05d", i),
			Labels:      map[string]string{zoneKey: fmt.Sprintf("zone-%d", rack/25), rackKey: fmt.Sprintf("rack-%03d", rack)},
			Allocatable: placement.Resources{gpu: 8, cpu: 64000, mem: 256 * gibibyte},
			Requested:   placement.Resources{gpu: usedGPUs, cpu: usedGPUs * 4000, mem: usedGPUs * 16 * gibibyte},
			MaxPods:     110,
			PodCount:    int(usedGPUs),
		}
	}
	return nodes
}

var benchShape = placement.Shape{Requests: placement.Resources{gpu: 1, cpu: 4000, mem: 16 * gibibyte}}

func benchPlan(b *testing.B, nodes []placement.Node, root *placement.Group, pods int) {
	b.Helper()
	if _, err := placement.PlanGroup(nodes, root, placement.Options{}); err != nil {
		b.Fatalf("benchmark scenario is infeasible: %v", err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := placement.PlanGroup(nodes, root, placement.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*pods), "ns/pod")
}

// BenchmarkPlanGroup plans one gang against a cluster.
//
//   - nodes=N/gang=G/topology=T: 8- and 64-pod gangs unconstrained or in one
//     rack; the 1,000-pod gang unconstrained or in one zone (a rack of 100
//     nodes cannot hold it).
//   - composite=3x1000: a gang of three 1,000-pod gangs in one zone.
//   - linear-nodes and linear-pods: one dimension grows, the other is fixed,
//     to show that cost grows linearly.
func BenchmarkPlanGroup(b *testing.B) {
	for _, n := range []int{1000, 5000, 7500} {
		nodes := benchCluster(n)
		for _, size := range []int{8, 64, 1000} {
			constrained := rackKey
			if size >= 1000 {
				constrained = zoneKey
			}
			for _, key := range []string{"", constrained} {
				topology := map[string]string{"": "none", rackKey: "rack", zoneKey: "zone"}[key]
				root := withKey(gang("ns/job", size, size, benchShape), key)
				b.Run(fmt.Sprintf("nodes=%d/gang=%d/topology=%s", n, size, topology), func(b *testing.B) {
					benchPlan(b, nodes, root, size)
				})
			}
		}
	}

	b.Run("nodes=7500/composite=3x1000/topology=zone", func(b *testing.B) {
		root := composite("ns/job", placement.Gang, 3, zoneKey,
			gang("ns/a", 1000, 1000, benchShape),
			gang("ns/b", 1000, 1000, benchShape),
			gang("ns/c", 1000, 1000, benchShape))
		benchPlan(b, benchCluster(7500), root, 3000)
	})

	for _, n := range []int{1000, 2000, 4000, 8000} {
		nodes := benchCluster(n)
		for _, key := range []string{"", rackKey} {
			topology := map[string]string{"": "none", rackKey: "rack"}[key]
			b.Run(fmt.Sprintf("linear-nodes/gang=64/topology=%s/nodes=%d", topology, n), func(b *testing.B) {
				benchPlan(b, nodes, withKey(gang("ns/job", 64, 64, benchShape), key), 64)
			})
		}
	}
	nodes := benchCluster(7500)
	for _, size := range []int{125, 250, 500, 1000, 2000, 4000} {
		b.Run(fmt.Sprintf("linear-pods/nodes=7500/topology=none/gang=%d", size), func(b *testing.B) {
			benchPlan(b, nodes, gang("ns/job", size, size, benchShape), size)
		})
	}
}

// BenchmarkNodeTablePlan plans a small gang again and again on one table,
// as a scheduler does between node updates. B/node is what one plan
// allocates per node of the table: plans reuse the per-node working
// memory of the plans before them, so it stays far below the 8 bytes of a
// single per-node slice.
func BenchmarkNodeTablePlan(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		table, err := placement.NewNodeTable(benchCluster(n))
		if err != nil {
			b.Fatal(err)
		}
		for _, key := range []string{"", rackKey} {
			topology := map[string]string{"": "none", rackKey: "rack"}[key]
			root := withKey(gang("ns/job", 8, 8, benchShape), key)
			b.Run(fmt.Sprintf("nodes=%d/gang=8/topology=%s", n, topology), func(b *testing.B) {
				if _, err := table.Plan(root, nil, placement.Options{}); err != nil {
					b.Fatalf("benchmark scenario is infeasible: %v", err)
				}
				b.ReportAllocs()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for b.Loop() {
					if _, err := table.Plan(root, nil, placement.Options{}); err != nil {
						b.Fatal(err)
					}
				}
				runtime.ReadMemStats(&after)
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N*n), "B/node")
			})
		}
	}
}
