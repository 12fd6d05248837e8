// Package kueuetas computes offline where Kueue's topology-aware
// scheduling (TAS) would put a stream of gangs, following its published
// BestFit algorithm, so that the bench can read Phalanx's preferred
// topology against it on the same gangs and the same racks.
//
// The model is the bench's preferred-topology layout: zones of blocks of
// racks of identical nodes, each node with room for SlotsPerNode pods of
// the gangs' shape (one for the bench's 3-cpu pods on 4-cpu nodes), every
// node empty at the start, gangs admitted one after another in creation
// order and never finishing. A gang that cannot be admitted is skipped and
// the next one is tried (Kueue's BestEffortFIFO queueing); it does not
// retry later, as nothing frees capacity.
//
// BestFit, as Kueue describes it: the free capacity of every domain is
// counted bottom-up. For a required level, a gang goes to one domain of
// that level, or waits. For a preferred level, the levels are tried from
// that one upwards until one domain holds the gang; when not even a domain
// of the top level does, the gang is spread over several top-level
// domains. Wherever several domains are taken (at the top level, and on
// the way down inside the chosen domain), they are taken in decreasing
// order of free capacity, and the last one is swapped for the domain,
// among those not yet taken, whose free capacity is the smallest that
// still holds the remainder. Choosing one domain is the degenerate case:
// the smallest domain that holds the gang. Ties go to the first domain in
// the layout's order (zone, block, rack by index).
package kueuetas

import (
	"fmt"
	"sort"
)

// Level names a level of the layout.
type Level int

const (
	Zone Level = iota
	Block
	Rack
	Host
)

func (l Level) String() string {
	switch l {
	case Zone:
		return "zone"
	case Block:
		return "block"
	case Rack:
		return "rack"
	case Host:
		return "host"
	}
	return fmt.Sprintf("level(%d)", int(l))
}

// Layout is the cluster: Zones × RacksPerZone racks of NodesPerRack
// nodes; each zone's racks, in order, form blocks of RacksPerBlock.
type Layout struct {
	Zones, RacksPerZone, RacksPerBlock, NodesPerRack int
	// SlotsPerNode is how many of the gangs' pods fit on one node; 0
	// means 1.
	SlotsPerNode int
}

// Request is the gangs' topology request.
type Request struct {
	// Level is the annotated level.
	Level Level
	// Required: the gang must fit in one domain of Level. Otherwise Level
	// is preferred, with the climb described in the package comment.
	Required bool
}

// Placement is where one gang went: pods per rack (the racks' indices
// in the layout's order), nil when it was not admitted.
type Placement map[int]int

// Result is a simulated run.
type Result struct {
	Gangs, Placed int
	// OneRack counts placed gangs inside one rack; MeanRacks and MaxRacks
	// are over the placed gangs.
	OneRack   int
	MeanRacks float64
	MaxRacks  int
	// OutsideBlock counts placed gangs spread over more than one block.
	OutsideBlock int
	// Racks whose free slots, after the run, hold a NextGang-pod gang
	// (CanHost), hold at least one pod but not all (Fragmented), or none
	// (Full).
	NextGang, CanHost, Fragmented, Full int
	// Placements, one per gang in order.
	Placements []Placement
}

// domain is a node of the layout's tree; leaves are racks (their hosts
// are interchangeable: every host of a rack has the same room).
type domain struct {
	level    Level
	index    int // the rack's index, for racks; order among siblings otherwise
	children []*domain
	free     int // free slots, kept up to date bottom-up
	parent   *domain
}

type cluster struct {
	zones []*domain
	racks []*domain
}

func build(l Layout) *cluster {
	slots := l.SlotsPerNode
	if slots <= 0 {
		slots = 1
	}
	per := l.RacksPerBlock
	if per <= 0 {
		per = l.RacksPerZone
	}
	c := &cluster{}
	for z := 0; z < l.Zones; z++ {
		zone := &domain{level: Zone, index: z}
		c.zones = append(c.zones, zone)
		var block *domain
		for r := 0; r < l.RacksPerZone; r++ {
			if r%per == 0 {
				block = &domain{level: Block, index: r / per, parent: zone}
				zone.children = append(zone.children, block)
			}
			rack := &domain{level: Rack, index: len(c.racks), free: l.NodesPerRack * slots, parent: block}
			block.children = append(block.children, rack)
			c.racks = append(c.racks, rack)
			block.free += rack.free
			zone.free += rack.free
		}
	}
	return c
}

// at lists the domains of a level in the layout's order.
func (c *cluster) at(l Level) []*domain {
	var out []*domain
	var walk func(d *domain)
	walk = func(d *domain) {
		if d.level == l {
			out = append(out, d)
			return
		}
		for _, ch := range d.children {
			walk(ch)
		}
	}
	for _, z := range c.zones {
		walk(z)
	}
	return out
}

// tightest is the domain with the least free capacity that still holds n,
// the first such in order on ties; nil when none does.
func tightest(ds []*domain, n int) *domain {
	var best *domain
	for _, d := range ds {
		if d.free >= n && (best == nil || d.free < best.free) {
			best = d
		}
	}
	return best
}

// bestFit splits n pods over ds: decreasing free capacity, the last
// domain swapped for the tightest one among those not yet taken. It
// returns the pods per chosen domain, or nil when ds cannot hold n.
func bestFit(ds []*domain, n int) map[*domain]int {
	sorted := append([]*domain(nil), ds...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].free > sorted[j].free })
	out := map[*domain]int{}
	left := n
	for i, d := range sorted {
		if left == 0 {
			break
		}
		if d.free >= left {
			last := tightest(sorted[i:], left)
			out[last] = left
			left = 0
			break
		}
		if d.free == 0 {
			break
		}
		out[d] = d.free
		left -= d.free
	}
	if left > 0 {
		return nil
	}
	return out
}

// descend places n pods inside d, level by level, best fit at each, and
// records the pods per rack.
func descend(d *domain, n int, into Placement) {
	if d.level == Rack {
		into[d.index] += n
		return
	}
	for ch, k := range bestFit(d.children, n) {
		descend(ch, k, into)
	}
}

// take removes a placement's pods from the free capacity.
func (c *cluster) take(p Placement) {
	for r, k := range p {
		for d := c.racks[r]; d != nil; d = d.parent {
			d.free -= k
		}
	}
}

// Place finds where one gang of n pods goes under req, without taking the
// capacity; nil when it is not admitted.
func (c *cluster) place(n int, req Request) Placement {
	level := req.Level
	if level == Host {
		// Hosts of a rack are alike here; a host-level request is
		// modelled as the rack holding it (only the rack counts).
		level = Rack
	}
	for l := level; l >= Zone; l-- {
		if one := tightest(c.at(l), n); one != nil {
			p := Placement{}
			descend(one, n, p)
			return p
		}
		if req.Required {
			return nil
		}
	}
	split := bestFit(c.zones, n)
	if split == nil {
		return nil
	}
	p := Placement{}
	for z, k := range split {
		descend(z, k, p)
	}
	return p
}

// Simulate admits the gangs in order under req and measures the result,
// nextGang being the size of the hypothetical next gang that every rack
// is asked to host.
func Simulate(l Layout, sizes []int, req Request, nextGang int) Result {
	c := build(l)
	res := Result{Gangs: len(sizes), NextGang: nextGang}
	total := 0
	for _, n := range sizes {
		p := c.place(n, req)
		res.Placements = append(res.Placements, p)
		if p == nil {
			continue
		}
		c.take(p)
		res.Placed++
		total += len(p)
		res.MaxRacks = max(res.MaxRacks, len(p))
		if len(p) == 1 {
			res.OneRack++
		}
		blocks := map[*domain]bool{}
		for r := range p {
			blocks[c.racks[r].parent] = true
		}
		if len(blocks) > 1 {
			res.OutsideBlock++
		}
	}
	if res.Placed > 0 {
		res.MeanRacks = float64(total) / float64(res.Placed)
	}
	for _, r := range c.racks {
		switch {
		case r.free >= nextGang:
			res.CanHost++
		case r.free > 0:
			res.Fragmented++
		default:
			res.Full++
		}
	}
	return res
}
