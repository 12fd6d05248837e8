package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/phalanx-sched/phalanx/tools/bench"
	"github.com/phalanx-sched/phalanx/tools/bench/report"
)

// Every quick case runs under Phalanx; the upstream and ceiling arms, whose
// harness paths change little with the case's shape, run on one case of
// each kind (plain gangs, rack-constrained gangs, preemption, DRA
// devices): each arm is a fresh API server, and running all of them took
// two minutes of CI.
var benchComparisonCases = map[string]bool{
	"GangScheduling/200Nodes_20Gangs_60Pods":          true,
	"TopologyAwareScheduling/200Nodes_10Gangs_40Pods": true,
	"Preemption/20Nodes_5LowGangs_20Pods_8PodGang":    true,
	// Devices change every arm's path: the ceiling writes the claims, and
	// upstream allocates them in its DynamicResources plugin. The
	// extended-resource twin runs under Phalanx only.
	"GangScheduling/100Nodes_10Gangs_80Pods_4GPUsPerPod_DRA": true,
}

// TestBenchQuick runs `phalanx-sim bench --quick` through tools/bench: every
// quick case under Phalanx (in-process), and some (benchComparisonCases)
// under upstream kube-scheduler v1.37.2 (child process, native
// scheduling.k8s.io/v1beta1 PodGroups, gates GenericWorkload and TopologyAwareWorkloadScheduling, plus
// PodGroupPreemptionPolicy on preemption cases) and the bind ceiling, each
// on a fresh sandbox. The gang and TAS cases run with pods precreated, the
// mixed-size TAS sequence with pods created while the scheduler runs
// (live), the preemption case always live (the ceiling does not apply).
// It asserts the placements, never the timings: every pod bound, every
// gang all-or-nothing, every rack constraint kept, no two members of an
// anti-affine gang on one node, no node overcommitted;
// for Phalanx on the preemption case, victims evicted as whole gangs; on
// the DRA case (GPUs published as ResourceSlices, claims made from a
// template), every bound pod's claim allocated on its node's devices and
// no device twice, also for the ceiling, which allocates as it binds (its
// extended-resource twin runs under Phalanx only); and
// that the harness observed what it reports (attempts from the schedulers'
// metrics, peak memory, rack fragmentation).
func TestBenchQuick(t *testing.T) {
	ctx := context.Background()
	h, err := bench.New(ctx, bench.Options{WorkDir: t.TempDir(), Logf: t.Logf})
	require.NoError(t, err, "set up the harness (builds kube-scheduler with the go tool)")
	defer h.Close()

	var results []report.Result
	compared := 0
	for _, c := range bench.Cases(true) {
		if benchComparisonCases[c.Name] {
			compared++
		}
		if c.RacksPerBlock > 0 {
			// The preferred-topology stream: its required-rack variant
			// leaves the gangs larger than a rack pending by design, and
			// its preferred variant has no upstream or ceiling arm.
			// TestBenchPreferredQuick runs the variant that matters.
			continue
		}
		if strings.Contains(c.Name, "MixedSizes") {
			c.Arrival = report.ArrivalLive
		}
		for _, arm := range bench.DefaultArms {
			if arm != bench.ArmPhalanx && !benchComparisonCases[c.Name] {
				continue
			}
			t.Run(c.Name+"/"+string(arm), func(t *testing.T) {
				r := h.RunCase(ctx, c, arm, 1)
				results = append(results, r)
				if c.Preemption != nil && arm == bench.ArmCeiling {
					assert.NotEmpty(t, r.Skipped, "the bind ceiling does not apply to preemption")
					return
				}
				require.Empty(t, r.Error, "the arm ran")
				v := r.Verdict
				assert.Equal(t, "all bound", r.Stop)
				assert.Equal(t, c.PodCount(), v.Bound, "every pod bound")
				assert.Equal(t, c.GangCount(), v.CompleteGroups, "every gang complete")
				assert.Zero(t, v.PartialGroups, "no gang partially bound: %v", v.Problems)
				assert.Zero(t, v.TopologyViolations, "every gang inside one rack: %v", v.Problems)
				assert.Zero(t, v.AntiAffinityViolations, "no two members of an anti-affine gang on one node: %v", v.Problems)
				assert.Zero(t, v.OvercommittedNodes, "no node overcommitted: %v", v.Problems)
				assert.Zero(t, v.UnknownNodes, "%v", v.Problems)
				assert.Zero(t, v.DeviceViolations, "every bound pod holds its devices, on its node, none twice: %v", v.Problems)
				assert.True(t, v.OK())

				if c.Arrival == report.ArrivalLive || c.Preemption != nil {
					assert.Equal(t, report.ArrivalLive, r.Arrival)
					assert.Positive(t, r.CreateSeconds, "the live creation observed")
				} else {
					assert.Equal(t, report.ArrivalPrecreated, r.Arrival)
				}
				if c.TopologyKey != "" {
					require.NotNil(t, r.Fragmentation, "rack fragmentation computed")
					assert.Equal(t, c.Zones*c.RacksPerZone, r.Fragmentation.Domains)
				}
				if c.Preemption != nil {
					require.NotNil(t, r.Preemption, "victims counted")
					p := r.Preemption
					t.Logf("%s: %d victim pods, %d of %d low gangs evicted whole, %d partial gangs left", arm, p.VictimPods, p.VictimGangs, p.LowGangs, p.PartialGangs)
					if arm == bench.ArmPhalanx {
						assert.Positive(t, p.VictimPods, "the high-priority gang fit only by preemption")
						assert.Zero(t, p.PartialGangs, "Phalanx evicts whole gangs: %v", p.Problems)
						assert.Equal(t, p.VictimGangs*c.Preemption.LowGangSize, p.VictimPods, "every victim belongs to a gang evicted whole")
					}
				}

				require.NotNil(t, r.Scheduler, "the scheduler's metrics observed")
				assert.GreaterOrEqual(t, r.Scheduler.AttemptsPerBoundPod, 1.0, "a bound pod took at least one attempt (%s)", r.Scheduler.Source)
				assert.Positive(t, r.PeakRSSBytes, "peak memory observed")
				switch arm {
				case bench.ArmUpstream:
					gates := bench.DefaultUpstreamGates
					if c.UpstreamGates != "" {
						gates += "," + c.UpstreamGates
					}
					assert.Equal(t, report.ScopeScheduler, r.MemoryScope)
					assert.Equal(t, gates, r.Gates)
					assert.Positive(t, r.SchedulerCPUSeconds, "the child's CPU time observed")
					if c.GangCount() > 0 {
						assert.Positive(t, r.Scheduler.PodGroupAttempts, "upstream placed the gangs in its pod-group cycle")
					}
				case bench.ArmPhalanx:
					assert.Equal(t, report.ScopeHarness, r.MemoryScope)
					assert.Zero(t, r.Scheduler.PodGroupAttempts, "Phalanx does not use upstream's pod-group cycle")
					if c.Preemption == nil && c.GangCount() > 0 && c.Arrival != report.ArrivalLive {
						// Members pass from their gang's stored plan: a
						// gang is planned about once, not once per member.
						// A race with a bind may cost a gang a second plan.
						assert.LessOrEqual(t, r.Scheduler.Plans, 2*float64(c.GangCount()), "plans for %d gangs of %d pods", c.GangCount(), c.PodCount())
					}
				}
			})
		}
	}
	require.Equal(t, len(benchComparisonCases), compared, "every comparison case is a quick case")
	var out strings.Builder
	require.NoError(t, report.WriteTable(&out, results))
	t.Logf("quick benchmark (timings are not asserted):\n%s", out.String())
}

// quickPreferredCase is the quick preferred-topology stream: a preferred
// rack inside a required block.
func quickPreferredCase(t *testing.T) *bench.Case {
	t.Helper()
	for _, q := range bench.Cases(true) {
		if q.RacksPerBlock > 0 && len(q.PreferredTopology) > 0 {
			return &q
		}
	}
	require.FailNow(t, "the quick preferred case exists")
	return nil
}

// assertPreferredStreamPlaced checks a run of the preferred stream: every
// pod bound, every gang whole inside one block, and every gang one rack
// holds in one rack.
func assertPreferredStreamPlaced(t *testing.T, c *bench.Case, r report.Result) {
	t.Helper()
	assert.Equal(t, "all bound", r.Stop)
	assert.Equal(t, c.PodCount(), r.Verdict.Bound, "every pod bound")
	assert.Equal(t, c.GangCount(), r.Verdict.CompleteGroups, "every gang complete")
	assert.Zero(t, r.Verdict.TopologyViolations, "every gang inside one block: %v", r.Verdict.Problems)
	assert.True(t, r.Verdict.OK(), "%v", r.Verdict.Problems)
	require.NotNil(t, r.Spread, "racks per gang counted")
	small := 0
	for _, size := range c.GangSizes {
		if size <= c.NodesPerRack {
			small++
		}
	}
	assert.Equal(t, small, r.Spread.OneDomain, "every gang a rack holds is in one rack")
}

// TestBenchPreferredQuick runs the quick preferred-topology stream (12
// mixed gangs on 16 racks of 8 one-pod nodes in blocks of 4, a third of
// the gangs larger than a rack) with a preferred rack inside a required
// block, under Phalanx: every gang binds whole inside one block, and every
// gang that one rack can hold lands in one rack (with room on an empty
// cluster of 16 racks, best fit never needs to split one).
func TestBenchPreferredQuick(t *testing.T) {
	ctx := context.Background()
	h, err := bench.New(ctx, bench.Options{WorkDir: t.TempDir(), Logf: t.Logf})
	require.NoError(t, err)
	defer h.Close()
	c := quickPreferredCase(t)
	r := h.RunCase(ctx, *c, bench.ArmPhalanx, 1)
	require.Empty(t, r.Error)
	assertPreferredStreamPlaced(t, c, r)
}

// TestBenchKueueTASQuick runs the quick preferred-topology stream through
// the kueue-tas arm: Kueue v0.17.0's own manager with its TAS on chooses
// every pod's node when it admits the gang's Job (asked for a preferred
// rack, the nearest request Kueue has to "a rack within a required
// block"), and upstream kube-scheduler binds the pods there. Every gang
// binds whole inside one block, and every gang that one rack holds lands
// in one rack: kube-scheduler alone spreads pods over racks, so this holds
// only if Kueue's TAS placed them.
func TestBenchKueueTASQuick(t *testing.T) {
	ctx := context.Background()
	h, err := bench.New(ctx, bench.Options{WorkDir: t.TempDir(), Logf: t.Logf,
		Arms: []bench.Arm{bench.ArmKueueTAS}, Kueue: kueueBinary(t)})
	require.NoError(t, err, "set up the harness (builds kube-scheduler with the go tool)")
	defer h.Close()
	c := quickPreferredCase(t)
	r := h.RunCase(ctx, *c, bench.ArmKueueTAS, 1)
	require.Empty(t, r.Error)
	require.Empty(t, r.Skipped)
	assertPreferredStreamPlaced(t, c, r)
	require.NotNil(t, r.Scheduler, "kube-scheduler's metrics observed")
	assert.GreaterOrEqual(t, r.Scheduler.AttemptsPerBoundPod, 1.0)
	assert.Equal(t, report.ScopeScheduler, r.MemoryScope)
	assert.Positive(t, r.ControllerCPUSeconds, "Kueue's CPU over the window measured")
	assert.Positive(t, r.ControllerPeakRSSBytes, "Kueue's memory measured")
	t.Logf("Kueue's manager: %.2fs CPU in the window, peak RSS %d MiB", r.ControllerCPUSeconds, r.ControllerPeakRSSBytes>>20)
	var out strings.Builder
	require.NoError(t, report.WriteTable(&out, []report.Result{r}))
	t.Logf("kueue-tas on %s (timings are not asserted):\n%s", c.Name, out.String())
}
