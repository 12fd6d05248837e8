package placement

import (
	"cmp"
	"slices"
)

// Preferred topology levels.
//
// Users ask for "one rack if possible, else as few racks as possible inside
// one block, never beyond the zone". A required key alone makes such a gang
// wait forever for a whole rack, and no key scatters it. A leaf therefore
// may name soft levels below its required key, narrowest first
// (Group.PreferredKeys).
//
// The planner arranges the nodes of each candidate domain of the required
// key (or of the parent's domain, without one) into a tree of nested
// domains, one level per preferred key: a domain is a value of its key
// inside one domain of the level above, so values need not be unique across
// the cluster (rack r1 in two zones is two racks). Nodes lacking a level's
// label belong to no domain and are left out. Every domain carries
// per-shape capacity sums, so what follows is one count per node per shape,
// then arithmetic on the tree:
//
//	step 0: one domain of the first level;
//	step j: the fewest domains of level j-1 inside one domain of level j,
//	        the last step's containers being the required key's domains
//	        (or the parent's domain).
//
// The first step with an option that works wins, so a group never climbs
// while a narrower placement exists. Within a step, options with fewer
// domains go first, then those holding more of the pending pods, then the
// domain policy on the room the container keeps (best fit: the fullest, so
// whole containers stay free for large gangs), then tree order, which is
// value order. Inside a container, domains are taken largest first until
// one more holds the rest of the goal, and that last one is the smallest
// that does: the count stays minimal and the large domains left stay whole.
//
// Bound members pin, as they do a required key: an option must contain
// every bound member the scope holds, and the domains holding them are in
// every selection and filled first, so a group re-created in part stays in
// the domains it has and adds the fewest new ones.
//
// A gang's goal is its quorum (MinCount minus the bound members). Surplus
// pods fill the chosen domains first, then the domains around them, level
// by level, up to the required key's domain: the levels are a preference,
// and an elastic gang at its minimum grows wherever its required domain
// has room rather than wait for its own rack. A basic group's goal is all
// of its pending pods; when no option holds them all, it takes every
// domain of the best container at the last step and places what fits.

// pdom is one domain of a leaf's preferred levels.
type pdom struct {
	level  int   // index into gnode.prefs; len(prefs) for a top
	val    int32 // value id of the level's key; a top's is the required key's, or -1
	nodes  []int32
	parent *pdom
	kids   []*pdom
	caps   []int64 // per entry of gnode.demand: pods of that shape the nodes hold
	est    int64   // pending pods of the group the domain holds, at most
	room   int64   // pods of the group's shapes the domain holds
	bound  int     // bound members on its nodes
	order  int     // pre-order position in the tree: the last tie-break
}

// option is one way to satisfy a step: units of one level, all inside cont.
type option struct {
	cont     *pdom
	units    []*pdom // in fill order: those holding bound members first
	kept     int     // units holding bound members
	est      int64   // pending pods the units hold, at most
	left     int64   // room cont keeps once est is placed
	complete bool    // est reaches the goal
}

// preferredQuorum is quorum for a leaf with preferred levels: it places the
// leaf's goal at the narrowest step that holds it (see the comment at the
// top of this file).
func (p *planner) preferredQuorum(g *gnode, nodes []int32) bool {
	g.ok, g.dom, g.domNodes, g.fail, g.choice, g.wider = false, -1, nil, nil, nil, nil
	if g.refused != nil {
		g.fail = g.refused
		return false
	}
	tops := p.candidates(g, nodes)
	roots, levels := p.ladder(g, tops)
	goal := int64(g.need)
	if !g.gang {
		goal = max(goal, int64(g.pending))
	}
	allBound := 0
	for _, r := range roots {
		allBound += r.bound
	}
	k := len(g.prefs)
	for step := 0; step <= k; step++ {
		opts := p.options(g, step, levels[step], goal, allBound)
		reason := ""
		for i := range opts {
			o := &opts[i]
			if !o.complete {
				break
			}
			if reason == "" {
				// Worded before anything is placed: the best narrower
				// domain's shortfall is measured on the residuals the
				// step started from.
				reason = p.fallbackReason(g, step, levels, goal, allBound)
			}
			if p.tryOption(g, o, goal, goal, step, reason) {
				return true
			}
			// The estimates are upper bounds once a leaf has several
			// shapes; at the last step every domain of the container is
			// worth a try before the group fails.
			if step == k && len(o.units) < len(o.cont.kids) {
				all := p.everyUnit(o.cont)
				if p.tryOption(g, &all, goal, goal, step, reason) {
					return true
				}
			}
		}
		if step == k && !g.gang {
			// A basic group takes what the best container holds.
			for i := range opts {
				all := p.everyUnit(opts[i].cont)
				if p.tryOption(g, &all, goal, int64(g.need), step, p.fallbackReason(g, step, levels, goal, allBound)) {
					return true
				}
			}
		}
	}
	if g.need == 0 {
		// Nothing is owed (a basic root, a gang whose bound members make
		// its quorum): like a required key over unlabelled nodes, the
		// group is satisfied with no domain.
		g.ok = true
		return true
	}
	g.fail = p.preferredFailure(g, tops, roots)
	return false
}

// ladder arranges the nodes of every top into nested domains, one level per
// preferred key, and returns the tops and every domain by level.
func (p *planner) ladder(g *gnode, tops []candidate) ([]*pdom, [][]*pdom) {
	k := len(g.prefs)
	levels := make([][]*pdom, k+1)
	var bound map[int32]int
	if len(g.boundOn) > 0 {
		bound = make(map[int32]int, len(g.boundOn))
		for _, n := range g.boundOn {
			bound[n]++
		}
	}
	order := 0
	var build func(d *pdom)
	build = func(d *pdom) {
		d.order = order
		order++
		levels[d.level] = append(levels[d.level], d)
		d.caps = make([]int64, len(g.demand))
		if d.level == 0 {
			for _, n := range d.nodes {
				for i, dm := range g.demand {
					d.caps[i] += p.count(p.shapes[dm.shape], n)
				}
				if bound != nil {
					d.bound += bound[n]
				}
			}
		} else {
			for _, part := range p.split(p.keys[g.prefs[d.level-1]], d.nodes) {
				kid := &pdom{level: d.level - 1, val: part.val, nodes: part.nodes, parent: d}
				build(kid)
				d.kids = append(d.kids, kid)
				for i := range d.caps {
					d.caps[i] += kid.caps[i]
				}
				d.bound += kid.bound
			}
		}
		d.est, d.room = g.estimate(d.caps)
	}
	roots := make([]*pdom, 0, len(tops))
	for _, c := range tops {
		top := &pdom{level: k, val: c.val}
		for _, n := range c.nodes {
			if p.labelled(g, n) {
				top.nodes = append(top.nodes, n)
			}
		}
		build(top)
		roots = append(roots, top)
	}
	return roots, levels
}

// estimate is how many of g's pending pods capacities caps hold at most,
// and how many pods of g's shapes they hold in all.
func (g *gnode) estimate(caps []int64) (est, room int64) {
	for i, dm := range g.demand {
		est += min(dm.n, caps[i])
		room += caps[i]
	}
	return est, room
}

// labelled reports whether node n carries every preferred level of g.
func (p *planner) labelled(g *gnode, n int32) bool {
	for _, k := range g.prefs {
		if p.keys[k].vals[n] < 0 {
			return false
		}
	}
	return true
}

// split partitions nodes by key k, dropping unlabelled ones; parts come in
// value order and keep the order of nodes inside.
func (p *planner) split(k *topoKey, nodes []int32) []candidate {
	var parts []candidate
	for _, n := range nodes {
		v := k.vals[n]
		if v < 0 {
			continue
		}
		if k.slot[v] < 0 {
			k.slot[v] = int32(len(parts))
			parts = append(parts, candidate{val: v})
		}
		c := &parts[k.slot[v]]
		c.nodes = append(c.nodes, n)
	}
	for _, c := range parts {
		k.slot[c.val] = -1
	}
	slices.SortFunc(parts, func(a, b candidate) int { return cmp.Compare(a.val, b.val) })
	return parts
}

// options lists the ways step can hold goal, best first. At step 0 each
// domain of the first level is an option; at step j each domain of level j
// is a container and the option is the fewest of its domains of level j-1.
func (p *planner) options(g *gnode, step int, conts []*pdom, goal int64, allBound int) []option {
	out := make([]option, 0, len(conts))
	for _, c := range conts {
		if allBound > 0 && c.bound != allBound {
			continue // it would leave bound members outside
		}
		if step > 0 && len(c.kids) == 0 {
			continue
		}
		var o option
		if step == 0 {
			o = option{cont: c, units: []*pdom{c}, est: c.est}
			if c.bound > 0 {
				o.kept = 1
			}
		} else {
			o = p.pick(g, c, goal)
		}
		o.complete = o.est >= goal
		o.left = c.room - o.est
		out = append(out, o)
	}
	slices.SortStableFunc(out, p.compareOptions)
	return out
}

func (p *planner) compareOptions(a, b option) int {
	if a.complete != b.complete {
		if a.complete {
			return -1
		}
		return 1
	}
	// Complete options go by how few domains they take; incomplete ones
	// (a basic group's last resort) by how many pods they hold.
	units, est := cmp.Compare(len(a.units), len(b.units)), cmp.Compare(b.est, a.est)
	if !a.complete {
		units, est = est, units
	}
	if units != 0 {
		return units
	}
	if est != 0 {
		return est
	}
	switch p.opts.DomainPolicy {
	case WorstFit:
		if c := cmp.Compare(b.left, a.left); c != 0 {
			return c
		}
	case FirstFit:
	default:
		if c := cmp.Compare(a.left, b.left); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.cont.order, b.cont.order)
}

// pick selects the fewest domains of c (one level below it) that hold goal:
// those holding bound members, then the largest until one more would hold
// the rest, and as that last one the domain the policy prefers among those
// that would (best fit: the smallest). When even all of them fall short,
// it returns them all, incomplete.
func (p *planner) pick(g *gnode, c *pdom, goal int64) option {
	o := option{cont: c}
	var rest []*pdom
	for _, u := range c.kids {
		if u.bound > 0 {
			o.units = append(o.units, u)
		} else {
			rest = append(rest, u)
		}
	}
	o.kept = len(o.units)
	larger := func(a, b *pdom) int {
		if x := cmp.Compare(b.est, a.est); x != 0 {
			return x
		}
		return cmp.Compare(a.order, b.order)
	}
	slices.SortStableFunc(o.units, larger)
	slices.SortStableFunc(rest, larger)
	caps := make([]int64, len(g.demand))
	with := make([]int64, len(g.demand))
	for _, u := range o.units {
		for i := range caps {
			caps[i] += u.caps[i]
		}
	}
	holds := func(u *pdom) bool {
		for i := range with {
			with[i] = caps[i] + u.caps[i]
		}
		est, _ := g.estimate(with)
		return est >= goal
	}
	for i := 0; i < len(rest); i++ {
		if est, _ := g.estimate(caps); est >= goal {
			break
		}
		u := rest[i]
		if holds(u) {
			last := i
			if p.opts.DomainPolicy != WorstFit {
				for j := i + 1; j < len(rest); j++ {
					if !holds(rest[j]) {
						continue
					}
					if p.opts.DomainPolicy == FirstFit {
						if rest[j].order < rest[last].order {
							last = j
						}
					} else if rest[j].est < rest[last].est || (rest[j].est == rest[last].est && rest[j].room < rest[last].room) {
						last = j
					}
				}
			}
			u = rest[last]
			rest[i], rest[last] = rest[last], rest[i]
		}
		o.units = append(o.units, u)
		for j := range caps {
			caps[j] += u.caps[j]
		}
	}
	o.est, _ = g.estimate(caps)
	return o
}

// everyUnit is the option of all domains of c one level below it.
func (p *planner) everyUnit(c *pdom) option {
	o := option{cont: c}
	var rest []*pdom
	for _, u := range c.kids {
		if u.bound > 0 {
			o.units = append(o.units, u)
		} else {
			rest = append(rest, u)
		}
	}
	o.kept = len(o.units)
	o.units = append(o.units, rest...)
	o.est = c.est
	o.complete = true
	return o
}

// tryOption places goal pods of g in o's units, filling them in order, and
// keeps the placement when at least enough pods fit; otherwise it rolls
// back.
func (p *planner) tryOption(g *gnode, o *option, goal, enough int64, step int, reason string) bool {
	mark := len(p.log)
	var placed int64
	used := make([]*pdom, 0, len(o.units))
	for _, u := range o.units {
		var n int64
		if placed < goal {
			n = int64(p.placeLeaf(g, u.nodes, int(goal-placed)))
			placed += n
		}
		// Units the goal did not reach are dropped, unless they hold
		// bound members or the group has nothing to place (its surplus
		// then goes where the option says).
		if n > 0 || u.bound > 0 || goal == 0 {
			used = append(used, u)
		}
	}
	if placed < enough {
		p.rollback(mark)
		return false
	}
	g.ok, g.dom = true, -1
	top := o.cont
	for top.parent != nil {
		top = top.parent
	}
	g.dom = top.val
	for _, u := range used {
		g.domNodes = append(g.domNodes, u.nodes...)
	}
	for c := o.cont; c != nil; c = c.parent {
		if len(c.nodes) > len(g.domNodes) {
			g.wider = append(g.wider, c)
		}
	}
	g.choice = p.choice(g, o, used, step, reason)
	return true
}
