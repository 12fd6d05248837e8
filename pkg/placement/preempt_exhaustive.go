package placement

import (
	"cmp"
	"math"
	"slices"
)

// exhaustiveWork bounds the exhaustive search: 2^units × nodes, the node
// visits of planning every subset once, must not exceed it. At 7,500 nodes
// this allows 11 units; on small clusters MaxUnits is the only bound.
const exhaustiveWork = 1 << 24

// exhaustive says whether planning every subset of the candidates stays
// within both bounds, so that searchAll can prove its result minimal.
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
		mask                   uint32
		prio                   int32
		kept, pods, units, pdb int
	}
	k := len(s.units)
	all := make([]masked, 0, 1<<k-1)
	for mask := uint32(1); mask < 1<<k; mask++ {
		m := masked{mask: mask, prio: math.MinInt32}
		for i, u := range s.units {
			if mask&(1<<i) != 0 {
				m.prio = max(m.prio, u.cost.maxPrio)
				m.kept += u.cost.kept
				m.pods += u.cost.pods
				m.units++
				m.pdb += u.cost.pdb
			}
		}
		all = append(all, m)
	}
	numeric := func(a, b masked) int {
		return cmp.Or(cmp.Compare(a.prio, b.prio), cmp.Compare(a.kept, b.kept), cmp.Compare(a.pods, b.pods), cmp.Compare(a.units, b.units), cmp.Compare(a.pdb, b.pdb))
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
