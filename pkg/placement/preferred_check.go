package placement

import (
	"fmt"
	"slices"
)

// Checking preferred topology levels before any plan: the builder's
// validation of a leaf's PreferredKeys, and the per-plan check of the levels
// against the nodes' labels (a level no node carries, a level wider than the
// one above it). Both refuse a group up front, apart from the ladder search
// in preferred.go.

// checkPreferred judges the preferred levels of every leaf against the
// nodes once per plan. A level no node carries makes the group wait for
// labelled nodes; a level wider than the one above it is a definition the
// nodes contradict.
func (p *planner) checkPreferred(leaves []*gnode) {
	type pair struct{ a, b int }
	seen := map[pair]*Infeasible{}
	for _, g := range leaves {
		for i, k := range g.prefs {
			key := p.keys[k]
			if len(key.names) == 0 {
				g.refused = &Infeasible{Group: g.g.Name, TopologyKey: key.name, Need: g.g.MinCount, Fits: g.bound,
					Reason: fmt.Sprintf("no node %s, a preferred topology level of the group", hasLevel(key.name))}
				break
			}
			next, what := -1, "the required level"
			if i+1 < len(g.prefs) {
				next, what = g.prefs[i+1], "the next preferred level"
			} else if g.key >= 0 {
				next = g.key
			}
			if next < 0 {
				continue
			}
			pr := pair{k, next}
			why, done := seen[pr]
			if !done {
				if v, b1, b2, ok := p.wider(key, p.keys[next]); ok {
					other := p.keys[next].name
					why = &Infeasible{TopologyKey: key.name, Invalid: true,
						Reason: fmt.Sprintf("preferred topology level %s is wider than %s, %s: %s=%s spans %s=%s and %s=%s; list the levels narrowest first, below the required one",
							key.name, other, what, key.name, v, other, b1, other, b2)}
				}
				seen[pr] = why
			}
			if why != nil {
				inf := *why
				inf.Group, inf.Need, inf.Fits = g.g.Name, g.g.MinCount, g.bound
				g.refused = &inf
				break
			}
		}
	}
}

// wider reports whether the nodes show key a to be wider than key b: some
// value of a spans two values of b, and no value of b spans two of a. Both
// spanning each other is a cluster that reuses names (rack r1 in two
// zones), which the nested domains handle; it proves nothing.
func (p *planner) wider(a, b *topoKey) (v, b1, b2 string, ok bool) {
	aToB := make([]int32, len(a.names))
	bToA := make([]int32, len(b.names))
	for i := range aToB {
		aToB[i] = -1
	}
	for i := range bToA {
		bToA[i] = -1
	}
	found, bSpans := false, false
	for n := range p.nodes {
		va, vb := a.vals[n], b.vals[n]
		if va < 0 || vb < 0 {
			continue
		}
		switch first := aToB[va]; {
		case first < 0:
			aToB[va] = vb
		case first != vb && !found:
			found = true
			v, b1, b2 = a.names[va], b.names[min(first, vb)], b.names[max(first, vb)]
		}
		switch first := bToA[vb]; {
		case first < 0:
			bToA[vb] = va
		case first != va:
			bSpans = true
		}
	}
	return v, b1, b2, found && !bSpans
}

// preferred validates and registers the preferred levels of n. The API
// refuses these inputs already; a caller that builds groups itself gets a
// plain error.
func (b *builder) preferred(n *gnode) error {
	g := n.g
	if len(g.PreferredKeys) == 0 {
		return nil
	}
	if !n.leaf {
		return fmt.Errorf("placement: group %q: preferred topology levels are for leaf groups", g.Name)
	}
	for i, k := range g.PreferredKeys {
		switch {
		case k == "":
			return fmt.Errorf("placement: group %q: preferred level %d is empty", g.Name, i)
		case k == g.TopologyKey:
			return fmt.Errorf("placement: group %q: preferred level %q is its required key", g.Name, k)
		case slices.Contains(g.PreferredKeys[:i], k):
			return fmt.Errorf("placement: group %q: preferred level %q appears twice", g.Name, k)
		}
		n.prefs = append(n.prefs, b.key(k))
	}
	return nil
}
