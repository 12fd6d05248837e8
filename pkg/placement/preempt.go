package placement

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// DefaultMaxUnits is the exhaustive-search bound FindVictims uses when
// PreemptOptions.MaxUnits is 0.
const DefaultMaxUnits = 12

// exhaustiveWork bounds the exhaustive search: 2^units × nodes, the node
// visits of planning every subset once, must not exceed it. At 7,500 nodes
// this allows 11 units; on small clusters MaxUnits is the only bound.
const exhaustiveWork = 1 << 24

// Victim is a running pod that may be evicted.
type Victim struct {
	Key  string // unique pod id, e.g. namespace/name
	Node string // node it runs on; a node missing from the snapshot frees nothing there
	// Requests is what evicting the pod frees on Node (cpu in millicores,
	// memory in bytes, ...). It also frees one pod slot.
	Requests Resources
	Priority int32
	// Unit is the eviction unit: pods with the same non-empty Unit are
	// evicted all together or not at all, e.g. the pods of a group with
	// disruptionMode all. "" makes the pod a unit of its own. A unit may
	// span nodes and topology domains.
	Unit string
	// Created is the creation time in unix nanoseconds; younger is larger.
	Created int64
	// ViolatesPDB says that evicting the pod would violate a PodDisruptionBudget.
	ViolatesPDB bool
}

// PreemptOptions tune FindVictims.
type PreemptOptions struct {
	Options
	// MaxUnits is the exhaustive-search bound: with at most this many
	// candidate units (and 2^units × nodes ≤ 2^24) every subset of them is
	// considered, so the result is minimal. 0 means DefaultMaxUnits; a
	// negative value always uses the heuristic search.
	MaxUnits int
}

// Preemption is the outcome of FindVictims.
type Preemption struct {
	// Victims are the keys of the pods to evict, sorted.
	Victims []string
	// Units are the non-empty Unit ids of the chosen victims, sorted. A pod
	// with an empty Unit is a unit of its own and appears only in Victims.
	Units []string
	// Plan is what PlanGroup returns for the preemptor group once the
	// victims are gone. The caller nominates the pods to its assignments.
	Plan *Plan
	// MaxVictimPriority is the highest priority among the victims, or
	// math.MinInt32 when there are none (the group fits as it is).
	MaxVictimPriority int32
	// Exhaustive reports that the set is provably the cheapest one under
	// which PlanGroup places the group: it is empty, or the exhaustive
	// search found it.
	Exhaustive bool
}

// FindVictims chooses the pods to evict so that the whole group tree rooted
// at root, its minCount or minGroupCount inside one domain per topology
// constraint, can be placed. Feasibility means exactly that PlanGroup
// succeeds on nodes with the victims' requests subtracted from Requested
// (clamped at zero) and their number from PodCount (clamped at zero); the
// nodes' Requested must already include every victim's requests.
//
// # Candidates
//
// Only pods of priority strictly lower than preemptorPriority may be
// evicted, and a unit only if every pod of it is: one pod of priority
// preemptorPriority or higher makes its whole unit untouchable. A candidate
// unit must also run on a node of the snapshot where some pending pod of
// the tree could go (taints, selector and affinity allowing), hold up such
// a node (Shape.BlockedBy), or be counted by a member limit in a domain
// where such a pod could go (DomainLimit.Victims, which the eviction opens
// by one): evicting any other unit cannot change the plan, only its cost.
//
// # Cost
//
// Among the feasible sets of candidate units, FindVictims returns the
// cheapest in this lexicographic order:
//
//  1. the lowest highest victim priority;
//  2. then the fewest pods disrupted, every pod of a unit counted;
//  3. then the fewest units, a pod with an empty Unit being one;
//  4. then the fewest pods whose eviction violates a PodDisruptionBudget;
//  5. then the youngest victims: the victims' Created times sorted
//     ascending are compared element by element and the set with the
//     larger (younger) value at the first difference wins, so the set
//     whose oldest victim is youngest is preferred, then by the second
//     oldest, and so on (the sets have equal sizes by then);
//  6. then the smaller list of victim keys, sorted and compared
//     lexicographically. Units never share pods, so this order is total and
//     the result deterministic.
//
// When the group fits without evicting anything, the result has no victims
// and MaxVictimPriority is math.MinInt32. When no set of candidates makes
// the group fit, FindVictims returns nil and an *Infeasible that describes
// the plan with every candidate evicted: nothing is evicted for a partial
// benefit. Invalid input (what PlanGroup rejects, a victim with an empty or
// duplicate key or a negative request, requests on one node summing past
// int64) gives a plain error.
//
// # Search
//
// With at most MaxUnits candidate units (DefaultMaxUnits, 12, when 0) and
// 2^units × nodes ≤ 2^24, the search is exhaustive: every subset is
// ordered by cost, and subsets are planned from the cheapest until one is
// feasible. The result is then minimal among all sets of candidates and
// Preemption.Exhaustive is true.
//
// Beyond that bound the search is a heuristic:
//
//  1. Threshold. Candidate units are ordered by their own cost (the order
//     above applied to one unit). Let t be a candidate priority; the pool
//     of t is every unit of priority ≤ t. If the pool of the highest
//     priority is infeasible, so is the group. Otherwise a binary search
//     finds the lowest t whose pool is feasible.
//  2. Domains. Every candidate domain of the root's topology key (the
//     pinned one when members are bound; the whole cluster when the root is
//     unconstrained) is searched with the units of the pool that run on one
//     of its nodes. An estimate of the pods the domain holds, per shape the
//     smaller of the pending pods and the sum over nodes of how many fit,
//     guides the search. A domain whose estimate with the whole pool
//     evicted stays below the root's quorum is skipped.
//  3. Greedy. Units are taken by benefit per pod disrupted: the increase of
//     the estimate capped at the pending pods (at equal ratios, the larger
//     increase, which takes fewer units), then uncapped, then of the
//     fractional room, ties by unit cost, until the estimate reaches the
//     quorum. Gains are re-evaluated lazily and, for units sharing a node
//     with a taken one, eagerly.
//  4. Reprieve. The taken units are visited in reverse cost order, and each
//     is put back when the estimate stays at the quorum without it.
//  5. Verification. Domains are planned in order of the cost of their sets.
//     A set that PlanGroup rejects is extended with the pool's remaining
//     units in cost order, in doubling batches whose last one is
//     bisected, and requeued at its higher cost. The first verified set is
//     the result; if none verifies, the pool of t itself is.
//
// For a leaf whose pending pods share one shape, the estimate is exactly
// what PlanGroup decides, and feasibility only grows as units are evicted;
// the heuristic then finds a set whenever one exists, with the minimal
// highest victim priority, though not always the fewest pods (that is a
// knapsack problem). For other trees PlanGroup's own packing is a
// heuristic, and so is the search; every returned set is still verified by
// planning it.
//
// # Cost of the search
//
// Reading the input costs what PlanGroup's does, plus O(victims × log
// victims) to group and order the units. Each feasibility check plans the
// tree once on residuals adjusted in place, with no copy of the nodes:
// O(depth × nodes × shapes + pods × log nodes). The exhaustive search runs
// at most 2^units checks. The heuristic runs O(log priorities) checks for
// the threshold and, when the estimate is exact, one to verify the
// cheapest domain's set; its greedy and reprieve cost O(nodes × shapes)
// over all domains, which partition the nodes, plus O(units × log units)
// heap operations, each over the nodes of one unit and of the units that
// share them.
func FindVictims(nodes []Node, victims []Victim, root *Group, preemptorPriority int32, opts PreemptOptions) (*Preemption, error) {
	s, err := newPreemptor(nodes, victims, root, preemptorPriority, opts)
	if err != nil {
		return nil, err
	}
	if plan, ok := s.run(); ok {
		return s.result(&choice{plan: plan, exact: true}), nil
	}
	var c *choice
	if s.exhaustive() {
		c = s.searchAll()
	} else {
		c = s.searchGreedy()
	}
	if c == nil {
		return nil, s.infeasible()
	}
	return s.result(c), nil
}

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

// choice is a feasible set of units with its plan.
type choice struct {
	units []*vunit
	plan  *Plan
	exact bool
}

// preemptor holds one victim search. It owns a planner whose residuals it
// adjusts in place: evicting a unit raises the free resources and pod slots
// of its nodes, and every feasibility check is a quorum and surplus run
// followed by a full rollback, which is exactly PlanGroup on nodes rebuilt
// without the victims.
type preemptor struct {
	p        *planner
	victims  []Victim
	maxUnits int
	// units are the candidate units in cost order; a unit's index is its rank.
	units []*vunit
	// onNode lists, per node, the ranks of the units that free something there.
	onNode [][]int32

	alloc, used []int64 // node-major over p.resNames, as read from the nodes
	freed       []int64 // node-major: what the evicted units free
	freedPods   []int64

	demand []shapeDemand // pending pods of the tree per global shape
	target int64         // the root's quorum in pods

	// Scratch for the heuristic: per demand shape, and rank -> index in a
	// domain's pool (-1 outside it).
	before []int64
	pos    []int32

	// Nodes a shape may use only once running pods are evicted
	// (Shape.BlockedBy): blocks[i] are the entries victim i holds up.
	blocked []blockedNode
	blocks  [][]int

	// credits[i] are the member limits victim i is counted in
	// (DomainLimit.Victims); nil when no limit counts a victim.
	credits [][]credit
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

func newPreemptor(nodes []Node, victims []Victim, root *Group, prio int32, opts PreemptOptions) (*preemptor, error) {
	t, err := NewNodeTable(nodes)
	if err != nil {
		return nil, err
	}
	p, err := newPlanner(t, nil, root, opts.Options)
	if err != nil {
		return nil, err
	}
	s := &preemptor{p: p, victims: victims, maxUnits: opts.MaxUnits, demand: p.root.demand, target: int64(p.root.size)}
	if s.maxUnits == 0 {
		s.maxUnits = DefaultMaxUnits
	}
	nres := p.nres
	s.alloc = make([]int64, len(p.nodes)*nres)
	s.used = make([]int64, len(p.nodes)*nres)
	s.freed = make([]int64, len(p.nodes)*nres)
	s.freedPods = make([]int64, len(p.nodes))
	for i, n := range p.nodes {
		for r, name := range p.resNames {
			s.alloc[i*nres+r], s.used[i*nres+r] = n.Allocatable[name], n.Requested[name]
		}
	}

	byKey := make(map[string]int, len(victims))
	for i := range victims {
		byKey[victims[i].Key] = i
	}
	s.indexBlockers(byKey)
	s.indexCredits(byKey)
	units, err := s.buildUnits(prio)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(units, func(a, b *vunit) int { return compareCost(&a.cost, &b.cost) })
	s.units = units
	s.onNode = make([][]int32, len(p.nodes))
	s.before = make([]int64, len(s.demand))
	s.pos = make([]int32, len(units))
	for rank, u := range units {
		s.pos[rank] = -1
		u.rank = int32(rank)
		for _, f := range u.frees {
			s.onNode[f.node] = append(s.onNode[f.node], u.rank)
		}
	}
	return s, nil
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
			c.created = append(c.created, v.Created)
			c.keys = append(c.keys, v.Key)
		}
	}
	slices.Sort(c.created)
	slices.Sort(c.keys)
	return c
}

// apply evicts u (sign 1) or restores it (sign -1) on the planner's residuals.
func (s *preemptor) apply(u *vunit, sign int64) {
	p := s.p
	if len(s.blocked) > 0 {
		s.unblock(u, int(sign))
	}
	if s.credits != nil {
		for _, i := range u.pods {
			for _, c := range s.credits[i] {
				c.track.evict(c.dom, int32(sign))
			}
		}
	}
	for _, f := range u.frees {
		n := int(f.node)
		row := s.freed[n*p.nres : (n+1)*p.nres]
		for r, q := range f.res {
			row[r] += sign * q
		}
		s.freedPods[n] += sign * f.pods
		s.refresh(n)
	}
}

func (s *preemptor) applyAll(units []*vunit, sign int64) {
	for _, u := range units {
		s.apply(u, sign)
	}
}

// refresh recomputes node n's residuals as initResidual would read them from
// a node whose Requested and PodCount have the evicted pods removed.
func (s *preemptor) refresh(n int) {
	p := s.p
	for r := range p.nres {
		i := n*p.nres + r
		p.free[i] = s.alloc[i] - max(0, s.used[i]-s.freed[i])
	}
	node := p.nodes[n]
	p.slots[n] = min(int64(node.MaxPods)-max(0, int64(node.PodCount)-s.freedPods[n]), maxCount)
}

// run plans the tree on the current residuals, as PlanGroup would, and
// rolls every placement back.
func (s *preemptor) run() (*Plan, bool) {
	p := s.p
	var plan *Plan
	ok := p.quorum(p.root, p.all)
	if ok {
		p.surplus(p.root)
		plan = p.plan()
	}
	p.rollback(0)
	return plan, ok
}

// trial plans the tree with units evicted.
func (s *preemptor) trial(units []*vunit) (*Plan, bool) {
	s.applyAll(units, 1)
	plan, ok := s.run()
	s.applyAll(units, -1)
	return plan, ok
}

func (s *preemptor) exhaustive() bool {
	k := len(s.units)
	return s.maxUnits >= 0 && k <= s.maxUnits && k < 31 && (int64(1)<<k)*int64(max(1, len(s.p.nodes))) <= exhaustiveWork
}

// searchAll plans subsets of the candidate units from the cheapest. Subsets
// are sorted by the numeric part of the cost; within the first class of
// equal numbers that holds a feasible subset, the cheapest feasible one by
// the full order wins. The empty set was tried before.
func (s *preemptor) searchAll() *choice {
	type masked struct {
		mask             uint32
		prio             int32
		pods, units, pdb int
	}
	k := len(s.units)
	all := make([]masked, 0, 1<<k-1)
	for mask := uint32(1); mask < 1<<k; mask++ {
		m := masked{mask: mask, prio: math.MinInt32}
		for i, u := range s.units {
			if mask&(1<<i) != 0 {
				m.prio = max(m.prio, u.cost.maxPrio)
				m.pods += u.cost.pods
				m.units++
				m.pdb += u.cost.pdb
			}
		}
		all = append(all, m)
	}
	numeric := func(a, b masked) int {
		return cmp.Or(cmp.Compare(a.prio, b.prio), cmp.Compare(a.pods, b.pods), cmp.Compare(a.units, b.units), cmp.Compare(a.pdb, b.pdb))
	}
	slices.SortFunc(all, func(a, b masked) int { return cmp.Or(numeric(a, b), cmp.Compare(a.mask, b.mask)) })
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && numeric(all[i], all[j]) == 0 {
			j++
		}
		var best *choice
		var bestCost setCost
		for _, m := range all[i:j] {
			var set []*vunit
			for b, u := range s.units {
				if m.mask&(1<<b) != 0 {
					set = append(set, u)
				}
			}
			plan, ok := s.trial(set)
			if !ok {
				continue
			}
			if c := s.costOf(set); best == nil || compareCost(&c, &bestCost) < 0 {
				best, bestCost = &choice{units: set, plan: plan, exact: true}, c
			}
		}
		if best != nil {
			return best
		}
		i = j
	}
	return nil
}

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
// ties the capped benefit itself: one unit instead of several.
type gain struct {
	capped, uncapped, frac float64
	total                  int64
	rank                   int32
	ver                    int32 // the unit's version when computed
	epoch                  int32 // takes so far when computed
}

func better(a, b *gain) bool {
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
	return gain{capped: float64(capped) / pods, total: capped, uncapped: float64(uncapped) / pods, frac: frac / pods, rank: rank}
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

// infeasible reports the plan with every candidate evicted.
func (s *preemptor) infeasible() error {
	_, ok := s.trial(s.units)
	fail := s.p.root.fail
	if ok || fail == nil {
		return errors.New("placement: victim search found no set although evicting every candidate is feasible")
	}
	e := *fail
	pods := 0
	for _, u := range s.units {
		pods += len(u.pods)
	}
	if pods == 0 {
		e.Reason = "no lower-priority pod runs where the group could go, and " + fail.Reason
	} else {
		e.Reason = fmt.Sprintf("even with all %d lower-priority pods that could make room evicted, %s", pods, fail.Reason)
	}
	return &e
}

func (s *preemptor) result(c *choice) *Preemption {
	pr := &Preemption{Plan: c.plan, MaxVictimPriority: math.MinInt32, Exhaustive: c.exact}
	for _, u := range c.units {
		if !u.solo {
			pr.Units = append(pr.Units, u.id)
		}
		for _, i := range u.pods {
			pr.Victims = append(pr.Victims, s.victims[i].Key)
			pr.MaxVictimPriority = max(pr.MaxVictimPriority, s.victims[i].Priority)
		}
	}
	slices.Sort(pr.Victims)
	slices.SortFunc(pr.Units, strings.Compare)
	return pr
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
