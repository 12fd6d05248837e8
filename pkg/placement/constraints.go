package placement

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Member-to-member constraints. The scheduler's per-pod Filter sees the
// members a gang has already reserved, so a plan that puts two members with
// a shared host port, or with a one-per-node anti-affinity, on one node is
// rejected member by member and the gang never binds. The planner therefore
// counts, per domain, the pods of every constrained class it places, and a
// shape's count on a node stops where one of its limits is reached.
//
// A counter is one (class, domain key) pair. Placing a pod adds to every
// counter of every class its shape belongs to; rollback subtracts. A limit
// reads one counter. Counts of one domain are shared by all of its nodes,
// so a placement on one node can lower the count of another: placeLeaf
// re-reads counts for such shapes (shapeInfo.shared).

type counter struct {
	key   int     // into planner.keys; -1: every node is its own domain
	class int     // into planner.classes
	cnt   []int32 // per domain value id (per node when key is -1)
}

type limitInfo struct {
	ctr    int     // into planner.counters
	max    int32   // the limit where per has no entry
	per    []int32 // per domain value id; nil when PerDomain is empty
	self   bool    // the shape belongs to the class it limits
	reason string
}

// constraintKey extends a shape's identity with its constraints, so that
// shapes differing only in them are never merged, and validates them.
func constraintKey(key *strings.Builder, s *Shape) error {
	if len(s.Classes) == 0 && len(s.Limits) == 0 && len(s.NodeLimit) == 0 && len(s.BlockedBy) == 0 {
		return nil
	}
	classes := slices.Clone(s.Classes)
	slices.Sort(classes)
	fmt.Fprintf(key, "c:%q;", classes)
	for _, l := range s.Limits {
		if l.Class == "" {
			return fmt.Errorf("limit on key %q has an empty class", l.Key)
		}
		if l.Max < 0 {
			return fmt.Errorf("limit on class %q: negative max %d", l.Class, l.Max)
		}
		fmt.Fprintf(key, "l:%q,%q,%d,%q;", l.Key, l.Class, l.Max, l.Reason)
		for _, d := range slices.Sorted(maps.Keys(l.PerDomain)) {
			fmt.Fprintf(key, "%q=%d,", d, l.PerDomain[d])
		}
		if l.Victims != nil {
			// A spread can count thousands of running pods; as with node
			// limits, only shapes holding the same map are merged.
			fmt.Fprintf(key, "v:%p,%t;", l.Victims, l.FixedFloor)
		}
	}
	if s.BlockedBy != nil {
		fmt.Fprintf(key, "b:%p;", s.BlockedBy)
	}
	if s.NodeLimit != nil {
		// Node limits can list thousands of nodes; shapes holding the same
		// map share it, and equal maps built apart only cost sharing.
		fmt.Fprintf(key, "n:%p;", s.NodeLimit)
	}
	fmt.Fprintf(key, "x:%q;", s.Excluded)
	return nil
}

// initConstraints builds the counters and every shape's limits and node
// caps. It runs after initKeys, since limits on label keys need the
// nodes' domain ids.
func (p *planner) initConstraints() {
	classIdx := map[string]int{}
	classOf := func(name string) int {
		i, ok := classIdx[name]
		if !ok {
			i = len(classIdx)
			classIdx[name] = i
		}
		return i
	}
	type ckey struct{ key, class int }
	ctrIdx := map[ckey]int{}
	var counters []*counter
	byClass := map[int][]int{} // class -> counters
	for _, s := range p.shapes {
		for _, l := range s.spec.Limits {
			key := -1
			if l.Key != "" {
				key = p.keyIndex(l.Key)
			}
			class := classOf(l.Class)
			ck := ckey{key, class}
			ci, ok := ctrIdx[ck]
			if !ok {
				ci = len(counters)
				ctrIdx[ck] = ci
				n := len(p.nodes)
				if key >= 0 {
					n = len(p.keys[key].names)
				}
				counters = append(counters, &counter{key: key, class: class, cnt: make([]int32, n)})
				byClass[class] = append(byClass[class], ci)
			}
			li := limitInfo{ctr: ci, max: clampInt32(l.Max), self: slices.Contains(s.spec.Classes, l.Class), reason: l.Reason}
			if len(l.PerDomain) > 0 {
				size := len(counters[ci].cnt)
				li.per = make([]int32, size)
				for d := range li.per {
					li.per[d] = li.max
				}
				for v, m := range l.PerDomain {
					if d := p.domainID(key, v); d >= 0 {
						li.per[d] = clampLimit(m)
					}
				}
			}
			if key >= 0 {
				s.shared = true
			}
			s.limits = append(s.limits, li)
		}
	}
	for _, s := range p.shapes {
		for _, c := range s.spec.Classes {
			if ci, ok := classIdx[c]; ok {
				s.members = append(s.members, byClass[ci]...)
			}
		}
		for name, cap := range s.spec.NodeLimit {
			i, ok := p.nodeIndex(name)
			if !ok || cap <= 0 {
				continue // 0 already made the node ineligible
			}
			if s.nodeCap == nil {
				s.nodeCap = make([]int32, len(p.nodes))
				for j := range s.nodeCap {
					s.nodeCap[j] = -1
				}
			}
			s.nodeCap[i] = clampInt32(cap)
		}
	}
	p.counters = counters
}

// keyIndex registers a topology key that only constraints use.
func (p *planner) keyIndex(name string) int {
	for i, k := range p.keys {
		if k.name == name {
			return i
		}
	}
	k := &topoKey{name: name}
	d := p.domainsOf(name)
	k.vals, k.names = d.vals, d.names
	k.slot = make([]int32, len(k.names))
	for i := range k.slot {
		k.slot[i] = -1
	}
	p.keys = append(p.keys, k)
	return len(p.keys) - 1
}

func (p *planner) domainID(key int, value string) int32 {
	if key < 0 {
		if i, ok := p.nodeIndex(value); ok {
			return i
		}
		return -1
	}
	names := p.keys[key].names
	if i, ok := slices.BinarySearch(names, value); ok {
		return int32(i)
	}
	return -1
}

// domainOf is node n's domain for counter c, -1 when n has no such label.
func (p *planner) domainOf(c *counter, n int32) int32 {
	if c.key < 0 {
		return n
	}
	return p.keys[c.key].vals[n]
}

// constrain lowers c, the pods of s that node n holds by resources, to what
// the shape's node cap and member limits allow.
func (p *planner) constrain(s *shapeInfo, n int32, c int64) int64 {
	if s.nodeCap != nil {
		if left := s.nodeCap[n]; left >= 0 && int64(left) < c {
			c = int64(left)
		}
	}
	for i := range s.limits {
		l := &s.limits[i]
		room, applies := p.room(l, n)
		if !applies {
			continue
		}
		if room <= 0 {
			return 0
		}
		if l.self && room < c {
			c = room
		}
	}
	return c
}

// room is how many more pods of l's class l lets into node n's domain;
// applies is false when n has no such domain (no label), where the
// constraint does not reach.
func (p *planner) room(l *limitInfo, n int32) (room int64, applies bool) {
	ctr := p.counters[l.ctr]
	d := p.domainOf(ctr, n)
	if d < 0 {
		return 0, false
	}
	lim := l.max
	if l.per != nil {
		lim = l.per[d]
	}
	return int64(lim) - int64(ctr.cnt[d]), true
}

// tally records m pods of s placed on node n (negative m: removed).
func (p *planner) tally(s *shapeInfo, n int32, m int32) {
	if s.nodeCap != nil && s.nodeCap[n] >= 0 {
		s.nodeCap[n] -= m
	}
	for _, ci := range s.members {
		c := p.counters[ci]
		if d := p.domainOf(c, n); d >= 0 {
			c.cnt[d] += m
		}
	}
}

// limiting names the member limits that keep s off nodes of nodes where
// its resources would still fit, for failure messages.
func (p *planner) limiting(s *shapeInfo, nodes []int32) []string {
	var out []string
	for _, n := range nodes {
		if p.roomFor(s, n) == 0 {
			continue
		}
		for i := range s.limits {
			l := &s.limits[i]
			if room, applies := p.room(l, n); applies && room <= 0 && l.reason != "" && !slices.Contains(out, l.reason) {
				out = append(out, l.reason)
			}
		}
		if len(out) == len(s.limits) {
			break
		}
	}
	return out
}

func clampInt32(v int) int32 {
	return int32(max(min(v, maxCount), -1))
}

// clampLimit keeps a domain's limit in 32 bits. Unlike counts it may stay
// negative: evictions credited to the domain (DomainLimit.Victims) must
// first make up for the pods it is past the limit.
func clampLimit(v int) int32 {
	return int32(max(min(v, maxCount), -maxCount))
}
