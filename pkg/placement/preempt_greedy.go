package placement

import "slices"

// domainSearch is the heuristic's state for one candidate domain.
type domainSearch struct {
	nodes []int32
	pool  []*vunit // units of the threshold pool on the domain's nodes, in cost order
	set   []*vunit
	cost  setCost
	plan  *Plan // set when set is verified
}

// searchGreedy is the heuristic search; see FindVictims.
func (s *preemptor) searchGreedy() *choice {
	units := s.units
	if len(units) == 0 {
		return nil
	}
	if _, ok := s.trial(units); !ok {
		return nil
	}
	// Units are in cost order, so the pool of a threshold is a prefix.
	var ends []int
	for i := 1; i <= len(units); i++ {
		if i == len(units) || units[i].cost.maxPrio != units[i-1].cost.maxPrio {
			ends = append(ends, i)
		}
	}
	lo, hi := 0, len(ends)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if _, ok := s.trial(units[:ends[mid]]); ok {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	pool := units[:ends[hi]]

	var doms []*domainSearch
	inD := make([]bool, len(s.p.nodes))
	for _, c := range s.p.candidates(s.p.root, s.p.all) {
		if d := s.greedy(c.nodes, pool, inD); d != nil {
			doms = append(doms, d)
		}
	}
	for len(doms) > 0 {
		best := 0
		for i, d := range doms {
			if compareCost(&d.cost, &doms[best].cost) < 0 {
				best = i
			}
		}
		d := doms[best]
		if d.plan == nil {
			d.plan, _ = s.trial(d.set)
		}
		if d.plan != nil {
			return &choice{units: d.set, plan: d.plan}
		}
		if s.extend(d) {
			d.cost = s.costOf(d.set)
		} else {
			doms = slices.Delete(doms, best, best+1)
		}
	}
	// The domain a plan with the whole pool takes keeps its residuals with
	// just its own units evicted, so some domain verifies; this fallback
	// only guards that reasoning: the pool itself was verified above.
	plan, _ := s.trial(pool)
	return &choice{units: pool, plan: plan}
}

// estimate is the pods the domain holds, per shape the smaller of the
// pending pods and the capacity.
func (s *preemptor) estimate(caps []int64) int64 {
	var est int64
	for i, d := range s.demand {
		est += min(d.n, caps[i])
	}
	return est
}

// capacity is, per demand shape, how many pods the nodes hold now.
func (s *preemptor) capacity(nodes []int32) []int64 {
	caps := make([]int64, len(s.demand))
	for _, n := range nodes {
		for i, d := range s.demand {
			caps[i] += s.p.count(s.p.shapes[d.shape], n)
		}
	}
	return caps
}

// sample adds to out, per demand shape, how many pods u's nodes in the
// domain hold now, and returns their fractional room.
func (s *preemptor) sample(u *vunit, inD []bool, out []int64) float64 {
	var frac float64
	for _, f := range u.frees {
		if !inD[f.node] {
			continue
		}
		for i, d := range s.demand {
			sh := s.p.shapes[d.shape]
			out[i] += s.p.count(sh, f.node)
			frac += s.fraction(sh, f.node)
		}
	}
	return frac
}

// fraction is how many pods of sh node n holds without rounding down, so
// that freeing half of what a pod needs counts for something.
func (s *preemptor) fraction(sh *shapeInfo, n int32) float64 {
	p := s.p
	if !sh.eligible[n] || p.slots[n] <= 0 {
		return 0
	}
	f := float64(p.slots[n])
	row := p.free[int(n)*p.nres:]
	for _, r := range sh.reqs {
		f = min(f, float64(row[r.idx])/float64(r.amt))
	}
	return max(0, f)
}

// gain is the benefit of evicting a unit, per pod it disrupts, and for
// ties the capped benefit itself: one unit instead of several. A unit of
// Surplus pods only that helps at all goes before any other, as the cost
// order puts pods that are not Surplus right after priority.
type gain struct {
	spare                  bool
	capped, uncapped, frac float64
	total                  int64
	rank                   int32
	ver                    int32 // the unit's version when computed
	epoch                  int32 // takes so far when computed
}

func better(a, b *gain) bool {
	if a.spare != b.spare {
		return a.spare
	}
	if a.capped != b.capped {
		return a.capped > b.capped
	}
	if a.total != b.total {
		return a.total > b.total
	}
	if a.uncapped != b.uncapped {
		return a.uncapped > b.uncapped
	}
	if a.frac != b.frac {
		return a.frac > b.frac
	}
	return a.rank < b.rank
}

// delta evicts (sign 1) or restores (sign -1) u and returns the change of
// every demand shape's capacity in the domain and of the fractional room.
func (s *preemptor) delta(u *vunit, inD []bool, sign int64, d []int64) float64 {
	clear(d)
	before := s.before
	clear(before)
	fb := s.sample(u, inD, before)
	s.apply(u, sign)
	fa := s.sample(u, inD, d)
	for i := range d {
		d[i] -= before[i]
	}
	return fa - fb
}

func (s *preemptor) gainOf(rank int32, inD []bool, caps, d []int64) gain {
	u := s.units[rank]
	frac := s.delta(u, inD, 1, d)
	s.apply(u, -1)
	var capped, uncapped int64
	for i, dem := range s.demand {
		capped += min(dem.n, caps[i]+d[i]) - min(dem.n, caps[i])
		uncapped += d[i]
	}
	pods := float64(len(u.pods))
	return gain{spare: u.cost.kept == 0 && capped > 0, capped: float64(capped) / pods, total: capped, uncapped: float64(uncapped) / pods, frac: frac / pods, rank: rank}
}

// greedy picks and reprieves units of pool for one domain; it returns nil
// when even the whole pool leaves the estimate below the quorum. The
// residuals are restored before it returns.
func (s *preemptor) greedy(nodes []int32, pool []*vunit, inD []bool) *domainSearch {
	d := &domainSearch{nodes: nodes}
	pos := s.pos
	for _, n := range nodes {
		inD[n] = true
	}
	defer func() {
		for _, n := range nodes {
			inD[n] = false
		}
		for _, u := range d.pool {
			pos[u.rank] = -1
		}
	}()
	for _, u := range pool {
		for _, f := range u.frees {
			if inD[f.node] {
				pos[u.rank] = int32(len(d.pool))
				d.pool = append(d.pool, u)
				break
			}
		}
	}
	if len(d.pool) == 0 {
		return nil
	}
	s.applyAll(d.pool, 1)
	full := s.estimate(s.capacity(nodes))
	s.applyAll(d.pool, -1)
	if full < s.target {
		return nil
	}

	caps := s.capacity(nodes)
	scratch := make([]int64, len(s.demand))
	ver := make([]int32, len(d.pool))
	taken := make([]bool, len(d.pool))
	h := &gainHeap{}
	for _, u := range d.pool {
		h.push(s.gainOf(u.rank, inD, caps, scratch))
	}
	var epoch int32
	var set []*vunit
	for s.estimate(caps) < s.target && h.len() > 0 {
		g := h.pop()
		i := pos[g.rank]
		if taken[i] || g.ver != ver[i] {
			continue
		}
		if g.epoch != epoch {
			fresh := s.gainOf(g.rank, inD, caps, scratch)
			fresh.ver, fresh.epoch = ver[i], epoch
			if h.len() > 0 && better(h.top(), &fresh) {
				h.push(fresh)
				continue
			}
		}
		u := d.pool[i]
		s.delta(u, inD, 1, scratch)
		for k := range caps {
			caps[k] += scratch[k]
		}
		taken[i] = true
		set = append(set, u)
		epoch++
		// Neighbours may gain more than their stale entries say: freeing
		// two halves of a node's room is worth more than either.
		for _, f := range u.frees {
			if !inD[f.node] {
				continue
			}
			for _, r := range s.onNode[f.node] {
				j := pos[r]
				if j < 0 || taken[j] {
					continue
				}
				ver[j]++
				ng := s.gainOf(r, inD, caps, scratch)
				ng.ver, ng.epoch = ver[j], epoch
				h.push(ng)
			}
		}
	}

	// Reprieve in reverse cost order.
	slices.SortFunc(set, func(a, b *vunit) int { return compareCost(&b.cost, &a.cost) })
	kept := set[:0]
	for _, u := range set {
		s.delta(u, inD, -1, scratch)
		for k := range caps {
			caps[k] += scratch[k]
		}
		if s.estimate(caps) >= s.target {
			continue
		}
		s.delta(u, inD, 1, scratch)
		for k := range caps {
			caps[k] += scratch[k]
		}
		kept = append(kept, u)
	}
	s.applyAll(kept, -1)
	slices.SortFunc(kept, func(a, b *vunit) int { return compareCost(&a.cost, &b.cost) })
	d.set = kept
	d.cost = s.costOf(kept)
	return d
}

// extend adds the domain pool's remaining units to a set PlanGroup
// rejected, in cost order and doubling batches, until it is accepted, then
// bisects the last batch for the shortest accepted prefix. It reports
// false when even the whole pool is rejected.
func (s *preemptor) extend(d *domainSearch) bool {
	in := map[*vunit]bool{}
	for _, u := range d.set {
		in[u] = true
	}
	var rest []*vunit
	for _, u := range d.pool {
		if !in[u] {
			rest = append(rest, u)
		}
	}
	base := d.set
	s.applyAll(base, 1)
	defer s.applyAll(base, -1)
	done := 0
	for step := 1; done < len(rest); step *= 2 {
		next := min(len(rest), done+step)
		plan, ok := s.trial(rest[:next])
		if !ok {
			done = next
			continue
		}
		lo, hi := done+1, next
		for lo < hi {
			mid := (lo + hi) / 2
			if p, ok := s.trial(rest[:mid]); ok {
				hi, plan = mid, p
			} else {
				lo = mid + 1
			}
		}
		d.set = append(slices.Clip(base), rest[:hi]...)
		d.plan = plan
		return true
	}
	return false
}

// gainHeap is a max-heap of gains under better.
type gainHeap struct{ h []gain }

func (g *gainHeap) len() int   { return len(g.h) }
func (g *gainHeap) top() *gain { return &g.h[0] }

func (g *gainHeap) push(x gain) {
	g.h = append(g.h, x)
	i := len(g.h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !better(&g.h[i], &g.h[parent]) {
			break
		}
		g.h[i], g.h[parent] = g.h[parent], g.h[i]
		i = parent
	}
}

func (g *gainHeap) pop() gain {
	top := g.h[0]
	last := len(g.h) - 1
	g.h[0] = g.h[last]
	g.h = g.h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(g.h) {
			break
		}
		m := l
		if r := l + 1; r < len(g.h) && better(&g.h[r], &g.h[l]) {
			m = r
		}
		if !better(&g.h[m], &g.h[i]) {
			break
		}
		g.h[i], g.h[m] = g.h[m], g.h[i]
		i = m
	}
	return top
}
