package placement

import (
	"cmp"
	"slices"
	"strings"
)

// Rank order.
//
// An all-reduce ring passes data from rank i to rank i+1 and from the last
// rank back to rank 0. Every pair of neighbours in different domains of a
// level (node, rack, block, zone) is a ring boundary crossing at that
// level, and each costs the slower link. The pods of one shape of a leaf
// are interchangeable for capacity, so which of them takes which of the
// nodes the plan chose is free; orderRanks spends that freedom on the ring.
//
// The nodes (one entry per pod placed there) are sorted by their domains,
// widest level first, values in order, then by node name: a depth-first
// walk of the hierarchy. The ranked pods take them lowest rank first. Every
// domain of every level then holds one run of consecutive ranks, so the
// ring crosses each level exactly once per domain it uses (none when it
// uses one). No order does better: a ring that visits d domains of a level
// enters each of them at least once, which is d crossings when d > 1. The
// order is the minimum at every level at once, for the nodes the plan
// chose; which nodes those are is the placement's business (best fit, the
// required and preferred topology), not the ring's. oracle tests check
// this by brute force.
//
// Levels are Options.RankLevels and the tree's own topology keys. They are
// nested by the number of domains the chosen nodes span (fewer is wider),
// so the order in which a caller lists them does not matter.
//
// Unranked pods of the shape take the nodes after the ranked ones, in key
// order. A pod whose Prefer names one of the chosen nodes keeps it first:
// a re-created rank goes back where it ran, which costs the ring at most
// that one pod's neighbours. Cost: sorting the placed pods of each ranked
// shape, O(k log k) for k pods, plus one pass over the levels per pod.

// podOrder orders the pending pods of one shape of a leaf: ranked pods by
// rank, then unranked ones, each by key.
func (p *planner) podOrder(a, b int32) int {
	pa, pb := &p.pods[a], &p.pods[b]
	if pa.ranked != pb.ranked {
		if pa.ranked {
			return -1
		}
		return 1
	}
	if pa.ranked && pa.rank != pb.rank {
		return cmp.Compare(pa.rank, pb.rank)
	}
	return strings.Compare(pa.key, pb.key)
}

// orderRanks rewrites, for every leaf with ranked pods, which pod of a
// shape takes which of the shape's placed nodes. Residuals and constraint
// counts stay valid: pods of one shape request the same and belong to the
// same classes.
func (p *planner) orderRanks() {
	type group struct {
		leaf  *gnode
		local int
		log   []int // indices into p.log
	}
	var groups []*group
	index := map[*gnode][]*group{}
	for i, a := range p.log {
		pi := &p.pods[a.pod]
		if !pi.leaf.ranked {
			continue
		}
		byShape := index[pi.leaf]
		if byShape == nil {
			byShape = make([]*group, len(pi.leaf.byShape))
			index[pi.leaf] = byShape
		}
		gr := byShape[pi.local]
		if gr == nil {
			gr = &group{leaf: pi.leaf, local: pi.local}
			byShape[pi.local] = gr
			groups = append(groups, gr)
		}
		gr.log = append(gr.log, i)
	}
	for _, gr := range groups {
		p.orderShape(gr.leaf, gr.log)
	}
}

// orderShape hands the nodes of the log entries at idx to their pods in
// rank order, domain by domain.
func (p *planner) orderShape(g *gnode, idx []int) {
	pods := make([]int32, len(idx))
	nodes := make([]int32, len(idx))
	for i, j := range idx {
		pods[i], nodes[i] = p.log[j].pod, p.log[j].node
	}
	slices.SortFunc(pods, p.podOrder)
	levels := p.rankLevels(g, nodes)
	slices.SortFunc(nodes, func(a, b int32) int {
		for _, vals := range levels {
			if c := cmp.Compare(vals[a], vals[b]); c != 0 {
				return c
			}
		}
		return cmp.Compare(a, b)
	})

	// A pod's preferred node, when the plan chose it, is its own first;
	// everyone else takes the remaining nodes in order.
	taken := make([]bool, len(nodes))
	assigned := make([]int32, len(pods))
	for i := range assigned {
		assigned[i] = -1
	}
	if g.preferred != nil {
		slots := map[int32][]int{} // node -> its untaken entries in nodes
		for s, n := range nodes {
			slots[n] = append(slots[n], s)
		}
		for i, pod := range pods {
			want, ok := p.nodeIndex(p.pods[pod].prefer)
			if p.pods[pod].prefer == "" || !ok || len(slots[want]) == 0 {
				continue
			}
			s := slots[want][0]
			slots[want] = slots[want][1:]
			taken[s], assigned[i] = true, want
		}
	}
	next := 0
	for i := range pods {
		if assigned[i] >= 0 {
			continue
		}
		for taken[next] {
			next++
		}
		taken[next], assigned[i] = true, nodes[next]
	}
	for i, j := range idx {
		p.log[j] = assignment{pod: pods[i], node: assigned[i]}
	}
}

// rankLevels returns, widest first, the domain ids per node of every level
// that splits nodes: Options.RankLevels and the topology keys of g and its
// ancestors, preferred levels included.
func (p *planner) rankLevels(g *gnode, nodes []int32) [][]int32 {
	type level struct {
		vals   []int32
		spread int
	}
	var names []string
	add := func(k string) {
		if k != "" && !slices.Contains(names, k) {
			names = append(names, k)
		}
	}
	for _, k := range p.opts.RankLevels {
		add(k)
	}
	for a := g; a != nil; a = a.parent {
		if a.key >= 0 {
			add(p.keys[a.key].name)
		}
	}
	for _, k := range g.prefs {
		add(p.keys[k].name)
	}
	var levels []level
	for _, name := range names {
		vals := p.domainsOf(name).vals
		seen := map[int32]bool{}
		for _, n := range nodes {
			seen[vals[n]] = true
		}
		if len(seen) > 1 {
			levels = append(levels, level{vals: vals, spread: len(seen)})
		}
	}
	slices.SortStableFunc(levels, func(a, b level) int { return cmp.Compare(a.spread, b.spread) })
	out := make([][]int32, len(levels))
	for i, l := range levels {
		out[i] = l.vals
	}
	return out
}

// Crossings counts the ring boundary crossings of a placement. ring lists
// the node of each member in rank order; domain gives a node's domain at a
// level (its label value, "" when it has none) for each of levels keys. The
// result has one count per key and a last one for nodes: the neighbours
// i, i+1 and the pair n-1, 0 that sit in different domains.
func Crossings(ring []string, domain func(node, key string) string, keys []string) []int {
	out := make([]int, len(keys)+1)
	if len(ring) < 2 {
		return out
	}
	for i := range ring {
		a, b := ring[i], ring[(i+1)%len(ring)]
		for l, k := range keys {
			if domain(a, k) != domain(b, k) {
				out[l]++
			}
		}
		if a != b {
			out[len(keys)]++
		}
	}
	return out
}
