package placement

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// DefaultMaxUnits is the exhaustive-search bound FindVictims uses when
// PreemptOptions.MaxUnits is 0.
const DefaultMaxUnits = 12

// Victim is a running pod that may be evicted.
type Victim struct {
	Key  string // unique pod id, as Pod.Key: the scheduler passes the pod's UID
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
	// ViolatesPDB says that evicting the pod would violate a
	// PodDisruptionBudget. The caller settles a budget's allowance across
	// its pods beforehand, since the cost counts each pod alone: of a
	// budget allowing N, the N pods the search evicts first do not violate
	// it, and the rest do.
	ViolatesPDB bool
	// Surplus says that the pod is a member of a gang beyond its minCount:
	// evicting it costs the gang speed, not progress. As for ViolatesPDB,
	// the caller settles beforehand which members of a gang count as its
	// surplus (no more than it has beyond its minimum).
	Surplus bool
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
//  2. then the fewest pods that are not Surplus: a set that takes only
//     members beyond their gangs' minimums goes before one that takes a
//     member keeping its gang whole, a pod alone or a whole unit;
//  3. then the fewest pods disrupted, every pod of a unit counted;
//  4. then the fewest units, a pod with an empty Unit being one;
//  5. then the fewest pods whose eviction violates a PodDisruptionBudget;
//  6. then the youngest victims: the victims' Created times sorted
//     ascending are compared element by element and the set with the
//     larger (younger) value at the first difference wins, so the set
//     whose oldest victim is youngest is preferred, then by the second
//     oldest, and so on (the sets have equal sizes by then);
//  7. then the smaller list of victim keys, sorted and compared
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
			a, u := n.Allocatable[name], n.Requested[name]
			if _, ok := t.cols[name]; !ok {
				room := opts.Extra[n.Name]
				a, u = room.Allocatable[name], room.Requested[name]
			}
			s.alloc[i*nres+r], s.used[i*nres+r] = a, u
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
// rolls every placement back. Ranks are ordered in every trial's plan, not
// only the chosen one's: the gang is nominated to the chosen plan's nodes,
// and ordering costs a sort of the ranked pods, less than the trial's
// placement itself.
func (s *preemptor) run() (*Plan, bool) {
	p := s.p
	var plan *Plan
	ok := p.quorum(p.root, p.all)
	if ok {
		p.surplus(p.root)
		p.orderRanks()
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
