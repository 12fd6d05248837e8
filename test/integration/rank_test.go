package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
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

// TestRankOrderedGang: an 8-member ranked gang on 2 nodes of 4 slots puts
// ranks 0-3 on one node and 4-7 on the other, whatever order the pods'
// UIDs sort in; a rank its controller re-creates goes back to its node
// although best fit alone would pick another; and a ranked gang that
// preempts lands in the same order on the nodes it freed.
func TestRankOrderedGang(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, NodeAgent: true, Topology: &sandbox.Topology{
		Zones: 1, RacksPerZone: 1, NodesPerRack: 2, CPU: "4", Memory: "32Gi", Pods: 110}})
	ctx := context.Background()
	ns := namespace(t, c)
	// minCount 6 of 8, so that a re-created member joins a running gang
	// while another is missing (below).
	createPodGroup(t, c, ns, rackGang("ring", 6, sandbox.RackLabel))

	rankOf := interleavedRanks(t, c, ns, "ring", "")
	eventually(t, 30*time.Second, "the 8 ranks bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "ring-") == 8, nil })

	nodeOfRank := checkFourPerNode(t, c, ns, rankOf)
	if t.Failed() {
		return
	}

	// Ranks 1 (first node) and 5 (second node) go; only rank 5 comes
	// back, as a new pod. Both nodes have one slot free, and best fit
	// breaks the tie by name: the first node. Rank 5 returns to its own.
	byRank := map[int]string{}
	for name, r := range rankOf {
		byRank[r] = name
	}
	for _, r := range []int{1, 5} {
		require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(ctx, byRank[r], metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	}
	eventually(t, 30*time.Second, "ranks 1 and 5 gone", func() (bool, error) { return boundWithPrefix(t, c, ns, "ring-") == 6, nil })
	again := member{name: "ring-rank5-again", labels: inGroup("ring"), cpu: "1"}.pod()
	again.Annotations = map[string]string{v1alpha1.RankAnnotation: "5"}
	_, err := c.Client.CoreV1().Pods(ns).Create(ctx, again, metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 30*time.Second, "the re-created rank bound", func() (bool, error) {
		_, ok := boundPods(t, c, ns)[again.Name]
		return ok, nil
	})
	assert.Equal(t, nodeOfRank[5], boundPods(t, c, ns)[again.Name], "rank 5 returns to its node (rank 1's node sorts first): %v", nodeOfRank)

	// A ranked gang that must preempt lands in rank order on the nodes it
	// freed, as on free ones.
	require.NoError(t, c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}))
	createPriorityClasses(t, c,
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: 10},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000})
	eventually(t, 30*time.Second, "the ring's pods gone", func() (bool, error) { return len(boundPods(t, c, ns)) == 0, nil })
	for i := range 8 {
		createPods(t, c, ns, member{name: fmt.Sprintf("filler-%d", i), cpu: "1", priorityClass: "low"})
	}
	waitBound(t, c, ns, "filler-", 8)
	urgent := gangPG("urgent", 8)
	urgent.Spec.PriorityClassName = "high"
	createPodGroup(t, c, ns, urgent)
	rankOf = interleavedRanks(t, c, ns, "urgent", "high")
	waitBound(t, c, ns, "urgent-", 8)
	checkFourPerNode(t, c, ns, rankOf)
}

// interleavedRanks creates the 8 members of group (of 1 cpu, of
// priorityClass), gated, and gives them ranks against the order of their
// UIDs (the planner's order of interchangeable members), so that UID order
// would put ranks 0, 4, 1, 5 on the first of two nodes of 4 slots. It
// returns the rank of each pod by name once they are released.
func interleavedRanks(t *testing.T, c *sandbox.Cluster, ns, group, priorityClass string) map[string]int {
	t.Helper()
	ctx := context.Background()
	pods := make([]*corev1.Pod, 8)
	for i := range pods {
		m := member{name: fmt.Sprintf("%s-%d", group, i), labels: inGroup(group), cpu: "1", gated: true, priorityClass: priorityClass}
		p, err := c.Client.CoreV1().Pods(ns).Create(ctx, m.pod(), metav1.CreateOptions{})
		require.NoError(t, err)
		pods[i] = p
	}
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(string(a.UID), string(b.UID)) })
	interleaved := []int{0, 4, 1, 5, 2, 6, 3, 7}
	rankOf := map[string]int{}
	for i, p := range pods {
		p.Annotations = map[string]string{v1alpha1.RankAnnotation: strconv.Itoa(interleaved[i])}
		updated, err := c.Client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
		require.NoError(t, err)
		pods[i] = updated
		rankOf[p.Name] = interleaved[i]
	}
	for _, p := range pods {
		p.Spec.SchedulingGates = nil
		_, err := c.Client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
	return rankOf
}

// checkFourPerNode checks that ranks 0-3 share a node and 4-7 share
// another, and returns the node of each rank.
func checkFourPerNode(t *testing.T, c *sandbox.Cluster, ns string, rankOf map[string]int) map[int]string {
	t.Helper()
	nodeOfRank := map[int]string{}
	for name, node := range boundPods(t, c, ns) {
		if r, ok := rankOf[name]; ok {
			nodeOfRank[r] = node
		}
	}
	for r := 1; r < 8; r++ {
		if r == 4 {
			assert.NotEqual(t, nodeOfRank[0], nodeOfRank[4], "ranks 4-7 on the other node: %v", nodeOfRank)
			continue
		}
		assert.Equal(t, nodeOfRank[r-r%4], nodeOfRank[r], "rank %d shares a node with rank %d: %v", r, r-r%4, nodeOfRank)
	}
	return nodeOfRank
}
