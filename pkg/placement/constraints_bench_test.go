package placement_test

import (
	"fmt"
	"testing"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// BenchmarkPlanGroupConstraints is the planner's cost of each kind of
// member constraint it models, against the same gang without it, on 5,000
// nodes (racks of 100):
//
//   - one-per-node: a class limit of 1 per node, which is what required
//     anti-affinity on kubernetes.io/hostname among members and a shared
//     host port both become;
//   - per-rack: at most k members per rack, the shape a topology spread
//     over racks takes once the plugin has counted running pods;
//   - node-limit: 10% of the nodes excluded for the shape, the form the
//     profile's Filter verdicts (the probe) and earlier refusals take.
//
// The probe itself (the profile's Filter plugins over every node, once per
// shape and node generation) runs in the topology plugin, outside the
// planner; BenchmarkReplanCost there is the conversion it rides on.
func BenchmarkPlanGroupConstraints(b *testing.B) {
	nodes := benchCluster(5000)
	for _, size := range []int{8, 1000} {
		perRack := size/50 + 1
		excluded := map[string]int{}
		for i := 0; i < len(nodes); i += 10 {
			excluded[nodes[i].Name] = 0
		}
		variants := []struct {
			name  string
			shape func() placement.Shape
		}{
			{"none", func() placement.Shape { return benchShape }},
			{"one-per-node", func() placement.Shape {
				s := benchShape
				s.Classes = []string{"job"}
				s.Limits = []placement.DomainLimit{{Key: "", Class: "job", Max: 1, Reason: "one member per node"}}
				return s
			}},
			{fmt.Sprintf("per-rack=%d", perRack), func() placement.Shape {
				s := benchShape
				s.Classes = []string{"job"}
				s.Limits = []placement.DomainLimit{{Key: rackKey, Class: "job", Max: perRack, Reason: "spread over racks"}}
				return s
			}},
			{"node-limit", func() placement.Shape {
				s := benchShape
				s.NodeLimit = excluded
				s.Excluded = "refused by the profile's filters"
				return s
			}},
		}
		for _, v := range variants {
			root := gang("ns/job", size, size, v.shape())
			b.Run(fmt.Sprintf("nodes=5000/gang=%d/%s", size, v.name), func(b *testing.B) {
				benchPlan(b, nodes, root, size)
			})
		}
	}
}
