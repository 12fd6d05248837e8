package integration

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/phalanx-sched/phalanx/tools/bench"
	"github.com/phalanx-sched/phalanx/tools/bench/report"
	"github.com/phalanx-sched/phalanx/tools/bench/schedperf"
)

// TestUpstreamSchedulerPerfWorkloads replays upstream kube-scheduler
// v1.37.2's own scheduler_perf workloads (podgroup/gangscheduling,
// podgroup/basicscheduling, podgroup/tas and workload_preemption), read
// from the k8s.io/kubernetes module, under Phalanx: every workload
// upstream's integration test runs (label integration-test, not
// performance), on a fresh sandbox each, with upstream's own objects
// (scheduling.k8s.io/v1beta1 PodGroups, pods naming them in
// spec.schedulingGroup, no schedulerName) and Phalanx's profile serving
// default-scheduler. Every pod must be scheduled, every gang all or
// nothing and inside its rack, no node overcommitted, and the preemption
// workloads must have evicted. The 5,000-node workloads are `make
// upstream-perf`.
func TestUpstreamSchedulerPerfWorkloads(t *testing.T) {
	ctx := context.Background()
	dir, err := bench.SchedulerPerfDir(ctx)
	require.NoError(t, err)
	selected, err := schedperf.Select(dir, schedperf.Acceptance, schedperf.IntegrationFilter, nil)
	require.NoError(t, err, "read the workloads from %s", dir)
	seen := map[string]bool{}
	for _, s := range selected {
		seen[s.Case.Name] = true
	}
	for _, tc := range []string{"GangScheduling", "BasicScheduling", "TopologyAwareScheduling", "GangPreemptionBasic", "GangPreemptionPodGroups", "GangPreemptionAffinity"} {
		assert.True(t, seen[tc], "upstream's integration workloads include test case %s", tc)
	}

	h, err := bench.New(ctx, bench.Options{Arms: []bench.Arm{bench.ArmPhalanx}, WorkDir: t.TempDir(), Logf: t.Logf})
	require.NoError(t, err)
	defer h.Close()
	for _, s := range selected {
		t.Run(s.Name(), func(t *testing.T) {
			e, err := s.Expand()
			require.NoError(t, err)
			r := h.RunPerfWorkload(ctx, e, bench.ArmPhalanx, 1)
			require.Empty(t, r.Error, "the workload ran")
			v := r.Verdict
			assert.Equal(t, "all scheduled", r.Stop)
			assert.Zero(t, r.Unscheduled, "every pod the workload created and did not lose to preemption is scheduled")
			assert.Zero(t, v.PartialGroups, "no gang partially bound: %v", v.Problems)
			assert.Zero(t, v.TopologyViolations, "every gang inside one rack: %v", v.Problems)
			assert.Zero(t, v.OvercommittedNodes, "no node overcommitted: %v", v.Problems)
			assert.Zero(t, v.UnknownNodes, "%v", v.Problems)
			assert.Equal(t, v.Groups, v.CompleteGroups, "every judged group complete")
			assert.Positive(t, r.DurationSeconds, "the measured operation was timed")
			if strings.HasPrefix(s.Name(), "GangPreemption") {
				assert.Positive(t, r.Victims, "the preemptor gang fits only by evicting")
			}
			// Scheduled by Phalanx's plugins, not by upstream's pod-group
			// cycle: the gang wait is Phalanx's, and upstream's cycle
			// observed nothing.
			require.NotNil(t, r.Scheduler)
			assert.Zero(t, r.Scheduler.PodGroupAttempts, "upstream's pod-group cycle is off in Phalanx")
			if !strings.HasPrefix(s.Name(), "BasicScheduling") {
				_, waited := r.Histograms[report.HistogramKey("phalanx_group_scheduling_duration_seconds", nil)]
				assert.True(t, waited, "gang members waited in Phalanx's Permit")
			}
		})
	}
}

// TestUpstreamSchedulerPerfDRAWorkloads replays upstream v1.37.2's own
// dra scheduler_perf workloads of integration size under Phalanx: devices
// published as ResourceSlices and classes created from upstream's
// templates, claims from templates (made by upstream's resourceclaim
// controller) and shared claims, claims allocated before the measured
// pods, partitionable devices, consumable capacity, device taints,
// prioritized lists, extended resources backed by devices, and PodGroups
// sharing one claim, with the alpha and beta gates each workload asks
// for (the PodGroup workloads, under DRAWorkloadResourceClaims, run Phalanx
// with PhalanxDynamicResources, which reserves a PodGroup's claim for the
// PodGroup: 1,000 pods share one claim). Every pod must be scheduled, and
// every bound pod hold its claims, allocated on its node's devices, no
// device twice.
//
// Each workload costs a sandbox of its own (about 13 s on a loaded 2-core
// machine, for 18 workloads), so make test runs two: claims from a
// template on a partly used cluster, and PodGroups whose members share a
// claim. PHALANX_PERF_DRA_ALL=1 runs all of them, as does `phalanx-sim
// upstream-perf --configs dra,...` (docs/benchmarks.md).
func TestUpstreamSchedulerPerfDRAWorkloads(t *testing.T) {
	ctx := context.Background()
	dir, err := bench.SchedulerPerfDir(ctx)
	require.NoError(t, err)
	patterns := []string{"SchedulingWithResourceClaimTemplate/fast", "SharedPodGroupResourceClaim/fast"}
	if os.Getenv("PHALANX_PERF_DRA_ALL") != "" {
		patterns = nil
	}
	selected, err := schedperf.Select(dir, schedperf.DRA, schedperf.IntegrationFilter, patterns)
	require.NoError(t, err, "read the workloads from %s", dir)
	if patterns != nil {
		require.Len(t, selected, len(patterns), "upstream's dra workloads include %v", patterns)
	}
	require.NotEmpty(t, selected)

	h, err := bench.New(ctx, bench.Options{Arms: []bench.Arm{bench.ArmPhalanx}, WorkDir: t.TempDir(), Logf: t.Logf})
	require.NoError(t, err)
	defer h.Close()
	for _, s := range selected {
		t.Run(s.Name(), func(t *testing.T) {
			e, err := s.Expand()
			require.NoError(t, err)
			r := h.RunPerfWorkload(ctx, e, bench.ArmPhalanx, 1)
			require.Empty(t, r.Error, "the workload ran")
			v := r.Verdict
			assert.Equal(t, "all scheduled", r.Stop)
			assert.Zero(t, r.Unscheduled, "every pod the workload created is scheduled")
			assert.Zero(t, v.PartialGroups, "no gang partially bound: %v", v.Problems)
			assert.Zero(t, v.OvercommittedNodes, "no node overcommitted: %v", v.Problems)
			assert.Zero(t, v.DeviceViolations, "every bound pod holds its devices: %v", v.Problems)
			assert.True(t, v.OK(), "%v", v.Problems)
			assert.Positive(t, r.DurationSeconds, "the measured operation was timed")
		})
	}
}
