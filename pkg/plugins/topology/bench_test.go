package topology

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
)

// benchSnapshot is upstream's podgroup perf cluster: 4-cpu / 32Gi nodes in
// racks of 100, a few pods already bound on some of them.
func benchSnapshot(count int) []fwk.NodeInfo {
	infos := make([]fwk.NodeInfo, count)
	for i := range infos {
		name := fmt.Sprintf("node-%05d", (i*7919)%count) // snapshot order is not name order
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
				"kubernetes.io/hostname": name, "topology.phalanx.dev/rack": fmt.Sprintf("rack-%03d", i/100), "topology.phalanx.dev/zone": fmt.Sprintf("zone-%d", i/1000),
			}},
			Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("32Gi"), corev1.ResourcePods: resource.MustParse("110"),
			}},
		}
		ni := framework.NewNodeInfo()
		ni.SetNode(node)
		for j := 0; j < i%3; j++ {
			ni.AddPod(testPod(fmt.Sprintf("%s-p%d", name, j), "100m", name))
		}
		infos[i] = ni
	}
	return infos
}

func noNominations(string) []fwk.PodInfo { return nil }

// BenchmarkReplanCost is the serial cost of one replan apart from the
// groups cache: the snapshot turned into planner input, then the plan.
func BenchmarkReplanCost(b *testing.B) {
	shape := placement.Shape{Requests: placement.Resources{corev1.ResourceCPU: 100, corev1.ResourceMemory: 100 << 20}}
	for _, n := range []int{5000, 7500} {
		infos := benchSnapshot(n)
		for _, size := range []int{4, 1000} {
			g := &placement.Group{Name: "ns/g", Policy: placement.Gang, MinCount: size, Shapes: []placement.Shape{shape}, TopologyKey: "topology.phalanx.dev/rack"}
			if size >= 1000 {
				g.TopologyKey = ""
			}
			for i := 0; i < size; i++ {
				g.Pending = append(g.Pending, placement.Pod{Key: fmt.Sprintf("p%d", i)})
			}
			b.Run(fmt.Sprintf("nodes=%d/gang=%d/convert=all", n, size), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					nodes := planinput.NodesFromSnapshot(infos, noNominations, nil)
					if _, err := placement.PlanGroup(nodes, g, placement.Options{}); err != nil {
						b.Fatal(err)
					}
				}
			})
			// As in the scheduling loop: the previous gang's 4 pods landed
			// on 4 nodes since the last plan.
			b.Run(fmt.Sprintf("nodes=%d/gang=%d/convert=changed", n, size), func(b *testing.B) {
				var cache planinput.SnapshotNodes
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					for range 4 {
						ni := infos[(i*37)%len(infos)].(*framework.NodeInfo)
						ni.AddPod(testPod(fmt.Sprintf("x%d", i), "1m", ni.Node().Name))
						i++
					}
					table, reserved, err := cache.Table(infos, noNominations, nil)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := table.Plan(g, reserved, placement.Options{}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
