package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// lowGang creates a low-priority gang of n pods of cpu each, minimum
// minCount, with mutate applied to its PodGroup.
func lowGang(t *testing.T, c *sandbox.Cluster, ns, name string, minCount int32, n int, cpu string, mutate func(*v1alpha1.PodGroup)) {
	t.Helper()
	pg := gangPG(name, minCount)
	pg.Spec.PriorityClassName = "low"
	if mutate != nil {
		mutate(pg)
	}
	createPodGroup(t, c, ns, pg)
	for i := 0; i < n; i++ {
		createPods(t, c, ns, member{name: fmt.Sprintf("%s-%d", name, i), labels: inGroup(name), cpu: cpu, priorityClass: "low"})
	}
}

// lastBind is the latest PodScheduled transition among the pods of ns with
// prefix: when a gang bound whole became whole.
func lastBind(t *testing.T, c *sandbox.Cluster, ns, prefix string) time.Time {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var last time.Time
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Name, prefix) {
			continue
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue && cond.LastTransitionTime.After(last) {
				last = cond.LastTransitionTime.Time
			}
		}
	}
	require.False(t, last.IsZero(), "no %s* pod is bound", prefix)
	return last
}

// TestMinimumRuntimeDelaysPreemption: a low-priority gang with a minimum
// runtime of 5 s fills the cluster; a high-priority gang that needs half of
// it waits, saying until when, evicts nothing while the protection lasts,
// and preempts exactly what it needs once it ends.
func TestMinimumRuntimeDelaysPreemption(t *testing.T) {
	// preemptionCluster's, with the diagnostics explain reads.
	c := startCluster(t, sandbox.Options{Scheduler: true, NodeAgent: true, Diagnostics: true,
		Topology: &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 4, CPU: "4", Memory: "32Gi", Pods: 110}})
	createPriorityClasses(t, c,
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: 10},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000})
	ns := namespace(t, c)
	const minRuntime = 5 * time.Second
	lowGang(t, c, ns, "trained", 4, 4, "4", func(pg *v1alpha1.PodGroup) { pg.Spec.MinRuntimeSeconds = ptr.To(int32(minRuntime / time.Second)) })
	waitBound(t, c, ns, "trained-", 4)
	whole := lastBind(t, c, ns, "trained-")

	start := time.Now()
	highGang(t, c, ns, "job", 2, "4", nil)
	cond := waitGroupCondition(t, c, ns, "job", v1alpha1.PodGroupSchedulable, "protected by their minimum runtime until")
	until := whole.Add(minRuntime).UTC().Format(time.RFC3339)
	assert.Contains(t, cond.Message, "until "+until+" (minimum runtime 5s)", "the wait names when the gang became whole plus its minimum runtime")
	e := explainJSON(t, c, "podgroup", "job", "-n", ns).Items[0]
	if time.Now().Before(whole.Add(minRuntime - time.Second)) {
		// Asked while the protection lasts, explain gives the same wait.
		require.NotNil(t, e.Assessment)
		require.NotNil(t, e.Assessment.Preemption)
		assert.Contains(t, e.Assessment.Preemption.Reason, "until "+until+" (minimum runtime 5s)")
	} else {
		t.Log("explain answered after the protection ended; its wait is not checked")
	}
	eventually(t, 10*time.Second, "the waiting member's event gives the time", func() (bool, error) {
		return eventSince(t, c, ns, "job-0", "FailedScheduling", "minimum runtime 5s", start) ||
			eventSince(t, c, ns, "job-1", "FailedScheduling", "minimum runtime 5s", start), nil
	})

	// Binds are recorded to the second: the protection may end up to a
	// second before whole+5s.
	if left := time.Until(whole.Add(minRuntime - time.Second)); left > 0 {
		consistently(t, left, "the protected gang keeps all 4 pods", func() bool {
			return len(podNames(t, c, ns, "trained-")) == 4 && boundWithPrefix(t, c, ns, "job-") == 0
		})
	}
	waitBound(t, c, ns, "job-", 2)
	assert.Len(t, podNames(t, c, ns, "trained-"), 2, "once unprotected, exactly the room the job needs is preempted")
}

// TestSurplusMembersArePreemptedFirst: an elastic gang (minimum 2) runs 4
// members and another gang runs exactly its minimum of 2, younger and of the
// same priority. A high-priority gang that needs 2 nodes evicts the elastic
// gang's 2 members beyond its minimum, not the younger gang, which would
// then be broken. Lowering the elastic gang's minimum makes its members
// surplus at once. (Raising a minimum above the bound count is
// TestElasticGangGrowsInItsDomain's last step.)
func TestSurplusMembersArePreemptedFirst(t *testing.T) {
	c := preemptionCluster(t, &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 6, CPU: "4", Memory: "32Gi", Pods: 110})
	ctx := context.Background()
	ns := namespace(t, c)
	lowGang(t, c, ns, "elastic", 2, 4, "4", nil)
	waitBound(t, c, ns, "elastic-", 4)
	lowGang(t, c, ns, "steady", 2, 2, "4", nil)
	waitBound(t, c, ns, "steady-", 2)
	// The members the elastic gang grew by are its latest bound.
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	type bind struct {
		name string
		at   time.Time
	}
	var binds []bind
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, "elastic-") {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled {
					binds = append(binds, bind{p.Name, cond.LastTransitionTime.Time})
				}
			}
		}
	}
	require.Len(t, binds, 4)

	highGang(t, c, ns, "job", 2, "4", nil)
	waitBound(t, c, ns, "job-", 2)
	assert.Equal(t, []string{"steady-0", "steady-1"}, podNames(t, c, ns, "steady-"), "the gang at its minimum is untouched")
	left := podNames(t, c, ns, "elastic-")
	require.Len(t, left, 2, "exactly the 2 surplus members were preempted")
	for _, name := range left {
		for _, b := range binds {
			if b.name != name {
				continue
			}
			for _, o := range binds {
				if !slices.Contains(left, o.name) {
					assert.False(t, o.at.Before(b.at), "evicted %s was bound before kept %s", o.name, name)
				}
			}
		}
	}

	// Lowering the elastic gang's minimum to 1 makes one of its 2
	// remaining members surplus at once: a second high-priority gang takes
	// it rather than a member of the younger gang, which keeps that gang
	// at its minimum.
	pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "elastic", metav1.GetOptions{})
	require.NoError(t, err)
	pg.Spec.SchedulingPolicy.Gang.MinCount = 1
	_, err = c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Update(ctx, pg, metav1.UpdateOptions{})
	require.NoError(t, err)
	highGang(t, c, ns, "late", 1, "4", nil)
	waitBound(t, c, ns, "late-", 1)
	assert.Len(t, podNames(t, c, ns, "elastic-"), 1, "the member beyond the lowered minimum went")
	assert.Equal(t, []string{"steady-0", "steady-1"}, podNames(t, c, ns, "steady-"), "the gang at its minimum is untouched")
}

// TestElasticGangGrowsInItsDomain: an elastic gang (minimum 2) required in
// one zone and preferring one rack grows as room appears: into its
// preferred rack while it has room, then elsewhere in its zone, never into
// the other zone, although the other zone's free node sorts first by name.
// Raised above its bound count, its minimum makes it wait as a gang: one
// free node binds none of its 2 new members, a second binds both, and its
// running members stay where they are.
func TestElasticGangGrowsInItsDomain(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, NodeAgent: true,
		Topology: &sandbox.Topology{Zones: 2, RacksPerZone: 2, NodesPerRack: 3, CPU: "4", Memory: "32Gi", Pods: 110}})
	ctx := context.Background()
	ns := namespace(t, c)
	// Every node is taken but the first two of zone 1's rack 1, where the
	// gang starts.
	fillerOn := map[string]string{}
	for z := range 2 {
		for r := range 2 {
			for n := range 3 {
				node := fmt.Sprintf("node-z%d-r%d-n%d", z, r, n)
				if z == 1 && r == 1 && n < 2 {
					continue
				}
				fillerOn[node] = "fill-" + node
				filler(t, c, ns, fillerOn[node], node, 0)
			}
		}
	}
	waitBound(t, c, ns, "fill-", 10)
	pg := gangPG("elastic", 2)
	pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{
		Topology: topo(sandbox.ZoneLabel), PreferredTopology: topo(sandbox.RackLabel)}
	createPodGroup(t, c, ns, pg)
	grow := func(names ...string) {
		for _, name := range names {
			createPods(t, c, ns, member{name: name, labels: inGroup("elastic"), cpu: "4"})
		}
	}
	grow("elastic-0", "elastic-1")
	waitBound(t, c, ns, "elastic-", 2)
	assert.ElementsMatch(t, []string{"node-z1-r1-n0", "node-z1-r1-n1"}, []string{boundPods(t, c, ns)["elastic-0"], boundPods(t, c, ns)["elastic-1"]})

	// Room appears in the other zone, elsewhere in the gang's zone, and in
	// its rack.
	for _, node := range []string{"node-z0-r0-n0", "node-z1-r0-n0", "node-z1-r1-n2"} {
		deletePod(t, c, ns, fillerOn[node])
	}
	eventually(t, 30*time.Second, "the 3 fillers gone", func() (bool, error) { return len(podNames(t, c, ns, "fill-")) == 7, nil })
	grow("elastic-2")
	waitBound(t, c, ns, "elastic-", 3)
	assert.Equal(t, "node-z1-r1-n2", boundPods(t, c, ns)["elastic-2"], "a member beyond the minimum takes the gang's preferred rack")
	grow("elastic-3")
	waitBound(t, c, ns, "elastic-", 4)
	assert.Equal(t, "node-z1-r0-n0", boundPods(t, c, ns)["elastic-3"], "the rack full, it stays in the gang's zone")
	before := boundPods(t, c, ns)

	// Minimum 6 with 4 bound: the 2 new members wait for room for both.
	pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "elastic", metav1.GetOptions{})
	require.NoError(t, err)
	pg.Spec.SchedulingPolicy.Gang.MinCount = 6
	_, err = c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Update(ctx, pg, metav1.UpdateOptions{})
	require.NoError(t, err)
	grow("elastic-4", "elastic-5")
	deletePod(t, c, ns, fillerOn["node-z1-r0-n1"])
	consistently(t, 2*time.Second, "one free node in the zone binds neither new member", func() bool {
		return boundWithPrefix(t, c, ns, "elastic-") == 4
	})
	deletePod(t, c, ns, fillerOn["node-z1-r0-n2"])
	waitBound(t, c, ns, "elastic-", 6)
	after := boundPods(t, c, ns)
	for _, name := range []string{"elastic-0", "elastic-1", "elastic-2", "elastic-3"} {
		assert.Equal(t, before[name], after[name], "%s kept its node", name)
	}
	assert.ElementsMatch(t, []string{"node-z1-r0-n1", "node-z1-r0-n2"}, []string{after["elastic-4"], after["elastic-5"]})
	assert.Empty(t, podsOn(after, "node-z0-r0-n0"), "nothing of the gang in the other zone")
}

// podsOn lists the pods bound (by boundPods) to node.
func podsOn(bound map[string]string, node string) []string {
	var out []string
	for name, n := range bound {
		if n == node {
			out = append(out, name)
		}
	}
	return out
}
