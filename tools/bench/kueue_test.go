package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/phalanx-sched/phalanx/tools/bench/kueuetas"
)

// The Kueue TAS column of the preferred-topology table: the stream of the
// quick and full cases under Kueue's BestFit with a preferred rack (levels
// zone, block, rack, host), a required block and a required rack.
// go test ./tools/bench -run TestKueueBestFitOnThePreferredStream -v prints it.
func TestKueueBestFitOnThePreferredStream(t *testing.T) {
	for _, quick := range []bool{true, false} {
		c := findCase(t, Cases(quick), "_PreferredRack_RequiredBlock")
		assert.Equal(t, "3", c.PodCPU, "one pod per 4-cpu node, as the simulation assumes")
		for _, v := range []struct {
			name string
			req  kueuetas.Request
		}{
			{"preferred rack", kueuetas.Request{Level: kueuetas.Rack}},
			{"required block", kueuetas.Request{Level: kueuetas.Block, Required: true}},
			{"required rack", kueuetas.Request{Level: kueuetas.Rack, Required: true}},
		} {
			r := KueueBestFit(c, v.req)
			t.Logf("%s, Kueue BestFit, %s: %d/%d placed, %d in one rack, %.2f racks per gang (max %d), %d across blocks; %d of %d racks can host a %d-pod gang, %d fragmented, %d full",
				c.Name, v.name, r.Placed, r.Gangs, r.OneRack, r.MeanRacks, r.MaxRacks, r.OutsideBlock,
				r.CanHost, r.CanHost+r.Fragmented+r.Full, r.NextGang, r.Fragmented, r.Full)
			assert.Equal(t, c.NodeCount()/c.NodesPerRack, r.CanHost+r.Fragmented+r.Full)
			if v.req.Required && v.req.Level == kueuetas.Rack {
				// A third of the gangs are larger than a rack.
				assert.Less(t, r.Placed, r.Gangs)
			} else {
				// 86 pods per 128 nodes: every gang is admitted.
				assert.Equal(t, r.Gangs, r.Placed, v.name)
			}
		}
	}
}
