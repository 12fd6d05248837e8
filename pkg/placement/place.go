package placement

import (
	"cmp"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// quorum picks g's domain inside nodes (its parent's domain) and places g's
// quorum there: the pods a leaf gang still needs, or the quorums of a
// composite's children. Surplus pods wait for surplus, so one gang's extra
// pods never crowd out a sibling's quorum. On failure nothing of g stays
// placed and g.fail says why.
func (p *planner) quorum(g *gnode, nodes []int32) bool {
	if len(g.prefs) > 0 {
		return p.preferredQuorum(g, nodes)
	}
	g.ok, g.dom, g.domNodes, g.fail = false, -1, nil, nil
	cands := p.candidates(g, nodes)
	if len(cands) > 1 {
		p.rank(g, cands)
	} else {
		cands[0].plausible = true
	}
	if g.leaf {
		for i := range cands {
			c := &cands[i]
			if !c.plausible {
				continue
			}
			mark := len(p.log)
			if p.placeLeaf(g, c.nodes, g.need) >= g.need {
				p.accept(g, c)
				return true
			}
			p.rollback(mark)
		}
		g.fail = p.leafFailure(g, closest(cands))
		g.fail.Domains = p.explainDomains(g, cands)
		return false
	}

	// A composite keeps the first domain where every child gets its quorum;
	// failing that, the one where most do, if that is enough.
	best, bestSat := -1, -1
	var bestCause *Infeasible
	for i := range cands {
		c := &cands[i]
		if !c.plausible {
			continue
		}
		mark := len(p.log)
		sat, cause := p.children(g, c)
		if sat == len(g.children) && sat >= g.need {
			p.accept(g, c)
			return true
		}
		if sat > bestSat {
			best, bestSat, bestCause = i, sat, cause
		}
		p.rollback(mark)
	}
	if best >= 0 && bestSat >= g.need {
		// Replaying from the same residuals reproduces the same placement.
		p.children(g, &cands[best])
		p.accept(g, &cands[best])
		return true
	}
	c := closest(cands)
	if best >= 0 {
		c = &cands[best]
	} else {
		mark := len(p.log)
		bestSat, bestCause = p.children(g, c)
		p.rollback(mark)
	}
	g.fail = p.compositeFailure(g, c, bestSat, bestCause)
	g.fail.Domains = p.explainDomains(g, cands)
	return false
}

// explainDomains words, for Options.ExplainDomains, how the closest
// candidates of a failed group fall short. Every attempt is rolled back, so
// the planner's state is what it was before.
func (p *planner) explainDomains(g *gnode, cands []candidate) []DomainFit {
	if p.opts.ExplainDomains <= 0 || g.key < 0 || g.pinned >= 0 || len(cands) < 2 {
		return nil
	}
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	// Closest first; ties keep the domain policy's order.
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(cands[b].est, cands[a].est) })
	order = order[:min(len(order), p.opts.ExplainDomains)]
	out := make([]DomainFit, 0, len(order))
	for _, i := range order {
		c := &cands[i]
		var e *Infeasible
		if g.leaf {
			e = p.leafFailure(g, c)
		} else {
			mark := len(p.log)
			sat, cause := p.children(g, c)
			p.rollback(mark)
			e = p.compositeFailure(g, c, sat, cause)
		}
		out = append(out, DomainFit{Domain: e.BestDomain, Fits: e.Fits, Need: e.Need, Short: e.Short, Reason: e.Reason})
	}
	return out
}

// children runs the quorum of every child of g inside c and counts the
// satisfied ones; cause is the first child that failed.
func (p *planner) children(g *gnode, c *candidate) (sat int, cause *Infeasible) {
	g.trial = c.val
	for _, ch := range g.children {
		if p.quorum(ch, c.nodes) {
			sat++
		} else if cause == nil {
			cause = ch.fail
		}
	}
	return sat, cause
}

func (p *planner) accept(g *gnode, c *candidate) {
	g.ok, g.dom, g.domNodes = true, c.val, c.nodes
}

// surplus places, within the domains quorum chose, every pending pod of the
// satisfied groups that still fits; a leaf with preferred levels then
// fills the domains around its chosen ones (preferred.go).
func (p *planner) surplus(g *gnode) {
	if g.leaf {
		p.placeLeaf(g, g.domNodes, math.MaxInt)
		for _, c := range g.wider {
			if !g.pendingLeft() {
				break
			}
			if p.placeLeaf(g, c.nodes, math.MaxInt) > 0 {
				p.outgrow(g, c)
			}
		}
		return
	}
	for _, c := range g.children {
		if c.ok {
			p.surplus(c)
		}
	}
}

// pendingLeft says whether leaf g has pending pods not placed yet.
func (g *gnode) pendingLeft() bool {
	for li, pods := range g.byShape {
		if g.cursor[li] < len(pods) {
			return true
		}
	}
	return false
}

// placeLeaf places up to want pending pods of leaf g on nodes and returns how
// many it placed. Shapes go in shapeOrder; within a shape, nodes are filled
// best-fit: the node with room for the fewest pods of the shape first, ties
// by name, so that large holes stay open for large pods and later gangs;
// nodes a pending pod prefers come before all others.
// A min-heap keeps this at O(len(nodes) + placed·log(len(nodes))) per shape.
func (p *planner) placeLeaf(g *gnode, nodes []int32, want int) int {
	placed := 0
	for _, li := range p.shapeOrder(g, nodes) {
		k := min(len(g.byShape[li])-g.cursor[li], want-placed)
		if k <= 0 {
			continue
		}
		s := p.shapes[g.gshape[li]]
		h := p.heap[:0]
		var pref map[int32]bool
		if g.preferred != nil {
			pref = g.preferred[li]
		}
		for _, n := range nodes {
			if c := p.count(s, n); c > 0 {
				e := uint64(min(c, maxHeapCount))<<32 | uint64(uint32(n))
				if pref != nil && !pref[n] {
					e |= notPreferred
				}
				h = append(h, e)
			}
		}
		for i := len(h)/2 - 1; i >= 0; i-- {
			siftDown(h, i)
		}
		for k > 0 && len(h) > 0 {
			top := h[0]
			last := len(h) - 1
			h[0] = h[last]
			h = h[:last]
			siftDown(h, 0)
			have := int64((top &^ notPreferred) >> 32)
			if s.shared {
				// A placement elsewhere in the node's domain may have used
				// up a limit since the count was taken; counts only fall.
				if now := p.count(s, int32(uint32(top))); now < have {
					if now > 0 {
						h = append(h, uint64(now)<<32|top&(0xffffffff|notPreferred))
						siftUp(h, len(h)-1)
					}
					continue
				}
			}
			m := int(min(int64(k), have))
			p.take(g, li, int32(uint32(top)), m)
			k -= m
			placed += m
		}
		p.heap = h[:0]
	}
	return placed
}

// Heap entries of placeLeaf: the node's count of the shape above its
// index, and the top bit set for a node no pending pod of the shape
// prefers, so that preferred nodes (Pod.Prefer: where a re-created rank
// ran) fill first and best-fit orders the rest. Counts are capped to keep
// clear of that bit; no placement takes that many pods at once.
const (
	notPreferred = uint64(1) << 63
	maxHeapCount = int64(1)<<31 - 1
)

// shapeOrder puts first the shape under the most pressure in nodes: the
// highest ratio of pending pods to the pods of that shape the nodes hold.
// Workers that fit only on GPU nodes go before a driver that fits anywhere,
// whatever their sizes. g.order breaks ties. Single-shape leaves skip this.
func (p *planner) shapeOrder(g *gnode, nodes []int32) []int {
	active := 0
	for li, pods := range g.byShape {
		if len(pods) > g.cursor[li] {
			active++
		}
	}
	if active < 2 {
		return g.order
	}
	pressure := make([]float64, len(g.byShape))
	for li, pods := range g.byShape {
		rem := len(pods) - g.cursor[li]
		if rem == 0 {
			continue
		}
		s := p.shapes[g.gshape[li]]
		var capacity int64
		for _, n := range nodes {
			capacity += p.count(s, n)
		}
		pressure[li] = math.Inf(1)
		if capacity > 0 {
			pressure[li] = float64(rem) / float64(capacity)
		}
	}
	order := slices.Clone(g.order)
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(pressure[b], pressure[a]) })
	return order
}

func siftUp(h []uint64, i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if h[parent] <= h[i] {
			return
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
}

func siftDown(h []uint64, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r] < h[l] {
			m = r
		}
		if h[i] <= h[m] {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// scope names the domain of the nearest constrained ancestor, as it stands
// while g is being planned.
func (p *planner) scope(g *gnode) string {
	for a := g.parent; a != nil; a = a.parent {
		if a.key >= 0 && a.trial >= 0 {
			return " in " + p.keys[a.key].names[a.trial]
		}
	}
	return ""
}

func (p *planner) describe(g *gnode, c *candidate) (e *Infeasible, pinned, noDomain bool) {
	e = &Infeasible{Group: g.g.Name}
	if g.key >= 0 {
		e.TopologyKey = p.keys[g.key].name
		if c.val >= 0 {
			e.BestDomain = p.keys[g.key].names[c.val]
		}
		noDomain = c.val < 0
		pinned = g.pinned >= 0
	}
	return e, pinned, noDomain
}

// leafFailure explains why leaf g misses its quorum in c: it replays the
// quorum there, sums what the missing pods request against what the nodes
// eligible for them have left, and rolls back.
func (p *planner) leafFailure(g *gnode, c *candidate) *Infeasible {
	mark := len(p.log)
	placed := p.placeLeaf(g, c.nodes, g.need)

	missing := g.need - placed
	demand := make([]int64, p.nres)
	var pods int64
	var shapes []*shapeInfo
	for _, li := range g.order {
		n := min(len(g.byShape[li])-g.cursor[li], missing)
		if n <= 0 {
			continue
		}
		missing -= n
		pods += int64(n)
		s := p.shapes[g.gshape[li]]
		shapes = append(shapes, s)
		for _, r := range s.reqs {
			demand[r.idx] += int64(n) * r.amt
		}
	}
	avail := make([]int64, p.nres)
	var slots int64
	eligible := 0
	for _, n := range c.nodes {
		ok := false
		for _, s := range shapes {
			ok = ok || s.eligible[n]
		}
		if !ok {
			continue
		}
		eligible++
		for r := range avail {
			avail[r] += max(0, p.free[int(n)*p.nres+r])
		}
		slots += max(0, p.slots[n])
	}
	var limits []string
	for _, s := range shapes {
		for _, r := range p.limiting(s, c.nodes) {
			if !slices.Contains(limits, r) {
				limits = append(limits, r)
			}
		}
	}
	var excluded []string
	for _, s := range shapes {
		if s.spec.Excluded != "" && !slices.Contains(excluded, s.spec.Excluded) {
			excluded = append(excluded, s.spec.Excluded)
		}
	}
	p.rollback(mark)

	e, pinned, noDomain := p.describe(g, c)
	e.Need = g.g.MinCount
	e.Fits = g.bound + placed
	e.Short = Resources{}
	for r, d := range demand {
		if d > avail[r] {
			e.Short[p.resNames[r]] = d - avail[r]
		}
	}
	if pods > slots {
		e.Short[corev1.ResourcePods] = pods - slots
	}
	e.Reason = leafReason(e, pinned, noDomain, p.scope(g), g.bound+g.pending, g.bound, eligible, limits, excluded)
	return e
}

func (p *planner) compositeFailure(g *gnode, c *candidate, sat int, cause *Infeasible) *Infeasible {
	e, pinned, noDomain := p.describe(g, c)
	e.Need = g.g.MinGroupCount
	e.Fits = sat
	e.Cause = cause
	if cause != nil {
		e.Short = cause.Short
	}
	e.Reason = compositeReason(e, pinned, noDomain, p.scope(g), len(g.children))
	return e
}
