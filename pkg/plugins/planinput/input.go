package planinput

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// NodesFromSnapshot converts the scheduler's snapshot into planner input.
// Capacity nominated to pods outside the hierarchy being planned counts as
// used, so two plans never promise the same room. Callers that plan often
// keep a SnapshotNodes instead, which converts only what changed.
func NodesFromSnapshot(infos []fwk.NodeInfo, nominated func(node string) []fwk.PodInfo, inHierarchy map[types.UID]bool) []placement.Node {
	out := make([]placement.Node, 0, len(infos))
	for _, ni := range infos {
		if ni.Node() == nil {
			continue
		}
		n := convertNode(ni)
		if u, ok := nominatedUsage(n.Name, nominated, inHierarchy); ok {
			for name, v := range u.Requested {
				n.Requested[name] += v
			}
			n.PodCount += u.Pods
		}
		out = append(out, n)
	}
	return out
}

// nominatedUsage is the room nominated on node to pods outside the hierarchy.
func nominatedUsage(node string, nominated func(node string) []fwk.PodInfo, inHierarchy map[types.UID]bool) (placement.Usage, bool) {
	u := placement.Usage{Node: node}
	for _, p := range nominated(node) {
		pod := p.GetPod()
		if inHierarchy[pod.UID] {
			continue
		}
		if u.Requested == nil {
			u.Requested = placement.Resources{}
		}
		for name, v := range placement.PodRequests(pod) {
			u.Requested[name] += v
		}
		u.Pods++
	}
	return u, u.Pods > 0
}

// SnapshotNodes keeps the scheduler's snapshot as a placement.NodeTable
// across plans. Between two plans the snapshot moves by a few nodes (the
// pods just bound), and preparing all of a 5,000-node snapshot per gang was
// most of a small gang's planning cost; now only nodes whose NodeInfo
// generation moved are converted again.
type SnapshotNodes struct {
	mu    sync.Mutex
	table *placement.NodeTable
	// The snapshot lists nodes in the same order until the node set
	// changes, so what was converted is remembered by position.
	names []string
	gens  []int64
}

// Table returns the planner's view of infos, and the room nominated to pods
// outside inHierarchy as reserved usage. The table is only valid until the
// next call; the scheduling cycle calls serially.
func (s *SnapshotNodes) Table(infos []fwk.NodeInfo, nominated func(node string) []fwk.PodInfo, inHierarchy map[types.UID]bool) (*placement.NodeTable, []placement.Usage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.refresh(infos) {
		if err := s.rebuild(infos); err != nil {
			return nil, nil, err
		}
	}
	var reserved []placement.Usage
	for _, name := range s.names {
		if name == "" {
			continue
		}
		if u, ok := nominatedUsage(name, nominated, inHierarchy); ok {
			reserved = append(reserved, u)
		}
	}
	return s.table, reserved, nil
}

// refresh updates the nodes whose generation moved, and reports false when
// the node set or its order changed.
func (s *SnapshotNodes) refresh(infos []fwk.NodeInfo) bool {
	if s.table == nil || len(infos) != len(s.names) {
		return false
	}
	for i, ni := range infos {
		node := ni.Node()
		if node == nil {
			if s.names[i] != "" {
				return false
			}
			continue
		}
		if node.Name != s.names[i] {
			return false
		}
		if g := ni.GetGeneration(); g != s.gens[i] {
			if err := s.table.Update(convertNode(ni)); err != nil {
				return false
			}
			s.gens[i] = g
		}
	}
	return true
}

func (s *SnapshotNodes) rebuild(infos []fwk.NodeInfo) error {
	s.table, s.names, s.gens = nil, make([]string, len(infos)), make([]int64, len(infos))
	nodes := make([]placement.Node, 0, len(infos))
	for i, ni := range infos {
		if ni.Node() == nil {
			continue
		}
		n := convertNode(ni)
		nodes = append(nodes, n)
		s.names[i], s.gens[i] = n.Name, ni.GetGeneration()
	}
	slices.SortFunc(nodes, func(a, b placement.Node) int { return strings.Compare(a.Name, b.Name) })
	t, err := placement.NewNodeTable(nodes)
	if err != nil {
		s.names = nil
		return err
	}
	s.table = t
	return nil
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

// shapeKey identifies pods the planner may treat as interchangeable.
func shapeKey(pod *corev1.Pod) string {
	var b strings.Builder
	req := placement.PodRequests(pod)
	names := make([]string, 0, len(req))
	for n := range req {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "%s=%d;", n, req[corev1.ResourceName(n)])
	}
	// Tolerations are written out field by field: %v of a toleration
	// prints the address of its TolerationSeconds, which made every pod
	// that admission gave the default not-ready/unreachable tolerations a
	// shape of its own.
	b.WriteByte('|')
	for _, t := range pod.Spec.Tolerations {
		fmt.Fprintf(&b, "%q,%q,%q,%q", t.Key, t.Operator, t.Value, t.Effect)
		if t.TolerationSeconds != nil {
			fmt.Fprintf(&b, ",%d", *t.TolerationSeconds)
		}
		b.WriteByte(';')
	}
	fmt.Fprintf(&b, "|%v", pod.Spec.NodeSelector)
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		fmt.Fprintf(&b, "|%v", a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	}
	return b.String()
}

func shapeOf(pod *corev1.Pod) placement.Shape {
	s := placement.Shape{Requests: placement.PodRequests(pod), Tolerations: pod.Spec.Tolerations, NodeSelector: pod.Spec.NodeSelector}
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		s.RequiredAffinity = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	return s
}

// belowAffinity keeps the preferred levels a self-matching affinity key
// leaves meaningful. When the key is one of the levels, the pods must share
// one domain of it, so it becomes the required key and the levels above it
// go. Otherwise the levels stay, and the planner refuses them if the nodes
// show them wider than the key.
func belowAffinity(levels []string, key string) []string {
	if i := slices.Index(levels, key); i >= 0 {
		return levels[:i:i]
	}
	return levels
}

// PodKey identifies a pod in a plan by UID: a re-created pod with the same
// name is a different member and must not inherit the old one's node.
func PodKey(p *corev1.Pod) string { return string(p.UID) }

// PlanInput turns a group hierarchy into the planner's tree. Members
// reserved or bound are fixed (they pin the domain and count toward
// quorum); pending members are to be placed. It also returns the UIDs of
// every member, so their own nominations are not counted against them.
// It models no pod-level constraints; BuildInput does.
func PlanInput(t *groups.Tree) (*placement.Group, map[types.UID]bool) {
	g, uids, _ := BuildInput(t, nil)
	return g, uids
}

// BuildInput is PlanInput with the constraints the scheduler's filters
// enforce (see Constraints). Shapes then also differ by the member classes
// their pods belong to and the constraints they carry. The error comes
// from a probe that could not run.
func BuildInput(t *groups.Tree, c *Constraints) (*placement.Group, map[types.UID]bool, error) {
	uids := map[types.UID]bool{}
	pt := &planTerms{byPod: map[*corev1.Pod]podTerms{}, ports: map[string]bool{}}
	if c != nil {
		pt = pendingTerms(t, c)
	}
	var firstErr error
	root := t
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
		g.PreferredKeys = t.PreferredKeys
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
				if c != nil {
					k += "#" + pt.signature(c, m.Pod) + c.deviceKey(root, m.Pod)
				}
				idx, ok := shapes[k]
				if !ok {
					idx = len(g.Shapes)
					shapes[k] = idx
					shape := shapeOf(m.Pod)
					if c != nil {
						if err := c.constrain(root, t, pt, k, m.Pod, &shape); err != nil && firstErr == nil {
							firstErr = err
						}
						if g.TopologyKey == "" {
							g.TopologyKey = selfAffinityKey(pt, m.Pod, c)
							g.PreferredKeys = belowAffinity(g.PreferredKeys, g.TopologyKey)
						}
						if k := c.sharedDomainKey(m.Pod); k != "" && g.TopologyKey == "" {
							// Members sharing a claim go where its
							// allocation reaches: one domain of k.
							g.TopologyKey = k
							g.PreferredKeys = belowAffinity(g.PreferredKeys, k)
						}
					}
					g.Shapes = append(g.Shapes, shape)
				}
				rank, ranked := RankOf(m.Pod)
				g.Pending = append(g.Pending, placement.Pod{Key: PodKey(m.Pod), Shape: idx, Rank: rank, Ranked: ranked})
			}
		}
		return g
	}
	g := build(t)
	if firstErr != nil {
		return nil, nil, firstErr
	}
	return g, uids, nil
}

// ShapeKey is the key of pod's shape by resources, selection and
// tolerations alone.
func ShapeKey(pod *corev1.Pod) string { return shapeKey(pod) }

// pendingTerms parses the constraints of tree's pending members against
// the running pods' anti-affinity of c's snapshot: what BuildInput and
// ShapeKeys both key shapes by.
func pendingTerms(tree *groups.Tree, c *Constraints) *planTerms {
	pt := &planTerms{byPod: map[*corev1.Pod]podTerms{}, ports: map[string]bool{}, existing: existingAntiAffinity(c.Nodes, c.AntiTerms)}
	var walk func(*groups.Tree)
	walk = func(tr *groups.Tree) {
		for _, m := range tr.Members {
			if m.State == groups.Pending {
				pt.add(m.Pod)
			}
		}
		for _, ch := range tr.Children {
			walk(ch)
		}
	}
	walk(tree)
	return pt
}

// ShapeKeys returns the shape key the next BuildInput of tree under c gives
// pod, constraints included, and its ShapeKey. The topology plugin keys the
// nodes the profile's Filter refused a member on by the former, so the next
// plan of that shape avoids them.
func ShapeKeys(tree *groups.Tree, pod *corev1.Pod, c *Constraints) (key, base string) {
	pt := pendingTerms(tree, c)
	if _, ok := pt.byPod[pod]; !ok {
		pt.add(pod)
	}
	base = shapeKey(pod)
	return base + "#" + pt.signature(c, pod) + c.deviceKey(tree, pod), base
}
