package placement

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// PlanGroup places the pending pods of the group tree rooted at root on nodes.
//
// The error is an *Infeasible when the root gang cannot be satisfied, and a
// plain error when the input is invalid (duplicate names, a shape index out
// of range, negative quantities, a cyclic tree). A basic root never fails,
// unless the nodes refuse its preferred levels (see preferred_check.go).
// PlanGroup does not modify its arguments.
//
// A caller that plans repeatedly against a slowly changing cluster keeps a
// NodeTable instead; PlanGroup prepares one per call.
func PlanGroup(nodes []Node, root *Group, opts Options) (*Plan, error) {
	t, err := NewNodeTable(nodes)
	if err != nil {
		return nil, err
	}
	return t.Plan(root, nil, opts)
}

// planner holds one planning run. Nodes are indexed in name order, so
// iterating by index is the deterministic tie-break everywhere.
type planner struct {
	opts     Options
	table    *NodeTable
	reserved []Usage
	nodes    []*Node
	all      []int32

	resIdx   map[corev1.ResourceName]int
	resNames []corev1.ResourceName
	nres     int
	// free is the residual of every tracked resource, node-major; slots the
	// residual pod count. Placements update both and rollback restores them,
	// so capacity taken by one group of the plan is never offered to another.
	free    []int64
	slots   []int64
	largest []int64 // per resource, the largest allocatable of any node
	// scratch holds free, slots and heap, lent by the table (takeScratch).
	scratch *scratch

	shapes []*shapeInfo
	keys   []*topoKey
	root   *gnode
	pods   []podInfo
	log    []assignment

	counters []*counter // member-to-member constraint counts (constraints.go)

	caps []int64  // per global shape, scratch for rank
	heap []uint64 // scratch for placeLeaf
}

type podInfo struct {
	key    string
	leaf   *gnode
	local  int // index into leaf.byShape
	rank   int64
	ranked bool
	prefer string
}

// assignment is one entry of the undo log: pod (global index) on node.
type assignment struct {
	pod  int32
	node int32
}

type resAmount struct {
	idx int
	amt int64
}

type shapeDemand struct {
	shape int // global shape
	n     int64
}

// gnode is the planner's working copy of a Group.
type gnode struct {
	g        *Group
	parent   *gnode
	children []*gnode
	leaf     bool
	gang     bool
	key      int   // into planner.keys; -1 when unconstrained
	pinned   int32 // domain value the bound pods pin; -1 when none
	// need is what the quorum takes: pods beyond the bound ones for a leaf,
	// children for a composite. A basic group below the root counts as
	// satisfied once one of its pods (or children) is placed, the same rule
	// Permit applies; a basic root needs nothing, so it never fails.
	need int
	// size is the quorum in pods, used to order siblings.
	size   int
	demand []shapeDemand // pending pods of the subtree per global shape

	// Leaf only.
	bound   int
	pending int
	gshape  []int     // local shape -> global shape
	byShape [][]int32 // local shape -> pending pods, in podOrder (rank.go)
	cursor  []int     // local shape -> pods of byShape already placed
	order   []int     // local shapes, larger first; breaks ties in shapeOrder
	ranked  bool      // some pending pod has a rank (rank.go)
	// preferred, per local shape, the nodes some pending pod of it
	// prefers (Pod.Prefer) by index; nil when none does.
	preferred []map[int32]bool

	// Outcome, rewritten by every quorum attempt.
	ok       bool
	dom      int32
	domNodes []int32
	trial    int32 // domain under evaluation, for messages of descendants
	fail     *Infeasible

	// Preferred levels (preferred.go), leaf only.
	prefs   []int       // into planner.keys, narrowest first
	boundOn []int32     // nodes of the bound members that are in the snapshot
	refused *Infeasible // what the nodes say against the levels; set once per plan
	choice  *Choice     // where the last successful quorum put the group
	// wider are the domains around domNodes, narrowest first, up to the
	// required domain (or the parent's): where surplus goes once the
	// chosen domains are full.
	wider []*pdom
}

func newPlanner(t *NodeTable, reserved []Usage, root *Group, opts Options) (*planner, error) {
	if opts.DomainPolicy < BestFit || opts.DomainPolicy > FirstFit {
		return nil, fmt.Errorf("placement: unknown domain policy %d", opts.DomainPolicy)
	}
	if root == nil {
		return nil, errors.New("placement: nil root group")
	}
	p := &planner{opts: opts, table: t, reserved: reserved, resIdx: map[corev1.ResourceName]int{}}
	p.indexNodes()
	b := &builder{p: p, seen: map[*Group]bool{}, names: map[string]bool{}, podKeys: map[string]bool{}, shapeKeys: map[string]int{}, keyIdx: map[string]int{}}
	var err error
	p.root, err = b.build(root, nil, "root")
	if err != nil {
		return nil, err
	}
	if err := p.initResidual(); err != nil {
		return nil, err
	}
	p.initShapes()
	b.initKeys()
	p.initConstraints()
	b.pin()
	p.checkPreferred(b.leaves)
	p.prepare(p.root)
	p.caps = make([]int64, len(p.shapes))
	return p, nil
}

func (p *planner) indexNodes() {
	p.nodes, p.all = p.table.planNodes()
}

// nodeIndex finds a node by name.
func (p *planner) nodeIndex(name string) (int32, bool) {
	i, ok := p.table.index[name]
	return i, ok
}

// builder validates the tree and builds the gnodes.
type builder struct {
	p         *planner
	seen      map[*Group]bool
	names     map[string]bool
	podKeys   map[string]bool
	shapeKeys map[string]int
	keyIdx    map[string]int
	leaves    []*gnode
	boundOn   [][]int32 // per leaf in leaves: nodes of its bound pods that are in the snapshot
}

func (b *builder) build(g *Group, parent *gnode, path string) (*gnode, error) {
	if g == nil {
		return nil, fmt.Errorf("placement: %s: nil group", path)
	}
	if b.seen[g] {
		return nil, fmt.Errorf("placement: %s: group %q appears twice in the tree", path, g.Name)
	}
	b.seen[g] = true
	if g.Name == "" {
		return nil, fmt.Errorf("placement: %s: group with empty name", path)
	}
	if b.names[g.Name] {
		return nil, fmt.Errorf("placement: duplicate group name %q", g.Name)
	}
	b.names[g.Name] = true
	if g.Policy != Gang && g.Policy != Basic {
		return nil, fmt.Errorf("placement: group %q: unknown policy %d", g.Name, g.Policy)
	}
	n := &gnode{g: g, parent: parent, leaf: len(g.Children) == 0, gang: g.Policy == Gang, key: -1, pinned: -1, dom: -1, trial: -1}
	if g.TopologyKey != "" {
		n.key = b.key(g.TopologyKey)
	}
	if err := b.preferred(n); err != nil {
		return nil, err
	}
	if n.leaf {
		return n, b.buildLeaf(n)
	}
	if len(g.Shapes) > 0 || len(g.Pending) > 0 || len(g.Bound) > 0 {
		return nil, fmt.Errorf("placement: group %q has children, so it cannot hold shapes or pods", g.Name)
	}
	if g.MinGroupCount < 0 {
		return nil, fmt.Errorf("placement: group %q: negative minGroupCount %d", g.Name, g.MinGroupCount)
	}
	for i, c := range g.Children {
		child, err := b.build(c, n, fmt.Sprintf("%s.children[%d]", g.Name, i))
		if err != nil {
			return nil, err
		}
		n.children = append(n.children, child)
	}
	return n, nil
}

// key registers a topology key of the tree and returns its index.
func (b *builder) key(name string) int {
	k, ok := b.keyIdx[name]
	if !ok {
		k = len(b.p.keys)
		b.keyIdx[name] = k
		b.p.keys = append(b.p.keys, &topoKey{name: name})
	}
	return k
}

func (b *builder) buildLeaf(n *gnode) error {
	g, p := n.g, b.p
	if g.MinCount < 0 {
		return fmt.Errorf("placement: group %q: negative minCount %d", g.Name, g.MinCount)
	}
	n.gshape = make([]int, len(g.Shapes))
	for i := range g.Shapes {
		gs, err := b.shape(&g.Shapes[i])
		if err != nil {
			return fmt.Errorf("placement: group %q shapes[%d]: %w", g.Name, i, err)
		}
		n.gshape[i] = gs
	}
	n.byShape = make([][]int32, len(g.Shapes))
	n.cursor = make([]int, len(g.Shapes))
	for i, pod := range g.Pending {
		if pod.Key == "" {
			return fmt.Errorf("placement: group %q pending[%d]: empty pod key", g.Name, i)
		}
		if b.podKeys[pod.Key] {
			return fmt.Errorf("placement: group %q: pod %q appears twice", g.Name, pod.Key)
		}
		b.podKeys[pod.Key] = true
		if pod.Shape < 0 || pod.Shape >= len(g.Shapes) {
			return fmt.Errorf("placement: group %q pod %q: shape %d out of range [0,%d)", g.Name, pod.Key, pod.Shape, len(g.Shapes))
		}
		if len(p.pods) >= math.MaxInt32 {
			return errors.New("placement: too many pods")
		}
		p.pods = append(p.pods, podInfo{key: pod.Key, leaf: n, local: pod.Shape, rank: pod.Rank, ranked: pod.Ranked, prefer: pod.Prefer})
		n.byShape[pod.Shape] = append(n.byShape[pod.Shape], int32(len(p.pods)-1))
		n.ranked = n.ranked || pod.Ranked
	}
	// Ranked pods go first, lowest rank first, so that a gang larger than
	// its room leaves out its highest ranks and its unranked pods.
	for _, pods := range n.byShape {
		slices.SortFunc(pods, p.podOrder)
	}
	var on []int32
	for i, bp := range g.Bound {
		if bp.Key == "" {
			return fmt.Errorf("placement: group %q bound[%d]: empty pod key", g.Name, i)
		}
		if b.podKeys[bp.Key] {
			return fmt.Errorf("placement: group %q: pod %q appears twice", g.Name, bp.Key)
		}
		b.podKeys[bp.Key] = true
		// A member bound to a node missing from the snapshot still counts
		// toward MinCount, but cannot tell which domain it is in.
		if idx, ok := p.nodeIndex(bp.Node); ok {
			on = append(on, idx)
		}
	}
	for _, pod := range g.Pending {
		idx, ok := p.nodeIndex(pod.Prefer)
		if pod.Prefer == "" || !ok {
			continue
		}
		if n.preferred == nil {
			n.preferred = make([]map[int32]bool, len(g.Shapes))
		}
		if n.preferred[pod.Shape] == nil {
			n.preferred[pod.Shape] = map[int32]bool{}
		}
		n.preferred[pod.Shape][idx] = true
	}
	n.bound = len(g.Bound)
	n.pending = len(g.Pending)
	n.boundOn = on
	b.leaves = append(b.leaves, n)
	b.boundOn = append(b.boundOn, on)
	return nil
}

// shape registers a shape, sharing the global entry with identical shapes of
// other leaves so that eligibility is computed once.
func (b *builder) shape(s *Shape) (int, error) {
	p := b.p
	var reqs []resAmount
	names := make([]corev1.ResourceName, 0, len(s.Requests))
	for name, v := range s.Requests {
		if v < 0 {
			return 0, fmt.Errorf("negative request %s=%d", name, v)
		}
		if v > 0 && name != corev1.ResourcePods {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var key strings.Builder
	for _, name := range names {
		idx, ok := p.resIdx[name]
		if !ok {
			idx = len(p.resNames)
			p.resIdx[name] = idx
			p.resNames = append(p.resNames, name)
		}
		reqs = append(reqs, resAmount{idx: idx, amt: s.Requests[name]})
		fmt.Fprintf(&key, "r:%s=%d;", name, s.Requests[name])
	}
	for _, t := range s.Tolerations {
		fmt.Fprintf(&key, "t:%q,%q,%q,%q;", t.Key, t.Operator, t.Value, t.Effect)
	}
	sel := make([]string, 0, len(s.NodeSelector))
	for k, v := range s.NodeSelector {
		sel = append(sel, fmt.Sprintf("%q=%q", k, v))
	}
	slices.Sort(sel)
	fmt.Fprintf(&key, "s:%s;", strings.Join(sel, ","))
	if s.RequiredAffinity != nil {
		fmt.Fprintf(&key, "a:%q;", fmt.Sprint(s.RequiredAffinity.NodeSelectorTerms))
	}
	if err := constraintKey(&key, s); err != nil {
		return 0, err
	}
	if gs, ok := b.shapeKeys[key.String()]; ok {
		return gs, nil
	}
	gs := len(p.shapes)
	b.shapeKeys[key.String()] = gs
	p.shapes = append(p.shapes, &shapeInfo{spec: s, reqs: reqs})
	return gs, nil
}

// initKeys maps every topology key to a dense value id per node. Ids follow
// the sorted order of values so that comparing ids breaks ties by value.
func (b *builder) initKeys() {
	p := b.p
	for _, k := range p.keys {
		d := p.domainsOf(k.name)
		k.vals, k.names = d.vals, d.names
		k.slot = make([]int32, len(k.names))
		for i := range k.slot {
			k.slot[i] = -1
		}
	}
}

// domainsOf indexes a topology key over the table's nodes: from
// Options.Domains when the caller gives the key's domains, else from the
// node labels (cached by the table).
func (p *planner) domainsOf(key string) *domainIndex {
	byNode, ok := p.opts.Domains[key]
	if !ok {
		return p.table.domainsOf(key)
	}
	// Only values of the table's nodes become domains: a node the map
	// names but the snapshot lacks must not leave an empty domain behind.
	d := &domainIndex{vals: make([]int32, len(p.table.nodes))}
	seen := map[string]bool{}
	for i := range p.table.nodes {
		if v, ok := byNode[p.table.nodes[i].Name]; ok && !seen[v] {
			seen[v] = true
			d.names = append(d.names, v)
		}
	}
	slices.Sort(d.names)
	for i := range p.table.nodes {
		v, ok := byNode[p.table.nodes[i].Name]
		if !ok {
			d.vals[i] = -1
			continue
		}
		id, _ := slices.BinarySearch(d.names, v)
		d.vals[i] = int32(id)
	}
	return d
}

// pin fixes the domain of every constrained group above a bound member.
// Bound pods that disagree (a constraint added late, a manual bind) are
// settled by majority, ties to the smallest value, so the plan never adds a
// third domain.
func (b *builder) pin() {
	votes := map[*gnode]map[int32]int{}
	for i, leaf := range b.leaves {
		for _, node := range b.boundOn[i] {
			for g := leaf; g != nil; g = g.parent {
				if g.key < 0 {
					continue
				}
				v := b.p.keys[g.key].vals[node]
				if v < 0 {
					continue
				}
				if votes[g] == nil {
					votes[g] = map[int32]int{}
				}
				votes[g][v]++
			}
		}
	}
	for g, vs := range votes {
		best, bestN := int32(-1), 0
		for v, n := range vs {
			if n > bestN || (n == bestN && v < best) {
				best, bestN = v, n
			}
		}
		g.pinned = best
	}
}

// prepare computes needs, sizes, demands and orders, bottom-up.
func (p *planner) prepare(g *gnode) {
	below := g.parent != nil
	if g.leaf {
		switch {
		case g.gang:
			g.need = max(0, g.g.MinCount-g.bound)
		case below && g.bound == 0:
			g.need = 1
		}
		g.size = g.need
		for li, pods := range g.byShape {
			if len(pods) > 0 {
				g.demand = addDemand(g.demand, g.gshape[li], int64(len(pods)))
			}
		}
		g.order = make([]int, len(g.gshape))
		for i := range g.order {
			g.order[i] = i
		}
		// Larger shapes first, then those fewer nodes admit: among shapes
		// under equal pressure, these are the hardest to fit later.
		slices.SortStableFunc(g.order, func(a, b int) int {
			sa, sb := p.shapes[g.gshape[a]], p.shapes[g.gshape[b]]
			if sa.share != sb.share {
				if sa.share > sb.share {
					return -1
				}
				return 1
			}
			return sa.eligibleCount - sb.eligibleCount
		})
		return
	}
	sizes := make([]int, 0, len(g.children))
	for _, c := range g.children {
		p.prepare(c)
		for _, d := range c.demand {
			g.demand = addDemand(g.demand, d.shape, d.n)
		}
		sizes = append(sizes, c.size)
	}
	if !g.gang && below {
		g.need = 1
	}
	if g.gang {
		g.need = g.g.MinGroupCount
		slices.Sort(sizes)
		for _, s := range sizes[:min(g.need, len(sizes))] {
			g.size += s
		}
	}
	// When every child is needed, placing the largest first packs best; when
	// only some are, the smallest first satisfies the most.
	largestFirst := g.gang && g.need >= len(g.children)
	slices.SortStableFunc(g.children, func(a, b *gnode) int {
		if a.size != b.size {
			if largestFirst == (a.size > b.size) {
				return -1
			}
			return 1
		}
		return strings.Compare(a.g.Name, b.g.Name)
	})
}

func addDemand(ds []shapeDemand, shape int, n int64) []shapeDemand {
	for i := range ds {
		if ds[i].shape == shape {
			ds[i].n += n
			return ds
		}
	}
	return append(ds, shapeDemand{shape: shape, n: n})
}

// plan assembles the result from the undo log and the accepted groups.
func (p *planner) plan() *Plan {
	pl := &Plan{Assignments: make(map[string]string, len(p.log)), Domains: map[string]string{}}
	placed := make([]bool, len(p.pods))
	for _, a := range p.log {
		pl.Assignments[p.pods[a.pod].key] = p.nodes[a.node].Name
		placed[a.pod] = true
	}
	for i, pod := range p.pods {
		if !placed[i] {
			pl.Unplaced = append(pl.Unplaced, pod.key)
		}
	}
	slices.Sort(pl.Unplaced)
	p.collect(p.root, pl)
	return pl
}

func (p *planner) collect(g *gnode, pl *Plan) {
	if g.key >= 0 && g.dom >= 0 {
		pl.Domains[g.g.Name] = p.keys[g.key].names[g.dom]
	}
	if g.choice != nil {
		if pl.Choices == nil {
			pl.Choices = map[string]Choice{}
		}
		pl.Choices[g.g.Name] = *g.choice
	}
	for _, c := range g.children {
		if c.ok {
			p.collect(c, pl)
		} else if c.fail != nil {
			pl.Unsatisfied = append(pl.Unsatisfied, c.fail)
		}
	}
}
