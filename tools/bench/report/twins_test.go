package report

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTwins(t *testing.T) {
	sum := func(c, arm string, pps, cpu float64) Summary {
		return Summary{Case: c, Arrival: ArrivalPrecreated, Arm: arm, Runs: 1, Pods: 100, PodsPerSecond: pps, SchedulerCPU: cpu, APIWritesPerPod: 2}
	}
	sums := []Summary{
		sum("G/100Nodes_DRA", ArmUpstream, 50, 2),
		sum("G/100Nodes_ExtendedResource", ArmUpstream, 100, 1),
		sum("G/100Nodes_DRA", ArmCeiling, 400, 0),
		// The twin of the ceiling is missing from the run: no row.
		sum("G/200Nodes_AntiAffinity", ArmUpstream, 10, 1),
		sum("G/200Nodes", ArmUpstream, 20, 1),
	}
	twins := Twins(sums)
	require.Len(t, twins, 2)
	assert.Equal(t, "G/100Nodes_ExtendedResource", twins[0].Twin)
	assert.InDelta(t, 0.5, twins[0].PodsPerSecond, 1e-9, "DRA at half the twin's rate")
	assert.InDelta(t, 0.02, twins[0].CPUPerPod, 1e-9)
	assert.InDelta(t, 0.01, twins[0].TwinCPUPerPod, 1e-9)
	assert.Equal(t, "G/200Nodes", twins[1].Twin)

	var out strings.Builder
	require.NoError(t, writeTwins(&out, sums))
	assert.Contains(t, out.String(), "0.50×")
	assert.Contains(t, out.String(), "20.0ms")
}
