package kueuetas

import (
	"reflect"
	"testing"
)

func frees(ds map[*domain]int) map[int]int {
	out := map[int]int{}
	for d, k := range ds {
		out[d.free] = k
	}
	return out
}

// Several domains: the largest first, and the last one is the tightest
// that holds the remainder, not the next largest.
func TestBestFitSwapsTheLastDomainForTheTightest(t *testing.T) {
	var ds []*domain
	for _, f := range []int{2, 5, 1, 4, 3} {
		ds = append(ds, &domain{level: Rack, free: f})
	}
	got := frees(bestFit(ds, 10))
	if want := map[int]int{5: 5, 4: 4, 1: 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("10 pods over 2,5,1,4,3: got %v, want %v", got, want)
	}
	got = frees(bestFit(ds, 3))
	if want := map[int]int{3: 3}; !reflect.DeepEqual(got, want) {
		t.Fatalf("3 pods: got %v, want the rack with exactly 3 free", got)
	}
	if bestFit(ds, 16) != nil {
		t.Fatal("16 pods fit in 15 slots")
	}
}

// 2 zones × 4 racks of 4 nodes, blocks of 2 racks.
var small = Layout{Zones: 2, RacksPerZone: 4, RacksPerBlock: 2, NodesPerRack: 4}

func TestPreferredRackTakesTheTightestRack(t *testing.T) {
	c := build(small)
	c.take(Placement{0: 3, 1: 1, 5: 2})
	// Racks free: 1, 3, 4, 4 | 4, 2, 4, 4. A gang of 2: rack 5 (2 free).
	if got := c.place(2, Request{Level: Rack}); !reflect.DeepEqual(got, Placement{5: 2}) {
		t.Fatalf("gang of 2: %v", got)
	}
	// A gang of 4: the first whole rack, rack 2.
	if got := c.place(4, Request{Level: Rack}); !reflect.DeepEqual(got, Placement{2: 4}) {
		t.Fatalf("gang of 4: %v", got)
	}
}

func TestPreferredRackClimbsToTheTightestBlock(t *testing.T) {
	c := build(small)
	c.take(Placement{0: 3, 1: 1, 5: 2})
	// Blocks free: z0b0 4 (1+3), z0b1 8, z1b0 6 (4+2), z1b1 8. A gang of 6
	// fits no rack; the tightest block holding it is z1b0: racks 4 (4
	// free) then 5 (2 free).
	if got := c.place(6, Request{Level: Rack}); !reflect.DeepEqual(got, Placement{4: 4, 5: 2}) {
		t.Fatalf("gang of 6: %v", got)
	}
	// A gang of 4 required in one rack still goes to a rack; a gang of 5
	// required in one rack is not admitted.
	if got := c.place(5, Request{Level: Rack, Required: true}); got != nil {
		t.Fatalf("gang of 5, rack required: %v", got)
	}
	// Required block: the tightest block, z1b0 with 6 free, racks by
	// decreasing free capacity, the last the tightest holding the rest.
	if got := c.place(5, Request{Level: Block, Required: true}); !reflect.DeepEqual(got, Placement{4: 4, 5: 1}) {
		t.Fatalf("gang of 5, block required: %v", got)
	}
}

func TestPreferredSpreadsOverZonesWhenNoZoneHoldsIt(t *testing.T) {
	c := build(small)
	c.take(Placement{0: 4, 1: 4, 2: 2, 4: 4, 5: 4})
	// Zones free: 6 (racks 2: 2, 3: 4) and 8 (racks 6, 7: 4 each). A gang
	// of 10 fits no zone: zone 1 whole, then the rest (2) in zone 0's
	// tightest rack, rack 2.
	got := c.place(10, Request{Level: Rack})
	if want := (Placement{6: 4, 7: 4, 2: 2}); !reflect.DeepEqual(got, want) {
		t.Fatalf("gang of 10: got %v, want %v", got, want)
	}
	if got := c.place(10, Request{Level: Zone, Required: true}); got != nil {
		t.Fatalf("gang of 10, zone required: %v", got)
	}
}

func TestSimulateCounts(t *testing.T) {
	// Gangs 3, 6, 4, 9 on 8 racks of 4. The 3 takes rack 0 (all racks
	// equal, the first); the 6 fits no rack and takes the first block with
	// 8 free, z0b1 (z0b0 has 5): 4 in rack 2, 2 in rack 3; the 4 takes
	// rack 1, the tightest rack with 4 free. The 9 fits no block, so the
	// zone: zone 1 (16 free), its blocks 8 + 1, the 1 in rack 6.
	res := Simulate(small, []int{3, 6, 4, 9}, Request{Level: Rack}, 4)
	if res.Placed != 4 || res.OneRack != 2 || res.MaxRacks != 3 || res.OutsideBlock != 1 {
		t.Fatalf("counts: %+v", res)
	}
	if want := (Placement{4: 4, 5: 4, 6: 1}); !reflect.DeepEqual(res.Placements[3], want) {
		t.Fatalf("gang of 9: got %v, want %v", res.Placements[3], want)
	}
	if res.MeanRacks != (1.0+2+1+3)/4 {
		t.Fatalf("mean racks %v", res.MeanRacks)
	}
	// Free after: racks 0..7 have 1, 0, 0, 2, 0, 0, 3, 4: one can host a
	// gang of 4 (rack 7), three are fragmented.
	if res.CanHost+res.Fragmented+res.Full != 8 {
		t.Fatalf("racks: %+v", res)
	}
	if res.CanHost != 1 || res.Fragmented != 3 {
		t.Fatalf("can host %d fragmented %d", res.CanHost, res.Fragmented)
	}
	// The same stream with the rack required admits no gang larger than a
	// rack.
	req := Simulate(small, []int{3, 6, 4, 9}, Request{Level: Rack, Required: true}, 4)
	if req.Placed != 2 || req.Placements[1] != nil || req.Placements[3] != nil {
		t.Fatalf("rack required: %+v", req)
	}
}
