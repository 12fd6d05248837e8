package placement_test

import (
	"fmt"
	"testing"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// balloonCluster builds count GPU nodes in racks of 100 and zones of 25
// racks, each held entirely by one low-priority balloon pod. Balloon
// priorities cycle through 0–3, so a rack holds 25 balloons of each.
func balloonCluster(count int) ([]placement.Node, []placement.Victim) {
	nodes := make([]placement.Node, count)
	victims := make([]placement.Victim, count)
	for i := range nodes {
		rack := i / 100
		name := fmt.Sprintf("node-%05d", i)
		nodes[i] = placement.Node{
			Name:        name,
			Labels:      map[string]string{zoneKey: fmt.Sprintf("zone-%d", rack/25), rackKey: fmt.Sprintf("rack-%03d", rack)},
			Allocatable: placement.Resources{gpu: 8, cpu: 64000, mem: 256 * gibibyte},
			Requested:   placement.Resources{gpu: 8, cpu: 8000, mem: 32 * gibibyte},
			MaxPods:     110,
			PodCount:    1,
		}
		victims[i] = placement.Victim{
			Key:      "balloons/" + name,
			Node:     name,
			Requests: placement.Resources{gpu: 8, cpu: 8000, mem: 32 * gibibyte},
			Priority: int32(i*7) % 4,
			Created:  int64(i),
		}
	}
	return nodes, victims
}

// BenchmarkFindVictims finds the balloons a high-priority gang of
// whole-node pods evicts: 1,000 pods anywhere (1,000 of the priority-0
// balloons), and 64 pods in one rack (64 balloons of priority at most 2,
// since a rack has only 25 of priority 0 and 50 of priority ≤ 1).
func BenchmarkFindVictims(b *testing.B) {
	for _, n := range []int{5000, 7500} {
		nodes, victims := balloonCluster(n)
		for _, tc := range []struct {
			size    int
			key     string
			maxPrio int32
		}{{1000, "", 0}, {64, rackKey, 2}} {
			topology := map[string]string{"": "none", rackKey: "rack"}[tc.key]
			root := withKey(gang("ns/job", tc.size, tc.size, wholeNodeShape), tc.key)
			b.Run(fmt.Sprintf("nodes=%d/balloons=%d/gang=%d/topology=%s", n, n, tc.size, topology), func(b *testing.B) {
				pr, err := placement.FindVictims(nodes, victims, root, highPriority, placement.PreemptOptions{})
				if err != nil {
					b.Fatalf("benchmark scenario is infeasible: %v", err)
				}
				if len(pr.Victims) != tc.size || pr.MaxVictimPriority != tc.maxPrio {
					b.Fatalf("evicts %d victims up to priority %d, want %d up to %d", len(pr.Victims), pr.MaxVictimPriority, tc.size, tc.maxPrio)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if _, err := placement.FindVictims(nodes, victims, root, highPriority, placement.PreemptOptions{}); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(len(pr.Victims)), "victims")
			})
		}
	}
}
