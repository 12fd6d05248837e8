package placement_test

import (
	"fmt"
	"math/bits"
	"slices"
	"strings"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// The independent check of preferred levels: which groups the nodes refuse
// them to, the labelled nodes a group may use, and, for a homogeneous leaf
// root, the narrowest step and the fewest domains a brute force over every
// subset of domains finds, which the plan's Choice must match.

// oracleLabelled says whether n carries every preferred level of g.
func oracleLabelled(n placement.Node, g *placement.Group) bool {
	for _, k := range g.PreferredKeys {
		if _, ok := n.Labels[k]; !ok {
			return false
		}
	}
	return true
}

// oracleRefusal returns why the nodes refuse g's preferred levels: a level
// no node has, or a level wider than the next (some value of it spans two
// values of the next, and no value of the next spans two of it). It checks
// the levels in order, as the contract does.
func oracleRefusal(nodes []placement.Node, g *placement.Group) (key string, invalid, refused bool) {
	for i, k := range g.PreferredKeys {
		has := false
		for _, n := range nodes {
			_, ok := n.Labels[k]
			has = has || ok
		}
		if !has {
			return k, false, true
		}
		next := g.TopologyKey
		if i+1 < len(g.PreferredKeys) {
			next = g.PreferredKeys[i+1]
		}
		if next == "" {
			continue
		}
		if oracleSpans(nodes, k, next) && !oracleSpans(nodes, next, k) {
			return k, true, true
		}
	}
	return "", false, false
}

// oracleSpans says whether some value of a holds nodes of two values of b.
func oracleSpans(nodes []placement.Node, a, b string) bool {
	seen := map[string]map[string]bool{}
	for _, n := range nodes {
		va, okA := n.Labels[a]
		vb, okB := n.Labels[b]
		if !okA || !okB {
			continue
		}
		if seen[va] == nil {
			seen[va] = map[string]bool{}
		}
		seen[va][vb] = true
		if len(seen[va]) > 1 {
			return true
		}
	}
	return false
}

// oracleAnyRefused says whether the nodes refuse the preferred levels of
// any group of the tree.
func oracleAnyRefused(nodes []placement.Node, g *placement.Group) bool {
	if _, _, refused := oracleRefusal(nodes, g); refused {
		return true
	}
	for _, c := range g.Children {
		if oracleAnyRefused(nodes, c) {
			return true
		}
	}
	return false
}

func hasPreferred(g *placement.Group) bool {
	if len(g.PreferredKeys) > 0 {
		return true
	}
	for _, c := range g.Children {
		if hasPreferred(c) {
			return true
		}
	}
	return false
}

// verifyRefusal accepts a failure of a root whose levels the nodes refuse.
func verifyRefusal(nodes []placement.Node, root *placement.Group, inf *placement.Infeasible) (handled bool, err error) {
	key, invalid, refused := oracleRefusal(nodes, root)
	if !refused {
		if inf.Invalid {
			return true, fmt.Errorf("planner refuses the levels of %s (%s) but the oracle does not", inf.Group, inf.Reason)
		}
		return false, nil
	}
	if inf.Group != root.Name || inf.TopologyKey != key || inf.Invalid != invalid {
		return true, fmt.Errorf("oracle refuses level %s of %s (invalid %v), planner says %+v", key, root.Name, invalid, inf)
	}
	return true, nil
}

type oracleUnit struct {
	path  string
	nodes []placement.Node
	cap   int
	bound int
}

// verifyPreferred checks every group with preferred levels in a plan: its
// placed pods are on nodes carrying every level, inside the domains its
// Choice names, all in one domain of Choice.Within; a refused group places
// nothing. For a homogeneous gang leaf root it also checks the step and
// the number of domains against a brute force.
func verifyPreferred(nodes []placement.Node, root *placement.Group, opts placement.Options, plan *placement.Plan) error {
	byName := map[string]placement.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	var walk func(g *placement.Group) error
	walk = func(g *placement.Group) error {
		for _, c := range g.Children {
			if err := walk(c); err != nil {
				return err
			}
		}
		if len(g.PreferredKeys) == 0 {
			return nil
		}
		var placed []placement.Node
		for _, p := range g.Pending {
			if node, ok := plan.Assignments[p.Key]; ok {
				placed = append(placed, byName[node])
			}
		}
		if _, _, refused := oracleRefusal(nodes, g); refused && len(placed) > 0 {
			return fmt.Errorf("group %s places %d pods with refused levels", g.Name, len(placed))
		}
		c, ok := plan.Choices[g.Name]
		if len(placed) > 0 && !ok {
			return fmt.Errorf("group %s placed pods but reports no choice", g.Name)
		}
		for _, n := range placed {
			if !oracleLabelled(n, g) {
				return fmt.Errorf("group %s: pod on %s, which lacks a preferred level", g.Name, n.Name)
			}
			if !slices.Contains(c.Domains, n.Labels[c.Key]) {
				return fmt.Errorf("group %s: pod on %s (%s=%s) outside its chosen domains %v", g.Name, n.Name, c.Key, n.Labels[c.Key], c.Domains)
			}
			if c.Within != "" && n.Labels[c.Within] != c.WithinDomain {
				return fmt.Errorf("group %s: pod on %s (%s=%s) outside %s", g.Name, n.Name, c.Within, n.Labels[c.Within], c.WithinDomain)
			}
		}
		if ok && c.Preferred && (len(c.Domains) != 1 || c.Key != g.PreferredKeys[0]) {
			return fmt.Errorf("group %s: choice %+v says preferred %v", g.Name, c, c.Preferred)
		}
		return nil
	}
	if err := walk(root); err != nil {
		return err
	}
	if len(root.Children) > 0 || len(root.PreferredKeys) == 0 || root.Policy != placement.Gang {
		return nil
	}
	shape, ok := homogeneousShape(root)
	if !ok {
		return nil
	}
	step, count, feasible := oracleLadder(nodes, root, shape, opts.TaintComparisonOperators)
	c, chose := plan.Choices[root.Name]
	switch {
	case leafNeed(root) == 0 && !chose:
		return nil // nothing owed, and maybe nowhere labelled to be
	case !feasible:
		return fmt.Errorf("plan for %s, but no step of its levels holds its quorum", root.Name)
	case !chose:
		return fmt.Errorf("no choice reported for %s", root.Name)
	case c.Outgrown:
		// Its surplus went past the quorum's domains: the choice names
		// the wider ones (checked above to hold every pod).
		return nil
	}
	wantKey := root.PreferredKeys[max(step-1, 0)]
	if c.Key != wantKey || len(c.Domains) != count {
		return fmt.Errorf("group %s: %d %s domains %v, the brute force needs %d %s domains (step %d)",
			root.Name, len(c.Domains), c.Key, c.Domains, count, wantKey, step)
	}
	return nil
}

// oracleLadder finds, for a homogeneous gang leaf, the first step whose
// option holds the quorum and the fewest domains that option takes: step 0
// is one domain of the first level, step j the domains of level j-1 inside
// one domain of level j (the required key's domain, or everything, above
// the last level). Domains are paths of values, so equal values under
// different parents stay apart. Bound members pin as in the contract.
func oracleLadder(nodes []placement.Node, g *placement.Group, shape placement.Shape, comparisons bool) (step, count int, feasible bool) {
	var labelled []placement.Node
	for _, n := range nodes {
		if oracleLabelled(n, g) {
			labelled = append(labelled, n)
		}
	}
	tops, _ := oracleDomains(nodes, labelled, g)
	k := len(g.PreferredKeys)
	need := leafNeed(g)
	boundOn := map[string]int{}
	for _, b := range g.Bound {
		boundOn[b.Node]++
	}
	// pathOf is node n's domain at level l (k: its top).
	pathOf := func(top string, n placement.Node, l int) string {
		parts := []string{top}
		for i := k - 1; i >= l; i-- {
			parts = append(parts, n.Labels[g.PreferredKeys[i]])
		}
		return strings.Join(parts, "/")
	}
	units := func(l int) map[string]*oracleUnit {
		out := map[string]*oracleUnit{}
		for _, t := range tops {
			for _, n := range t.nodes {
				p := pathOf(t.value, n, l)
				if out[p] == nil {
					out[p] = &oracleUnit{path: p}
				}
				out[p].nodes = append(out[p].nodes, n)
				out[p].bound += boundOn[n.Name]
			}
		}
		for _, u := range out {
			u.cap = oracleCapacity(u.nodes, shape, len(g.Pending), comparisons)
		}
		return out
	}
	allBound := 0
	for _, t := range tops {
		for _, n := range t.nodes {
			allBound += boundOn[n.Name]
		}
	}
	for s := 0; s <= k; s++ {
		conts := units(s)
		best := -1
		if s == 0 {
			for _, u := range conts {
				if (allBound == 0 || u.bound == allBound) && u.cap >= need {
					best = 1
				}
			}
		} else {
			inner := units(s - 1)
			for cp, c := range conts {
				if allBound > 0 && c.bound != allBound {
					continue
				}
				var kids []*oracleUnit
				for p, u := range inner {
					if strings.HasPrefix(p, cp+"/") {
						kids = append(kids, u)
					}
				}
				if m := fewest(kids, need); m > 0 && (best < 0 || m < best) {
					best = m
				}
			}
		}
		if best > 0 {
			return s, best, true
		}
	}
	return 0, 0, false
}

// fewest is the smallest number of units, all those holding bound members
// among them, whose capacities reach need; 0 when none do. Brute force over
// every subset.
func fewest(units []*oracleUnit, need int) int {
	if len(units) > 20 {
		panic("too many units for a brute force")
	}
	best := 0
	for mask := uint32(0); mask < 1<<len(units); mask++ {
		sum, ok := 0, true
		for i, u := range units {
			in := mask&(1<<i) != 0
			if u.bound > 0 && !in {
				ok = false
				break
			}
			if in {
				sum += u.cap
			}
		}
		n := bits.OnesCount32(mask)
		if ok && n > 0 && sum >= need && (best == 0 || n < best) {
			best = n
		}
	}
	return best
}
