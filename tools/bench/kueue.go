package bench

import (
	"github.com/phalanx-sched/phalanx/tools/bench/kueuetas"
)

// KueueBestFit computes offline, on a case's layout and gang stream, where
// Kueue's TAS BestFit algorithm would put the gangs under req
// (tools/bench/kueuetas). It assumes the preferred-topology cases' shape:
// one pod per node, every node empty at the start.
func KueueBestFit(c Case, req kueuetas.Request) kueuetas.Result {
	l := kueuetas.Layout{Zones: c.Zones, RacksPerZone: c.RacksPerZone, RacksPerBlock: c.RacksPerBlock, NodesPerRack: c.NodesPerRack, SlotsPerNode: 1}
	return kueuetas.Simulate(l, c.gangSizes(), req, c.nextGang())
}
