package topology

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// NodesFromSnapshot converts the scheduler's snapshot into planner input.
// Capacity nominated to pods outside the hierarchy being planned counts as
// used, so two plans never promise the same room.
func NodesFromSnapshot(infos []fwk.NodeInfo, nominated func(node string) []fwk.PodInfo, inHierarchy map[types.UID]bool) []placement.Node {
	out := make([]placement.Node, 0, len(infos))
	for _, ni := range infos {
		node := ni.Node()
		if node == nil {
			continue
		}
		alloc, req := ni.GetAllocatable(), ni.GetRequested()
		pn := placement.Node{
			Name:          node.Name,
			Labels:        node.Labels,
			Allocatable:   fromResource(alloc),
			Requested:     fromResource(req),
			MaxPods:       alloc.GetAllowedPodNumber(),
			PodCount:      len(ni.GetPods()),
			Taints:        node.Spec.Taints,
			Unschedulable: node.Spec.Unschedulable,
		}
		for _, p := range nominated(node.Name) {
			pod := p.GetPod()
			if inHierarchy[pod.UID] {
				continue
			}
			for name, v := range Requests(pod) {
				pn.Requested[name] += v
			}
			pn.PodCount++
		}
		out = append(out, pn)
	}
	return out
}

func fromResource(r fwk.Resource) placement.Resources {
	out := placement.Resources{
		corev1.ResourceCPU:              r.GetMilliCPU(),
		corev1.ResourceMemory:           r.GetMemory(),
		corev1.ResourceEphemeralStorage: r.GetEphemeralStorage(),
	}
	for name, v := range r.GetScalarResources() {
		out[name] = v
	}
	return out
}

// Requests are a pod's effective requests in planner units (milli-cpu).
func Requests(pod *corev1.Pod) placement.Resources {
	out := placement.Resources{}
	for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		if name == corev1.ResourceCPU {
			out[name] = q.MilliValue()
		} else {
			out[name] = q.Value()
		}
	}
	return out
}

// shapeKey identifies pods the planner may treat as interchangeable.
func shapeKey(pod *corev1.Pod) string {
	var b strings.Builder
	req := Requests(pod)
	names := make([]string, 0, len(req))
	for n := range req {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "%s=%d;", n, req[corev1.ResourceName(n)])
	}
	fmt.Fprintf(&b, "|%v|%v", pod.Spec.Tolerations, pod.Spec.NodeSelector)
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		fmt.Fprintf(&b, "|%v", a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	}
	return b.String()
}

func shapeOf(pod *corev1.Pod) placement.Shape {
	s := placement.Shape{Requests: Requests(pod), Tolerations: pod.Spec.Tolerations, NodeSelector: pod.Spec.NodeSelector}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		s.RequiredAffinity = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return s
}

// PodKey identifies a pod in a plan by UID: a re-created pod with the same
// name is a different member and must not inherit the old one's node.
func PodKey(p *corev1.Pod) string { return string(p.UID) }

// PlanInput turns a group hierarchy into the planner's tree. Members
// reserved or bound are fixed (they pin the domain and count toward
// quorum); pending members are to be placed. It also returns the UIDs of
// every member, so their own nominations are not counted against them.
func PlanInput(t *groups.Tree) (*placement.Group, map[types.UID]bool) {
	uids := map[types.UID]bool{}
	var build func(t *groups.Tree) *placement.Group
	build = func(t *groups.Tree) *placement.Group {
		g := &placement.Group{Name: t.Key.String(), TopologyKey: t.TopologyKey, Policy: placement.Basic}
		if t.Gang {
			g.Policy = placement.Gang
		}
		if t.Key.Kind == groups.CompositeKind {
			g.MinGroupCount = t.MinGroupCount
			for _, ch := range t.Children {
				g.Children = append(g.Children, build(ch))
			}
			return g
		}
		g.MinCount = t.MinCount
		shapes := map[string]int{}
		for _, m := range t.Members {
			uids[m.Pod.UID] = true
			switch m.State {
			case groups.Assumed, groups.Bound:
				if m.Node != "" {
					g.Bound = append(g.Bound, placement.BoundPod{Key: PodKey(m.Pod), Node: m.Node})
				}
			case groups.Pending:
				k := shapeKey(m.Pod)
				idx, ok := shapes[k]
				if !ok {
					idx = len(g.Shapes)
					shapes[k] = idx
					g.Shapes = append(g.Shapes, shapeOf(m.Pod))
				}
				g.Pending = append(g.Pending, placement.Pod{Key: PodKey(m.Pod), Shape: idx})
			}
		}
		return g
	}
	return build(t), uids
}
