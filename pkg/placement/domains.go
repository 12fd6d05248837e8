package placement

import (
	"cmp"
	"slices"
)

// topoKey indexes one topology label key over the nodes.
type topoKey struct {
	name  string
	vals  []int32  // per node: value id, -1 when the label is absent
	names []string // value id -> value, sorted
	slot  []int32  // scratch for partitioning, all -1 between calls
}

// candidate is one domain a group may take inside its parent's domain.
type candidate struct {
	val   int32 // value id; -1 for "all of the parent's nodes" or "no domain"
	nodes []int32
	// est is an upper bound on the subtree's pending pods the domain holds,
	// left the room (in pods of the subtree's shapes) that would remain.
	// Both come from per-shape capacity sums, never from per-pod filtering.
	est       int64
	left      int64
	plausible bool
}

// candidates partitions nodes by g's topology key. It never returns an
// empty list: an unconstrained group gets all nodes, a pinned group its
// pinned domain (possibly empty), and a constrained group over unlabeled
// nodes a single empty domain, so quorum can still succeed for groups that
// need nothing. Node order inside a domain is preserved.
func (p *planner) candidates(g *gnode, nodes []int32) []candidate {
	if g.key < 0 {
		return []candidate{{val: -1, nodes: nodes}}
	}
	k := p.keys[g.key]
	if g.pinned >= 0 {
		var in []int32
		for _, n := range nodes {
			if k.vals[n] == g.pinned {
				in = append(in, n)
			}
		}
		return []candidate{{val: g.pinned, nodes: in}}
	}
	var cands []candidate
	var sizes []int
	labeled := 0
	for _, n := range nodes {
		v := k.vals[n]
		if v < 0 {
			continue
		}
		labeled++
		if k.slot[v] < 0 {
			k.slot[v] = int32(len(cands))
			cands = append(cands, candidate{val: v})
			sizes = append(sizes, 0)
		}
		sizes[k.slot[v]]++
	}
	if len(cands) == 0 {
		return []candidate{{val: -1}}
	}
	flat := make([]int32, labeled)
	off := 0
	for i := range cands {
		cands[i].nodes = flat[off : off : off+sizes[i]]
		off += sizes[i]
	}
	for _, n := range nodes {
		if v := k.vals[n]; v >= 0 {
			c := &cands[k.slot[v]]
			c.nodes = append(c.nodes, n)
		}
	}
	for i := range cands {
		k.slot[cands[i].val] = -1
	}
	return cands
}

// rank estimates every candidate from aggregated per-shape capacities and
// sorts them by the domain policy. Cost: one count per node per shape of
// the subtree, summed over disjoint domains.
func (p *planner) rank(g *gnode, cands []candidate) {
	caps := p.caps
	for i := range cands {
		c := &cands[i]
		for _, d := range g.demand {
			caps[d.shape] = 0
		}
		for _, n := range c.nodes {
			for _, d := range g.demand {
				caps[d.shape] += p.count(p.shapes[d.shape], n)
			}
		}
		c.est, c.left = 0, 0
		for _, d := range g.demand {
			e := min(d.n, caps[d.shape])
			c.est += e
			c.left += caps[d.shape] - e
		}
		c.plausible = p.plausible(g, caps)
	}
	slices.SortStableFunc(cands, p.compare)
}

func (p *planner) compare(a, b candidate) int {
	switch p.opts.DomainPolicy {
	case WorstFit:
		if c := cmp.Compare(b.est, a.est); c != 0 {
			return c
		}
		if c := cmp.Compare(b.left, a.left); c != 0 {
			return c
		}
	case FirstFit:
	default:
		if c := cmp.Compare(b.est, a.est); c != 0 {
			return c
		}
		if c := cmp.Compare(a.left, b.left); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.val, b.val)
}

// plausible is a necessary condition for g's quorum in a domain with the
// given capacities: each child is judged alone against the whole domain, so
// it over-approximates and only ever prunes domains that cannot work.
func (p *planner) plausible(g *gnode, caps []int64) bool {
	if g.leaf {
		var est int64
		for _, d := range g.demand {
			est += min(d.n, caps[d.shape])
		}
		return est >= int64(g.need)
	}
	if !g.gang {
		return true
	}
	ok := 0
	for _, c := range g.children {
		if ok >= g.need {
			break
		}
		if p.plausible(c, caps) {
			ok++
		}
	}
	return ok >= g.need
}

// closest is the candidate with the largest estimate, ties in rank order:
// where a failure is reported.
func closest(cands []candidate) *candidate {
	best := &cands[0]
	for i := range cands {
		if cands[i].est > best.est {
			best = &cands[i]
		}
	}
	return best
}
