package placement

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
)

// vunit is a candidate eviction unit.
type vunit struct {
	id    string // Unit, or the pod key for a pod alone
	solo  bool
	pods  []int // indices into preemptor.victims
	frees []nodeFree
	cost  setCost // of evicting this unit alone
	rank  int32   // index in preemptor.units
}

// nodeFree is what a unit frees on one node: tracked resources (indexed
// like planner.resNames) and pod slots.
type nodeFree struct {
	node int32
	pods int64
	res  []int64
}

// setCost is the cost of a set of units, compared by compareCost.
type setCost struct {
	maxPrio int32
	kept    int // pods that are not Surplus
	pods    int
	units   int
	pdb     int
	created []int64  // ascending
	keys    []string // ascending
}

func compareCost(a, b *setCost) int {
	if c := cmp.Compare(a.maxPrio, b.maxPrio); c != 0 {
		return c
	}
	if c := cmp.Compare(a.kept, b.kept); c != 0 {
		return c
	}
	if c := cmp.Compare(a.pods, b.pods); c != 0 {
		return c
	}
	if c := cmp.Compare(a.units, b.units); c != 0 {
		return c
	}
	if c := cmp.Compare(a.pdb, b.pdb); c != 0 {
		return c
	}
	// A younger (larger) creation time at the first difference is cheaper.
	if c := slices.Compare(a.created, b.created); c != 0 {
		return -c
	}
	return slices.Compare(a.keys, b.keys)
}

// credit is a domain of a spread limit that counts a victim.
type credit struct {
	track *spreadTrack
	dom   int32
	// usable: the limit's shape could go to a node of the domain, so
	// evicting the victim can help the plan.
	usable bool
}

// spreadTrack follows the pods a spread limit counts per domain as
// victims are evicted and restored, and keeps the limit's per-domain room
// relative to the least loaded domain, as the PodTopologySpread filter
// judges it.
type spreadTrack struct {
	shape *shapeInfo
	lim   *limitInfo
	fixed bool
	left  []int32 // per domain id: counted pods not evicted; -1 outside the comparison
	// hist counts the compared domains per number of pods left, so the
	// least of them follows single evictions in O(1).
	hist  map[int32]int32
	floor int32
}

// evict moves one counted pod of domain d out (sign 1) or back (sign -1).
func (t *spreadTrack) evict(d int32, sign int32) {
	per := t.lim.per
	per[d] += sign
	if t.left[d] < 0 {
		return
	}
	was := t.left[d]
	now := was - sign
	t.left[d] = now
	t.hist[was]--
	t.hist[now]++
	if t.fixed {
		return
	}
	shift := int32(0)
	switch {
	case sign > 0 && now < t.floor:
		shift = now - t.floor
	case sign < 0 && was == t.floor && t.hist[was] == 0:
		shift = 1
	}
	if shift == 0 {
		return
	}
	t.floor += shift
	for i := range per {
		per[i] += shift
	}
}

// blockedNode is a node a shape may use once left more of its blockers
// are evicted.
type blockedNode struct {
	shape *shapeInfo
	node  int32
	left  int
}

// buildUnits validates the victims, groups them into eviction units and
// returns the candidates: units of pods all below prio that run where the
// tree could go. Units and the lists of their costs are carved from shared
// backing arrays, as a cluster of balloons has thousands of them.
func (s *preemptor) buildUnits(prio int32) ([]*vunit, error) {
	victims := s.victims
	keys := make(map[string]bool, len(victims))
	byUnit := map[string][]int{}
	var order []string // unit ids in first-seen order, for determinism
	alone := 0
	for i := range victims {
		v := &victims[i]
		if v.Key == "" {
			return nil, fmt.Errorf("placement: victims[%d]: empty pod key", i)
		}
		if keys[v.Key] {
			return nil, fmt.Errorf("placement: victim %q appears twice", v.Key)
		}
		keys[v.Key] = true
		for name, q := range v.Requests {
			if q < 0 {
				return nil, fmt.Errorf("placement: victim %q: negative request %s=%d", v.Key, name, q)
			}
		}
		if v.Unit == "" {
			alone++
			continue
		}
		if _, ok := byUnit[v.Unit]; !ok {
			order = append(order, v.Unit)
		}
		byUnit[v.Unit] = append(byUnit[v.Unit], i)
	}

	store := make([]vunit, 0, len(order)+alone)
	self := make([]int, len(victims))
	created := make([]int64, 0, len(victims))
	names := make([]string, 0, len(victims))
	// Requests of every candidate on a node must sum within int64, so that
	// any subset of them can be freed and restored exactly.
	total := make([]int64, len(s.p.nodes)*s.p.nres)
	var units []*vunit
	add := func(id string, solo bool, pods []int) error {
		for _, i := range pods {
			if victims[i].Priority >= prio {
				return nil
			}
		}
		store = append(store, vunit{id: id, solo: solo, pods: pods})
		u := &store[len(store)-1]
		if err := s.frees(u, total); err != nil {
			return err
		}
		if !s.useful(u) {
			store = store[:len(store)-1]
			return nil
		}
		c := setCost{maxPrio: math.MinInt32, units: 1, pods: len(pods)}
		from := len(created)
		for _, i := range pods {
			v := &victims[i]
			c.maxPrio = max(c.maxPrio, v.Priority)
			if v.ViolatesPDB {
				c.pdb++
			}
			if !v.Surplus {
				c.kept++
			}
			created = append(created, v.Created)
			names = append(names, v.Key)
		}
		c.created = created[from:len(created):len(created)]
		c.keys = names[from:len(names):len(names)]
		slices.Sort(c.created)
		slices.Sort(c.keys)
		u.cost = c
		units = append(units, u)
		return nil
	}
	for _, id := range order {
		if err := add(id, false, byUnit[id]); err != nil {
			return nil, err
		}
	}
	for i := range victims {
		if victims[i].Unit == "" {
			self[i] = i
			if err := add(victims[i].Key, true, self[i:i+1:i+1]); err != nil {
				return nil, err
			}
		}
	}
	return units, nil
}

// frees aggregates, per node of the snapshot, what evicting u frees, and
// adds it to total, failing when a node's total would overflow.
func (s *preemptor) frees(u *vunit, total []int64) error {
	p := s.p
	type podOn struct {
		node   int32
		victim int
	}
	on := make([]podOn, 0, len(u.pods))
	for _, i := range u.pods {
		// A node whose totals are broken stays without room whatever is
		// evicted from it, so victims there free nothing.
		if n, ok := p.nodeIndex(s.victims[i].Node); ok && p.table.usable(int(n)) {
			on = append(on, podOn{node: n, victim: i})
		}
	}
	slices.SortFunc(on, func(a, b podOn) int { return cmp.Compare(a.node, b.node) })
	distinct := 0
	for k := range on {
		if k == 0 || on[k].node != on[k-1].node {
			distinct++
		}
	}
	u.frees = make([]nodeFree, 0, distinct)
	slab := make([]int64, distinct*p.nres)
	for k, o := range on {
		if k == 0 || o.node != on[k-1].node {
			off := len(u.frees) * p.nres
			u.frees = append(u.frees, nodeFree{node: o.node, res: slab[off : off+p.nres : off+p.nres]})
		}
		f := &u.frees[len(u.frees)-1]
		f.pods++
		v := &s.victims[o.victim]
		for r, name := range p.resNames {
			q := v.Requests[name]
			t := &total[int(o.node)*p.nres+r]
			if *t > math.MaxInt64-q {
				return fmt.Errorf("placement: victims on node %q request more %s than an int64 holds", v.Node, name)
			}
			*t += q
			f.res[r] += q
		}
	}
	return nil
}

// indexBlockers maps every victim to the blocked nodes it holds up. A node
// with a blocker that is not a victim can never clear and stays ineligible.
// byKey maps victim keys to their index.
func (s *preemptor) indexBlockers(byKey map[string]int) {
	s.blocks = make([][]int, len(s.victims))
	for _, sh := range s.p.shapes {
		for _, name := range slices.Sorted(maps.Keys(sh.spec.BlockedBy)) {
			n, ok := s.p.nodeIndex(name)
			if !ok {
				continue
			}
			if c, limited := sh.spec.NodeLimit[name]; limited && c <= 0 {
				continue
			}
			var idx []int
			for _, k := range sh.spec.BlockedBy[name] {
				i, ok := byKey[k]
				if !ok {
					idx = nil
					break
				}
				idx = append(idx, i)
			}
			if len(idx) == 0 {
				continue
			}
			b := len(s.blocked)
			s.blocked = append(s.blocked, blockedNode{shape: sh, node: n, left: len(idx)})
			for _, i := range idx {
				s.blocks[i] = append(s.blocks[i], b)
			}
		}
	}
}

// indexCredits maps every victim to the spread limits that count it.
// Every counted victim is tracked, since evicting it may lower the least
// loaded domain, but only one counted where the shape could go (a node
// eligible, or blocked by pods eviction can clear) makes its unit useful:
// room elsewhere places nothing.
func (s *preemptor) indexCredits(byKey map[string]int) {
	p := s.p
	for _, sh := range p.shapes {
		for j := range sh.spec.Limits {
			spec := &sh.spec.Limits[j]
			if len(spec.Victims) == 0 {
				continue
			}
			li := &sh.limits[j]
			ctr := p.counters[li.ctr]
			t := &spreadTrack{shape: sh, lim: li, fixed: spec.FixedFloor, left: make([]int32, len(ctr.cnt)), hist: map[int32]int32{}}
			for d := range t.left {
				t.left[d] = -1
			}
			if li.per == nil {
				li.per = make([]int32, len(ctr.cnt))
				for d := range li.per {
					li.per[d] = li.max
				}
			}
			first := true
			for v, room := range spec.PerDomain {
				d := p.domainID(ctr.key, v)
				if d < 0 {
					continue
				}
				n := max(0, clampLimit(spec.Max-room))
				t.left[d] = n
				t.hist[n]++
				if first || n < t.floor {
					t.floor, first = n, false
				}
			}
			usable := make([]bool, len(ctr.cnt))
			for n := range p.nodes {
				if d := p.domainOf(ctr, int32(n)); d >= 0 && (sh.eligible[n] || sh.tolerable(int32(n))) {
					usable[d] = true
				}
			}
			for k, value := range spec.Victims {
				i, ok := byKey[k]
				if !ok {
					continue
				}
				d := p.domainID(ctr.key, value)
				if d < 0 {
					continue
				}
				if s.credits == nil {
					s.credits = make([][]credit, len(s.victims))
				}
				s.credits[i] = append(s.credits[i], credit{track: t, dom: d, usable: usable[d]})
			}
		}
	}
}

// unblock counts u's pods in (sign 1) or out of (sign -1) the evicted set
// for the nodes they block, making a node eligible for its shape exactly
// while all of its blockers are evicted.
func (s *preemptor) unblock(u *vunit, sign int) {
	for _, i := range u.pods {
		for _, b := range s.blocks[i] {
			bn := &s.blocked[b]
			bn.left -= sign
			switch {
			case sign > 0 && bn.left == 0:
				bn.shape.eligible[bn.node] = bn.shape.tolerable(bn.node)
				if bn.shape.eligible[bn.node] {
					bn.shape.eligibleCount++
				}
			case sign < 0 && bn.left == 1:
				if bn.shape.eligible[bn.node] {
					bn.shape.eligibleCount--
				}
				bn.shape.eligible[bn.node] = false
			}
		}
	}
}

// useful says whether u runs on a node where a pending pod of the tree
// could go, or holds up such a node. Residuals of other nodes never enter
// a plan.
func (s *preemptor) useful(u *vunit) bool {
	for _, i := range u.pods {
		for _, b := range s.blocks[i] {
			for _, d := range s.demand {
				if s.p.shapes[d.shape] == s.blocked[b].shape {
					return true
				}
			}
		}
		if s.credits != nil {
			for _, c := range s.credits[i] {
				if !c.usable {
					continue
				}
				for _, d := range s.demand {
					if s.p.shapes[d.shape] == c.track.shape {
						return true
					}
				}
			}
		}
	}
	for _, f := range u.frees {
		for _, d := range s.demand {
			if s.p.shapes[d.shape].eligible[f.node] {
				return true
			}
		}
	}
	return false
}

func (s *preemptor) costOf(units []*vunit) setCost {
	c := setCost{maxPrio: math.MinInt32, units: len(units)}
	for _, u := range units {
		for _, i := range u.pods {
			v := &s.victims[i]
			c.maxPrio = max(c.maxPrio, v.Priority)
			c.pods++
			if v.ViolatesPDB {
				c.pdb++
			}
			if !v.Surplus {
				c.kept++
			}
			c.created = append(c.created, v.Created)
			c.keys = append(c.keys, v.Key)
		}
	}
	slices.Sort(c.created)
	slices.Sort(c.keys)
	return c
}
