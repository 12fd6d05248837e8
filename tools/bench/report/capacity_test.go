package report

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// rackNode is a node of 4 cpu / 8Gi / 110 pods in a rack.
func rackNode(name, rack string) *corev1.Node {
	n := node(name, rack)
	n.Status.Allocatable = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return n
}

func TestComputeFragmentation(t *testing.T) {
	// Two racks of two nodes; each node fits one 3-cpu pod.
	nodes := []*corev1.Node{rackNode("a1", "a"), rackNode("a2", "a"), rackNode("b1", "b"), rackNode("b2", "b"), rackNode("x", "")}
	big := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}
	tests := []struct {
		name     string
		pods     []*corev1.Pod
		gangSize int
		want     Fragmentation
	}{{
		name:     "an empty cluster can host the gang in every rack",
		gangSize: 2,
		want:     Fragmentation{TopologyKey: "rack", GangSize: 2, Domains: 2, CanHost: 2},
	}, {
		name:     "packing both pods into one rack keeps the other whole",
		pods:     []*corev1.Pod{pod("p0", "a1", "3"), pod("p1", "a2", "3")},
		gangSize: 2,
		want:     Fragmentation{TopologyKey: "rack", GangSize: 2, Domains: 2, CanHost: 1, Full: 1},
	}, {
		name:     "spreading one pod per rack fragments both racks",
		pods:     []*corev1.Pod{pod("p0", "a1", "3"), pod("p1", "b1", "3")},
		gangSize: 2,
		want:     Fragmentation{TopologyKey: "rack", GangSize: 2, Domains: 2, Fragmented: 2},
	}, {
		name:     "free cpu split over nodes below one pod's request is no room",
		pods:     []*corev1.Pod{pod("p0", "a1", "2"), pod("p1", "a2", "2"), pod("p2", "b1", "3"), pod("p3", "b2", "3")},
		gangSize: 1,
		want:     Fragmentation{TopologyKey: "rack", GangSize: 1, Domains: 2, Full: 2},
	}, {
		name:     "pending, finished and unlabelled-node pods hold nothing in a rack",
		pods:     []*corev1.Pod{pod("p0", "", "3"), withPhase(pod("p1", "a1", "3"), corev1.PodSucceeded), pod("p2", "x", "3")},
		gangSize: 2,
		want:     Fragmentation{TopologyKey: "rack", GangSize: 2, Domains: 2, CanHost: 2},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, ComputeFragmentation(nodes, tt.pods, "rack", tt.gangSize, big))
		})
	}
}

func TestComputeFragmentationCountsPodSlots(t *testing.T) {
	n := rackNode("a1", "a")
	n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("3")
	small := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	pods := []*corev1.Pod{pod("p0", "a1", "100m"), pod("p1", "a1", "100m")}
	f := ComputeFragmentation([]*corev1.Node{n}, pods, "rack", 2, small)
	assert.Equal(t, 1, f.Fragmented, "cpu has room for 38 more, but the node takes only one more pod")
}

func withPhase(p *corev1.Pod, phase corev1.PodPhase) *corev1.Pod {
	p.Status.Phase = phase
	return p
}

func TestCountVictims(t *testing.T) {
	now := metav1.Now()
	terminating := pod("b1", "n", "1")
	terminating.DeletionTimestamp = &now
	marked := pod("c0", "n", "1")
	marked.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}
	failed := withPhase(pod("c1", "n", "1"), corev1.PodFailed)
	low := []Group{
		{Name: "a", Members: []string{"a0", "a1"}, MinCount: 2},
		{Name: "b", Members: []string{"b0", "b1"}, MinCount: 2},
		{Name: "c", Members: []string{"c0", "c1"}, MinCount: 2},
		{Name: "d", Members: []string{"d0", "d1"}, MinCount: 2},
	}
	pods := []*corev1.Pod{
		pod("a0", "n", "1"), pod("a1", "n", "1"), // untouched
		pod("b0", "n", "1"), terminating, // split: one terminating, one running
		marked, failed, // evicted whole, still listed
		// d0 and d1 deleted: evicted whole
	}
	got := CountVictims(low, pods)
	assert.Equal(t, 4, got.LowGangs)
	assert.Equal(t, 8, got.LowPods)
	assert.Equal(t, 5, got.VictimPods, "b1, c0, c1, d0, d1")
	assert.Equal(t, 2, got.VictimGangs, "c and d")
	assert.Equal(t, 1, got.PartialGangs, "b")
	assert.Equal(t, 1, got.UntouchedGangs, "a")
	assert.False(t, got.WholeGangs())
	require.Len(t, got.Problems, 1)
	assert.Contains(t, got.Problems[0], "gang b: 1 of 2 members evicted")

	assert.True(t, CountVictims(low[:1], pods).WholeGangs(), "an untouched gang is whole")
}

func TestTablesShowArrivalPreemptionAndFragmentation(t *testing.T) {
	ok := Verdict{Pods: 4, Bound: 4, Groups: 1, CompleteGroups: 1}
	results := []Result{
		{Case: "Gang/x", Arrival: ArrivalPrecreated, Arm: ArmPhalanx, Run: 1, Pods: 4, PodsPerSecond: 100, Verdict: ok, Stop: "all bound"},
		{Case: "Gang/x", Arrival: ArrivalLive, Arm: ArmPhalanx, Run: 1, Pods: 4, PodsPerSecond: 40, CreateSeconds: 1.25, Verdict: ok, Stop: "all bound"},
		{Case: "Gang/x", Arrival: ArrivalLive, Arm: ArmUpstream, Run: 1, Pods: 4, PodsPerSecond: 20, Verdict: ok, Stop: "all bound"},
		{Case: "Preemption/x", Arrival: ArrivalLive, Arm: ArmPhalanx, Run: 1, Pods: 4, PodsPerSecond: 4, FirstGroupSeconds: 1.5, Verdict: ok, Stop: "all bound",
			Preemption: &Preemption{LowGangs: 5, LowPods: 20, VictimPods: 4, VictimGangs: 1, UntouchedGangs: 4}},
		{Case: "Preemption/x", Arrival: ArrivalLive, Arm: ArmUpstream, Run: 1, Pods: 4, PodsPerSecond: 2, FirstGroupSeconds: 3, Verdict: ok, Stop: "all bound",
			Preemption: &Preemption{LowGangs: 5, LowPods: 20, VictimPods: 5, VictimGangs: 1, PartialGangs: 1, UntouchedGangs: 3}},
		{Case: "Preemption/x", Arrival: ArrivalLive, Arm: ArmCeiling, Run: 1, Pods: 4, Skipped: "the bind ceiling does not preempt"},
		{Case: "TopologyAwareScheduling/x", Arrival: ArrivalPrecreated, Arm: ArmPhalanx, Run: 1, Pods: 4, PodsPerSecond: 9, Verdict: ok, Stop: "all bound",
			Fragmentation: &Fragmentation{TopologyKey: "rack", GangSize: 8, Domains: 6, CanHost: 3, Full: 3}},
	}
	sums := Summarize(results)
	require.Len(t, sums, 7, "precreated and live runs of one case and arm are separate rows")
	assert.Equal(t, ArrivalPrecreated, sums[0].Arrival)
	assert.Equal(t, ArrivalLive, sums[1].Arrival)
	assert.Equal(t, 40.0, sums[1].PodsPerSecond)

	ratios := Ratios(sums)
	var live []Ratio
	for _, r := range ratios {
		if r.Case == "Gang/x" && r.Arrival == ArrivalLive {
			live = append(live, r)
		}
	}
	require.Len(t, live, 1)
	assert.Equal(t, 2.0, live[0].PodsPerSecondVsUpstream, "live compared with live only")

	var buf bytes.Buffer
	require.NoError(t, WriteTable(&buf, results))
	out := buf.String()
	assert.Contains(t, out, "n/a: the bind ceiling does not preempt")
	assert.Contains(t, out, "1.25s", "a live run's creation time")
	assert.Contains(t, out, "partial gangs left")
	assert.Contains(t, out, "1 of 5", "gangs evicted whole")
	assert.Contains(t, out, "domains able to host it")
	assert.Contains(t, out, "8 pods")
	assert.NotContains(t, out, "VIOLATED", "a skipped arm is no failure")
}

func TestMedianPreemptionKeepsTheWorstSplit(t *testing.T) {
	p := medianPreemption([]Preemption{{VictimPods: 4}, {VictimPods: 8, PartialGangs: 1}, {VictimPods: 6}})
	require.NotNil(t, p)
	assert.Equal(t, 6, p.VictimPods)
	assert.Equal(t, 1, p.PartialGangs)
	assert.Nil(t, medianPreemption(nil))
}
