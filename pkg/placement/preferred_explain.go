package placement

import (
	"fmt"
	"slices"
	"strings"
)

// Explaining preferred topology levels: the message of the option a leaf
// took, why its narrower steps fell short, and why no step placed it. The
// ladder in preferred.go decides; this file only words the outcome, so the
// wording can change without touching the search.

// choice describes an accepted option.
func (p *planner) choice(g *gnode, o *option, used []*pdom, step int, reason string) *Choice {
	unit := max(step-1, 0)
	c := &Choice{Key: p.keys[g.prefs[unit]].name, Preferred: step == 0}
	for _, u := range used {
		c.Domains = append(c.Domains, p.keys[g.prefs[u.level]].names[u.val])
		if u.bound > 0 {
			c.Kept++
		}
	}
	within := o.cont
	if step == 0 {
		within = o.cont.parent
	}
	c.Within, c.WithinDomain = p.levelName(g, within)
	var b strings.Builder
	if step == 0 {
		fmt.Fprintf(&b, "placed in %s %s, its preferred level", c.Key, listValues(c.Domains))
	} else {
		fmt.Fprintf(&b, "placed in %d %s domains", len(c.Domains), c.Key)
		if c.Within != "" {
			fmt.Fprintf(&b, " of %s %s", c.Within, c.WithinDomain)
		}
		fmt.Fprintf(&b, " (%s)", listValues(c.Domains))
		if reason != "" {
			fmt.Fprintf(&b, ": %s", reason)
		}
	}
	if c.Kept > 0 && len(c.Domains) > c.Kept {
		fmt.Fprintf(&b, "; %d of them already held its bound members", c.Kept)
	}
	c.Message = b.String()
	return c
}

// outgrow reports leaf g, whose surplus did not fit the domains its quorum
// took and went on into container c, as placed in the domains of c that
// hold its pods, those with bound members first.
func (p *planner) outgrow(g *gnode, c *pdom) {
	on := make(map[int32]bool, len(g.boundOn))
	for _, n := range g.boundOn {
		on[n] = true
	}
	for _, a := range p.log {
		if p.pods[a.pod].leaf == g {
			on[a.node] = true
		}
	}
	var kept, added []*pdom
	for _, u := range c.kids {
		if !slices.ContainsFunc(u.nodes, func(n int32) bool { return on[n] }) {
			continue
		}
		if u.bound > 0 {
			kept = append(kept, u)
		} else {
			added = append(added, u)
		}
	}
	g.choice = p.choice(g, &option{cont: c}, append(kept, added...), c.level, "its members beyond the minimum did not fit the domains of its minimum")
	g.choice.Outgrown = true
}

// levelName names a domain of g's ladder: its key and value, or "" for a
// top without a required key.
func (p *planner) levelName(g *gnode, d *pdom) (key, value string) {
	if d == nil || d.val < 0 {
		return "", ""
	}
	k := g.key
	if d.level < len(g.prefs) {
		k = g.prefs[d.level]
	}
	if k < 0 {
		return "", ""
	}
	return p.keys[k].name, p.keys[k].names[d.val]
}

// listValues joins domain values, eliding a long list.
func listValues(vs []string) string {
	const shown = 5
	if len(vs) <= shown {
		return strings.Join(vs, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(vs[:shown], ", "), len(vs)-shown)
}

// fallbackReason says why step, past 0, was needed: why no single domain
// of the level below held the goal.
func (p *planner) fallbackReason(g *gnode, step int, levels [][]*pdom, goal int64, allBound int) string {
	if step == 0 {
		return ""
	}
	lower := levels[step-1]
	key := p.levelKey(g, step-1)
	var best *pdom
	if allBound > 0 {
		// Only the domain holding every bound member was a candidate.
		spans := 0
		for _, d := range lower {
			if d.bound > 0 {
				spans++
				best = d
			}
		}
		if spans > 1 {
			return fmt.Sprintf("its bound members already span %d %s domains", spans, key)
		}
		if best != nil {
			_, name := p.levelName(g, best)
			return fmt.Sprintf("%s %s, which holds its bound members, fits %d of the %d pods to place", key, name, best.est, goal)
		}
	}
	for _, d := range lower {
		if best == nil || d.est > best.est {
			best = d
		}
	}
	if best == nil {
		return ""
	}
	_, name := p.levelName(g, best)
	if best.est >= goal {
		return fmt.Sprintf("no single %s domain fits %d pods once packed (best %s)", key, goal, name)
	}
	msg := fmt.Sprintf("no single %s domain fits %d pods: best %s fits %d", key, goal, name, best.est)
	if short := p.shortfall(g, best.nodes, goal); len(short) > 0 {
		msg += fmt.Sprintf(" (short %s)", formatResources(short))
	}
	return msg
}

// levelKey is the key of level l of g's ladder.
func (p *planner) levelKey(g *gnode, l int) string {
	if l < len(g.prefs) {
		return p.keys[g.prefs[l]].name
	}
	return p.keys[g.key].name
}

// shortfall is what pods of g's pending pods, the largest shapes first,
// would request beyond the free room of the nodes that admit them.
func (p *planner) shortfall(g *gnode, nodes []int32, pods int64) Resources {
	demand := make([]int64, p.nres)
	var shapes []*shapeInfo
	var asked int64
	for _, li := range g.order {
		n := min(int64(len(g.byShape[li])), pods)
		if n <= 0 {
			continue
		}
		pods -= n
		asked += n
		s := p.shapes[g.gshape[li]]
		shapes = append(shapes, s)
		for _, r := range s.reqs {
			demand[r.idx] += n * r.amt
		}
	}
	avail := make([]int64, p.nres)
	var slots int64
	for _, n := range nodes {
		ok := false
		for _, s := range shapes {
			ok = ok || s.eligible[n]
		}
		if !ok {
			continue
		}
		for r := range avail {
			avail[r] += max(0, p.free[int(n)*p.nres+r])
		}
		slots += max(0, p.slots[n])
	}
	out := Resources{}
	for r, d := range demand {
		if d > avail[r] {
			out[p.resNames[r]] = d - avail[r]
		}
	}
	if asked > slots {
		out["pods"] = asked - slots
	}
	return out
}

// preferredFailure explains a leaf no step could place: as a required key
// would, on the labelled nodes of the closest top, or, when no node in
// scope carries every level, by naming the first level missing.
func (p *planner) preferredFailure(g *gnode, tops []candidate, roots []*pdom) *Infeasible {
	var best *pdom
	for _, r := range roots {
		if len(r.nodes) > 0 && (best == nil || r.est > best.est) {
			best = r
		}
	}
	if best != nil {
		return p.leafFailure(g, &candidate{val: best.val, nodes: best.nodes})
	}
	missing := p.keys[g.prefs[0]].name
	for _, k := range g.prefs {
		found := false
		for _, c := range tops {
			for _, n := range c.nodes {
				if p.keys[k].vals[n] >= 0 {
					found = true
					break
				}
			}
		}
		if !found {
			missing = p.keys[k].name
			break
		}
	}
	scope := p.scope(g)
	if len(tops) == 1 && tops[0].val >= 0 {
		scope = " in " + p.keys[g.key].names[tops[0].val]
	}
	return &Infeasible{Group: g.g.Name, TopologyKey: missing, Need: g.g.MinCount, Fits: g.bound,
		Reason: fmt.Sprintf("no node%s carries every preferred topology level of the group (%s is missing)", scope, missing)}
}
