package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// TestPodLevelPreemptionStaysInTheGroupsDomain: a basic group's member is
// preempted for by pod-level DefaultPreemption. Its group already runs in
// rack 0, which is full; rack 1 holds a cheaper victim (lower priority).
// The victim must be chosen in rack 0, where the member may go: evicting in
// rack 1 would kill a pod for nothing and leave the member nominated, for
// good, to a node it can never use, and lower-priority pods would then stay
// pending beside free room.
func TestPodLevelPreemptionStaysInTheGroupsDomain(t *testing.T) {
	c := preemptionCluster(t, nil)
	createPriorityClasses(t, c, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "lowest"}, Value: 1})
	rackNodes(t, c, "n", 2, 1, "4", nil)
	ns := namespace(t, c)
	createPinnedPods(t, c, ns,
		pinned{"rack0-victim", "n-r0-n0", "2", "low"},
		pinned{"rack1-victim", "n-r1-n0", "3", "lowest"})
	waitBound(t, c, ns, "rack", 2)

	createPodGroup(t, c, ns, &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: v1alpha1.PodGroupSpec{
		SchedulingPolicy:      v1alpha1.PodGroupSchedulingPolicy{Basic: &v1alpha1.BasicSchedulingPolicy{}},
		SchedulingConstraints: &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(sandbox.RackLabel)},
		PriorityClassName:     "high",
	}})
	// Only rack 0 has room for the first member.
	createPods(t, c, ns, member{name: "b-0", labels: inGroup("b"), cpu: "2", priorityClass: "high"})
	waitBound(t, c, ns, "b-", 1)
	require.Equal(t, map[string]int{"n-rack-0": 1}, domainsOf(t, c, ns, "b-", sandbox.RackLabel))

	createPods(t, c, ns, member{name: "b-1", labels: inGroup("b"), cpu: "2", priorityClass: "high"})
	waitBound(t, c, ns, "b-", 2)
	assert.Equal(t, map[string]int{"n-rack-0": 2}, domainsOf(t, c, ns, "b-", sandbox.RackLabel))
	assert.Equal(t, []string{"rack1-victim"}, podNames(t, c, ns, "rack"), "only the victim in the group's rack was evicted")
}

// TestPodLevelPreemptionEvictsAllModeUnitsWhole: a plain high-priority pod
// preempts (pod by pod: PhalanxPreemption serves plain pods and
// basic-group members with upstream's evaluator) on a cluster whose only
// lower-priority pods form a disruptionMode-all gang spread over both
// nodes. An all-mode group is evicted entirely or not at all.
// Upstream's DefaultPreemption knows nothing of Phalanx groups: on its own
// it evicts the one member on the node it picked, leaving the gang split.
func TestPodLevelPreemptionEvictsAllModeUnitsWhole(t *testing.T) {
	c := preemptionCluster(t, nil)
	rackNodes(t, c, "n", 1, 2, "4", nil)
	ns := namespace(t, c)
	// High-priority fillers leave 2 cpu on each node, so the gang's two
	// members land on different nodes.
	createPinnedPods(t, c, ns, highFillers(2)...)
	waitBound(t, c, ns, "filler-", 2)
	lowAllModePair(t, c, ns)

	createPods(t, c, ns, member{name: "urgent", cpu: "2", priorityClass: "high"})
	waitBound(t, c, ns, "urgent", 1)
	eventually(t, 30*time.Second, "the whole all-mode gang evicted", func() (bool, error) {
		return len(podNames(t, c, ns, "unit-")) == 0, nil
	})
	assert.Len(t, podNames(t, c, ns, "filler-"), 2, "higher-priority pods stay")
}

// TestPodLevelPreemptionPrefersASinglePodToAUnit: a plain high-priority pod
// can go to a node where one low-priority pod must go, or to one where a
// member of a low-priority disruptionMode-all gang must go, which takes the
// gang's member on the other node with it. The unit counts as both its
// pods, so the single pod is evicted and the gang keeps running.
func TestPodLevelPreemptionPrefersASinglePodToAUnit(t *testing.T) {
	c := preemptionCluster(t, nil)
	rackNodes(t, c, "n", 1, 3, "4", nil)
	ns := namespace(t, c)
	createPinnedPods(t, c, ns, append(highFillers(3), pinned{"loner", "n-r0-n2", "2", "low"})...)
	waitBound(t, c, ns, "filler-", 3)
	waitBound(t, c, ns, "loner", 1)
	lowAllModePair(t, c, ns)

	createPods(t, c, ns, member{name: "urgent", cpu: "2", priorityClass: "high"})
	waitBound(t, c, ns, "urgent", 1)
	assert.Equal(t, "n-r0-n2", boundPods(t, c, ns)["urgent"])
	assert.Empty(t, podNames(t, c, ns, "loner"), "the single low-priority pod was the victim")
	consistently(t, 2*time.Second, "the all-mode gang untouched", func() bool { return len(podNames(t, c, ns, "unit-")) == 2 })
}

// TestCompositePreemptionNeedsItsBasicChildPlaced: a high-priority gang
// composite (minGroupCount 2) over a gang child that fits once a
// low-priority pod is evicted, and a basic child whose pod fits nowhere.
// A basic child counts for its composite only with a pod placed (Permit's
// rule, and upstream's minimum of 1 for basic groups); the planner behind
// preemption once counted it with none and evicted the low-priority pod
// for a hierarchy that Permit never let bind (randomized runner, seed
// 47467). No eviction unless the composite then binds.
func TestCompositePreemptionNeedsItsBasicChildPlaced(t *testing.T) {
	c := preemptionCluster(t, nil)
	addNodes(t, c, "n", 1, "4", 0)
	ctx := context.Background()
	ns := namespace(t, c)
	createPods(t, c, ns, member{name: "victim", cpu: "4", priorityClass: "low"})
	waitBound(t, c, ns, "victim", 1)
	pair := composite("pair", 2)
	pair.Spec.PriorityClassName = "high"
	_, err := c.Phalanx.SchedulingV1alpha1().CompositePodGroups(ns).Create(ctx, pair, metav1.CreateOptions{})
	require.NoError(t, err)
	fits := gangPG("fits", 1)
	fits.Spec.ParentCompositePodGroupName = ptr.To("pair")
	createPodGroup(t, c, ns, fits)
	createPodGroup(t, c, ns, &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "huge"}, Spec: v1alpha1.PodGroupSpec{
		SchedulingPolicy:            v1alpha1.PodGroupSchedulingPolicy{Basic: &v1alpha1.BasicSchedulingPolicy{}},
		ParentCompositePodGroupName: ptr.To("pair"),
	}})
	createPods(t, c, ns,
		member{name: "fits-0", labels: inGroup("fits"), cpu: "2", priorityClass: "high"},
		member{name: "huge-0", labels: inGroup("huge"), cpu: "100", priorityClass: "high"})
	failedSchedulingFor(t, c, ns, "huge-0")
	consistently(t, 10*time.Second, "no eviction for a composite that does not bind", func() bool {
		_, bound := boundPods(t, c, ns)["fits-0"]
		return len(podNames(t, c, ns, "victim")) == 1 || bound
	})
}

// pinned is a pod created on one node with a PriorityClass.
type pinned struct{ name, node, cpu, class string }

// createPinnedPods creates the pods without waiting for them (createPinned
// creates one plain pod and waits until it is bound).
func createPinnedPods(t *testing.T, c *sandbox.Cluster, ns string, pods ...pinned) {
	t.Helper()
	for _, f := range pods {
		p := pinnedFiller(f.name, f.node, f.cpu)
		p.Spec.PriorityClassName = f.class
		_, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// highFillers are n high-priority 2-cpu pods, filler-i on n-r0-ni.
func highFillers(n int) []pinned {
	var out []pinned
	for i := 0; i < n; i++ {
		out = append(out, pinned{fmt.Sprintf("filler-%d", i), fmt.Sprintf("n-r0-n%d", i), "2", "high"})
	}
	return out
}

// lowAllModePair creates the low-priority disruptionMode-all gang "unit"
// of two 2-cpu members and waits until both are bound.
func lowAllModePair(t *testing.T, c *sandbox.Cluster, ns string) {
	t.Helper()
	pg := gangPG("unit", 2)
	pg.Spec.PriorityClassName = "low"
	pg.Spec.DisruptionMode = &v1alpha1.DisruptionMode{All: &v1alpha1.AllDisruptionMode{}}
	createPodGroup(t, c, ns, pg)
	createPods(t, c, ns,
		member{name: "unit-0", labels: inGroup("unit"), cpu: "2", priorityClass: "low"},
		member{name: "unit-1", labels: inGroup("unit"), cpu: "2", priorityClass: "low"})
	waitBound(t, c, ns, "unit-", 2)
}
