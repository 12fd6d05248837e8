package topology

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// NodesFromSnapshot converts the scheduler's snapshot into planner input.
// Capacity nominated to pods outside the hierarchy being planned counts as
// used, so two plans never promise the same room. Callers that plan often
// use a SnapshotNodes, which converts only what changed.
func NodesFromSnapshot(infos []fwk.NodeInfo, nominated func(node string) []fwk.PodInfo, inHierarchy map[types.UID]bool) []placement.Node {
	var s SnapshotNodes
	return s.Nodes(infos, nominated, inHierarchy)
}

// SnapshotNodes converts the scheduler's snapshot into planner input and
// remembers each node's conversion by NodeInfo generation. A snapshot moves
// by a few nodes between two plans (the pods just bound), so converting all
// of a 5,000-node snapshot per gang was most of a small gang's planning
// cost; now only changed nodes are converted, and the result is kept in
// name order, which is the order the planner wants.
//
// The slice Nodes returns is only valid until the next call: unchanged
// entries are shared between calls. The scheduling cycle calls it serially.
type SnapshotNodes struct {
	mu     sync.Mutex
	sorted []placement.Node // by name
	gens   []int64
	index  map[string]int // name -> position in sorted
}

// Nodes returns the planner's view of infos; see NodesFromSnapshot.
func (s *SnapshotNodes) Nodes(infos []fwk.NodeInfo, nominated func(node string) []fwk.PodInfo, inHierarchy map[types.UID]bool) []placement.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.refresh(infos) {
		s.rebuild(infos)
	}
	out := s.sorted
	for i := range s.sorted {
		pods := nominated(s.sorted[i].Name)
		if len(pods) == 0 {
			continue
		}
		var extra placement.Resources
		count := 0
		for _, p := range pods {
			pod := p.GetPod()
			if inHierarchy[pod.UID] {
				continue
			}
			if extra == nil {
				extra = placement.Resources{}
			}
			for name, v := range Requests(pod) {
				extra[name] += v
			}
			count++
		}
		if count == 0 {
			continue
		}
		// Copy on write: the cached entry stays what the snapshot says.
		if &out[0] == &s.sorted[0] {
			out = slices.Clone(s.sorted)
		}
		n := &out[i]
		n.Requested = maps.Clone(n.Requested)
		for name, v := range extra {
			n.Requested[name] += v
		}
		n.PodCount += count
	}
	return out
}

// refresh updates the nodes whose generation moved, and reports false when
// the set of nodes itself changed.
func (s *SnapshotNodes) refresh(infos []fwk.NodeInfo) bool {
	if s.index == nil {
		return false
	}
	seen := 0
	for _, ni := range infos {
		node := ni.Node()
		if node == nil {
			continue
		}
		i, ok := s.index[node.Name]
		if !ok {
			return false
		}
		seen++
		if g := ni.GetGeneration(); g != s.gens[i] {
			s.sorted[i], s.gens[i] = convertNode(ni), g
		}
	}
	return seen == len(s.sorted)
}

func (s *SnapshotNodes) rebuild(infos []fwk.NodeInfo) {
	type entry struct {
		node placement.Node
		gen  int64
	}
	entries := make([]entry, 0, len(infos))
	for _, ni := range infos {
		if ni.Node() == nil {
			continue
		}
		entries = append(entries, entry{convertNode(ni), ni.GetGeneration()})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.node.Name, b.node.Name) })
	s.sorted = make([]placement.Node, len(entries))
	s.gens = make([]int64, len(entries))
	s.index = make(map[string]int, len(entries))
	for i, e := range entries {
		s.sorted[i], s.gens[i] = e.node, e.gen
		s.index[e.node.Name] = i
	}
}

func convertNode(ni fwk.NodeInfo) placement.Node {
	node := ni.Node()
	alloc, req := ni.GetAllocatable(), ni.GetRequested()
	return placement.Node{
		Name:          node.Name,
		Labels:        node.Labels,
		Allocatable:   fromResource(alloc),
		Requested:     fromResource(req),
		MaxPods:       alloc.GetAllowedPodNumber(),
		PodCount:      len(ni.GetPods()),
		Taints:        node.Spec.Taints,
		Unschedulable: node.Spec.Unschedulable,
	}
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
