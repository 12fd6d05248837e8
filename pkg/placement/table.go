package placement

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// NodeTable is planner input prepared once and reused across plans: the
// nodes in name order, their quantities in dense columns, and, per topology
// key asked for, every node's domain. Preparing 5,000 nodes cost more than
// planning a small gang on them, and between two plans of a scheduler only
// the few nodes that took the last pods change; a NodeTable is updated node
// by node instead of rebuilt.
//
// A NodeTable is not safe for concurrent use. Plans never modify it.
type NodeTable struct {
	nodes []Node
	index map[string]int32 // name -> position in nodes

	cols  map[corev1.ResourceName]int
	ncols int
	// alloc and used hold every node's quantities, node-major with ncols
	// columns; a resource a node does not list is 0.
	alloc, used []int64

	// domains caches the per-node domain of each topology key a plan used.
	// Any label change drops the cache.
	domains map[string]*domainIndex

	// broken explains, per node position, why the node's quantities cannot
	// be trusted (a negative total); plans give such a node no room.
	broken map[int32]string

	// ptrs and all are every plan's node list (planNodes), kept with the
	// table: positions do not move while it lives, and rebuilding them
	// for every plan was a tenth of a small gang's planning at 5,000 nodes.
	ptrs []*Node
	all  []int32
	// scratch is the residual buffers the last plan made, lent to the
	// next one (takeScratch): each plan needs a few per-node rows, and
	// allocating them anew made the garbage collector a third of a small
	// gang's planning cost.
	scratch *scratch
}

// scratch is per-node working memory of one plan.
type scratch struct {
	free, slots []int64
	heap        []uint64 // placeLeaf's heap
}

// planNodes returns the node pointers and positions plans work over. The
// slices are shared by every plan of the table and must not be modified.
func (t *NodeTable) planNodes() ([]*Node, []int32) {
	if len(t.ptrs) != len(t.nodes) {
		t.ptrs = make([]*Node, len(t.nodes))
		t.all = make([]int32, len(t.nodes))
		for i := range t.nodes {
			t.ptrs[i] = &t.nodes[i]
			t.all[i] = int32(i)
		}
	}
	return t.ptrs, t.all
}

// takeScratch lends the table's scratch buffers, sized for nres resources
// and cleared; the planner's giveBack returns them. A plan that never gives
// them back (one that fails to build) only costs the next plan an
// allocation.
func (t *NodeTable) takeScratch(nres int) *scratch {
	s := t.scratch
	t.scratch = nil
	if s == nil {
		s = &scratch{}
	}
	s.free = resize(s.free, len(t.nodes)*nres)
	s.slots = resize(s.slots, len(t.nodes))
	return s
}

// giveBack returns the planner's buffers to its table.
func (p *planner) giveBack() {
	if p.scratch == nil {
		return
	}
	p.scratch.heap = p.heap[:0]
	p.table.scratch = p.scratch
}

// resize returns b with length n, zeroed, reusing its array when it is
// large enough.
func resize(b []int64, n int) []int64 {
	if cap(b) < n {
		return make([]int64, n)
	}
	b = b[:n]
	clear(b)
	return b
}

// domainIndex is one topology key over the table's nodes.
type domainIndex struct {
	vals  []int32  // per node: value id, -1 when the label is absent
	names []string // value id -> value, sorted
}

// NewNodeTable validates and prepares nodes. The slice is not retained.
func NewNodeTable(nodes []Node) (*NodeTable, error) {
	if len(nodes) > math.MaxInt32 {
		return nil, errors.New("placement: too many nodes")
	}
	t := &NodeTable{nodes: slices.Clone(nodes), cols: map[corev1.ResourceName]int{}}
	byName := func(a, b Node) int { return strings.Compare(a.Name, b.Name) }
	// Callers that keep their nodes in name order skip the sort.
	if !slices.IsSortedFunc(t.nodes, byName) {
		slices.SortFunc(t.nodes, byName)
	}
	t.index = make(map[string]int32, len(t.nodes))
	for i := range t.nodes {
		n := &t.nodes[i]
		if err := checkNode(n); err != nil {
			return nil, err
		}
		if i > 0 && t.nodes[i-1].Name == n.Name {
			return nil, fmt.Errorf("placement: duplicate node %q", n.Name)
		}
		t.index[n.Name] = int32(i)
		t.addColumns(n)
	}
	t.alloc = make([]int64, len(t.nodes)*t.ncols)
	t.used = make([]int64, len(t.nodes)*t.ncols)
	for i := range t.nodes {
		t.fill(int32(i))
	}
	return t, nil
}

func checkNode(n *Node) error {
	if n.Name == "" {
		return errors.New("placement: node with empty name")
	}
	if n.MaxPods < 0 || n.PodCount < 0 {
		return fmt.Errorf("placement: node %q: negative pod counts", n.Name)
	}
	return nil
}

// addColumns registers the resource names of n; it reports whether any
// was new. Columns are only ever added.
func (t *NodeTable) addColumns(n *Node) bool {
	added := false
	for _, rs := range []Resources{n.Allocatable, n.Requested} {
		for name := range rs {
			if _, ok := t.cols[name]; !ok {
				t.cols[name] = t.ncols
				t.ncols++
				added = true
			}
		}
	}
	return added
}

// fill copies node i's quantities into its rows.
func (t *NodeTable) fill(i int32) {
	n := &t.nodes[i]
	a := t.alloc[int(i)*t.ncols : int(i+1)*t.ncols]
	u := t.used[int(i)*t.ncols : int(i+1)*t.ncols]
	clear(a)
	clear(u)
	for name, v := range n.Allocatable {
		a[t.cols[name]] = v
	}
	for name, v := range n.Requested {
		u[t.cols[name]] = v
	}
	delete(t.broken, i)
	if why := brokenTotals(n); why != "" {
		if t.broken == nil {
			t.broken = map[int32]string{}
		}
		t.broken[i] = why
	}
}

// brokenTotals explains a negative quantity of n, "" when there is none.
// The scheduler sums requests in int64 without overflow checks: two pods
// asking for 8Ei of memory wrap a node's requested total negative. Such a
// node's room is unknown; rejecting every plan over it would let one node
// stop every group in the cluster.
func brokenTotals(n *Node) string {
	for _, kind := range []struct {
		what string
		rs   Resources
	}{{"allocatable", n.Allocatable}, {"requested", n.Requested}} {
		for _, name := range slices.Sorted(maps.Keys(kind.rs)) {
			if v := kind.rs[name]; v < 0 {
				return fmt.Sprintf("%s %s is negative (%d), an int64 overflow of the node's totals: the node gets no group pods until it is fixed", kind.what, name, v)
			}
		}
	}
	return ""
}

// usable reports whether plans may place pods on node position i.
func (t *NodeTable) usable(i int) bool {
	_, bad := t.broken[int32(i)]
	return !bad
}

// Unusable lists the nodes that plans leave out because their quantities
// are negative, in name order, with the reason for each.
func (t *NodeTable) Unusable() []UnusableNode {
	if len(t.broken) == 0 {
		return nil
	}
	out := make([]UnusableNode, 0, len(t.broken))
	for i, why := range t.broken {
		out = append(out, UnusableNode{Name: t.nodes[i].Name, Reason: why})
	}
	slices.SortFunc(out, func(a, b UnusableNode) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// UnusableNode is a node that plans leave out, and why.
type UnusableNode struct {
	Name   string
	Reason string
}

// restride rebuilds the rows after new columns appeared.
func (t *NodeTable) restride() {
	t.alloc = make([]int64, len(t.nodes)*t.ncols)
	t.used = make([]int64, len(t.nodes)*t.ncols)
	for i := range t.nodes {
		t.fill(int32(i))
	}
}

// Len is the number of nodes.
func (t *NodeTable) Len() int { return len(t.nodes) }

// Has reports whether the table holds a node of that name.
func (t *NodeTable) Has(name string) bool {
	_, ok := t.index[name]
	return ok
}

// Nodes returns a copy of the nodes in name order.
func (t *NodeTable) Nodes() []Node { return slices.Clone(t.nodes) }

// Update replaces the node of the same name. Adding or removing nodes
// needs a new table.
func (t *NodeTable) Update(n Node) error {
	i, ok := t.index[n.Name]
	if !ok {
		return fmt.Errorf("placement: node %q is not in the table", n.Name)
	}
	if err := checkNode(&n); err != nil {
		return err
	}
	if !maps.Equal(t.nodes[i].Labels, n.Labels) {
		t.domains = nil
	}
	t.nodes[i] = n
	if t.addColumns(&n) {
		t.restride()
		return nil
	}
	t.fill(i)
	return nil
}

// domainsOf returns the domain index of a topology key, building it on
// first use.
func (t *NodeTable) domainsOf(key string) *domainIndex {
	if d := t.domains[key]; d != nil {
		return d
	}
	d := &domainIndex{vals: make([]int32, len(t.nodes))}
	// Ids are handed out in first-seen order, then remapped to sorted order.
	id := map[string]int32{}
	var values []string
	// Nodes in name order mostly come in runs of one domain (rack-07-n01,
	// rack-07-n02, ...): the previous node's id answers without a lookup.
	last, lastID := "", int32(-1)
	for i := range t.nodes {
		v, ok := t.nodes[i].Labels[key]
		if !ok {
			d.vals[i] = -1
			continue
		}
		if lastID >= 0 && v == last {
			d.vals[i] = lastID
			continue
		}
		first, seen := id[v]
		if !seen {
			first = int32(len(values))
			values = append(values, v)
			id[v] = first
		}
		d.vals[i] = first
		last, lastID = v, first
	}
	d.names = slices.Clone(values)
	slices.Sort(d.names)
	remap := make([]int32, len(values))
	for sorted, v := range d.names {
		remap[id[v]] = int32(sorted)
	}
	for i, v := range d.vals {
		if v >= 0 {
			d.vals[i] = remap[v]
		}
	}
	if t.domains == nil {
		t.domains = map[string]*domainIndex{}
	}
	t.domains[key] = d
	return d
}

// Usage is room taken on a node beyond what the table says, e.g. by pods
// nominated to it: it counts as requested for one plan.
type Usage struct {
	Node      string
	Requested Resources
	Pods      int
}

// Plan places the pending pods of root on the table's nodes, with reserved
// counted as used; see PlanGroup. Usage on nodes the table lacks is ignored.
func (t *NodeTable) Plan(root *Group, reserved []Usage, opts Options) (*Plan, error) {
	p, err := newPlanner(t, reserved, root, opts)
	if err != nil {
		return nil, err
	}
	// The plan's result is copied out of the planner (plan, and the
	// failure's numbers), so its buffers serve the next plan.
	defer p.giveBack()
	if !p.quorum(p.root, p.all) {
		return nil, p.root.fail
	}
	p.surplus(p.root)
	p.orderRanks()
	return p.plan(), nil
}
