package placement_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

const (
	gpu      = corev1.ResourceName("nvidia.com/gpu")
	cpu      = corev1.ResourceCPU
	mem      = corev1.ResourceMemory
	zoneKey  = "topology.kubernetes.io/zone"
	rackKey  = "topology.phalanx.dev/rack"
	diskKey  = "disk"
	teamKey  = "team"
	teamTol  = "gpu-team"
	gibibyte = int64(1) << 30
)

type nodeOpt func(*placement.Node)

func mkNode(name string, alloc placement.Resources, opts ...nodeOpt) placement.Node {
	n := placement.Node{Name: name, Labels: map[string]string{}, Allocatable: alloc, Requested: placement.Resources{}, MaxPods: 110}
	for _, o := range opts {
		o(&n)
	}
	return n
}

func at(zone, rack string) nodeOpt {
	return func(n *placement.Node) {
		if zone != "" {
			n.Labels[zoneKey] = zone
		}
		if rack != "" {
			n.Labels[rackKey] = rack
		}
	}
}

func label(k, v string) nodeOpt { return func(n *placement.Node) { n.Labels[k] = v } }

func used(r placement.Resources) nodeOpt { return func(n *placement.Node) { n.Requested = r } }

func podSlots(maxPods, count int) nodeOpt {
	return func(n *placement.Node) { n.MaxPods, n.PodCount = maxPods, count }
}

func tainted(key, value string, effect corev1.TaintEffect) nodeOpt {
	return func(n *placement.Node) {
		n.Taints = append(n.Taints, corev1.Taint{Key: key, Value: value, Effect: effect})
	}
}

func cordoned() nodeOpt { return func(n *placement.Node) { n.Unschedulable = true } }

// gpuNodes makes count nodes with 8 GPUs each; free[i] GPUs are left free on
// node i (8 when free is shorter).
func gpuNodes(prefix string, count int, free []int64, opts ...nodeOpt) []placement.Node {
	var out []placement.Node
	for i := range count {
		f := int64(8)
		if i < len(free) {
			f = free[i]
		}
		o := append([]nodeOpt{used(placement.Resources{gpu: 8 - f})}, opts...)
		out = append(out, mkNode(fmt.Sprintf("%s-%d", prefix, i), placement.Resources{gpu: 8, cpu: 64000, mem: 256 * gibibyte}, o...))
	}
	return out
}

func gpuShape(gpus int64) placement.Shape {
	return placement.Shape{Requests: placement.Resources{gpu: gpus, cpu: 1000, mem: gibibyte}}
}

func cpuShape(milli int64) placement.Shape {
	return placement.Shape{Requests: placement.Resources{cpu: milli}}
}

// gang builds a leaf with n pending pods of one shape.
func gang(name string, minCount, n int, shape placement.Shape) *placement.Group {
	g := &placement.Group{Name: name, Policy: placement.Gang, MinCount: minCount, Shapes: []placement.Shape{shape}}
	for i := range n {
		g.Pending = append(g.Pending, placement.Pod{Key: fmt.Sprintf("%s-%d", name, i)})
	}
	return g
}

func basic(name string, n int, shape placement.Shape) *placement.Group {
	g := gang(name, 0, n, shape)
	g.Policy = placement.Basic
	return g
}

func withKey(g *placement.Group, key string) *placement.Group {
	g.TopologyKey = key
	return g
}

func withBound(g *placement.Group, nodes ...string) *placement.Group {
	for i, n := range nodes {
		g.Bound = append(g.Bound, placement.BoundPod{Key: fmt.Sprintf("%s-bound-%d", g.Name, i), Node: n})
	}
	return g
}

func composite(name string, policy placement.Policy, minGroupCount int, key string, children ...*placement.Group) *placement.Group {
	return &placement.Group{Name: name, Policy: policy, MinGroupCount: minGroupCount, TopologyKey: key, Children: children}
}

func concat(lists ...[]placement.Node) []placement.Node {
	var out []placement.Node
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
