package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// boundTo creates m bound by nodeName to node, past the scheduler.
func boundTo(t *testing.T, c *sandbox.Cluster, ns, node string, m member, mutate func(*corev1.Pod)) {
	t.Helper()
	pod := m.pod()
	pod.Spec.NodeName = node
	if mutate != nil {
		mutate(pod)
	}
	_, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err, "create pod %s", m.name)
}

func nodeNames(t *testing.T, c *sandbox.Cluster) []string {
	t.Helper()
	nodes, err := c.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, n := range nodes.Items {
		out = append(out, n.Name)
	}
	return out
}

// TestGroupLabelDoesNotRaiseAVictimsPriority: a priority-0 pod that joins a
// PodGroup of priority 1e9 stays a priority-0 victim, for a gang (group
// preemption) and for a plain pod (pod-level preemption) alike.
func TestGroupLabelDoesNotRaiseAVictimsPriority(t *testing.T) {
	c := preemptionCluster(t, &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 2, CPU: "4", Memory: "32Gi", Pods: 110})
	ns := namespace(t, c)
	vip := gangPG("vip", 1)
	vip.Spec.Priority = ptr.To(int32(1_000_000_000))
	createPodGroup(t, c, ns, vip)
	// The pods run first and join the group afterwards, as a user relabelling
	// running pods would; pinning them with the label set is the same state
	// without a race against the scheduler's informer.
	for i, node := range nodeNames(t, c) {
		boundTo(t, c, ns, node, member{name: fmt.Sprintf("squatter-%d", i), labels: inGroup("vip"), cpu: "4"}, nil)
	}
	waitBound(t, c, ns, "squatter-", 2)
	squatter, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "squatter-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, int32(0), ptr.Deref(squatter.Spec.Priority, -1), "precondition: admission gave the squatters priority 0")

	t.Run("a gang of priority 1000 evicts a squatter for its room", func(t *testing.T) {
		highGang(t, c, ns, "job", 1, "4", nil)
		waitBound(t, c, ns, "job-", 1)
		assert.Len(t, podNames(t, c, ns, "squatter-"), 1)
	})
	t.Run("a plain pod of priority 1000 evicts the other squatter for its room", func(t *testing.T) {
		createPods(t, c, ns, member{name: "urgent", cpu: "4", priorityClass: "high"})
		waitBound(t, c, ns, "urgent", 1)
		assert.Empty(t, podNames(t, c, ns, "squatter-"))
		assert.Equal(t, 1, boundWithPrefix(t, c, ns, "job-"), "the gang, at the same priority, keeps running")
	})
}

// TestOverflowingNodeDoesNotStopOtherGangs: two pods of 5Ei memory bound to
// one node wrap its requested memory negative in the scheduler. Gangs are
// still planned on the other nodes, the node gets no group pods, and the
// node carries one Warning event that names the problem.
func TestOverflowingNodeDoesNotStopOtherGangs(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	addNodes(t, c, "n", 3, "4", 0)
	ns := namespace(t, c)
	for i := range 2 {
		boundTo(t, c, ns, "n-0", member{name: fmt.Sprintf("huge-%d", i), cpu: "100m"}, func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("5Ei")
		})
	}
	for _, name := range []string{"first", "second"} {
		createPodGroup(t, c, ns, gangPG(name, 2))
		createPods(t, c, ns,
			member{name: name + "-0", labels: inGroup(name), cpu: "1"},
			member{name: name + "-1", labels: inGroup(name), cpu: "1"})
		waitBound(t, c, ns, name+"-", 2)
	}
	for pod, node := range boundPods(t, c, ns) {
		if !strings.HasPrefix(pod, "huge-") {
			assert.NotEqual(t, "n-0", node, "gang pod %s was placed on the overflowed node", pod)
		}
	}

	var warnings []string
	eventually(t, 30*time.Second, "a Warning event on n-0", func() (bool, error) {
		evs, err := c.Client.EventsV1().Events(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{FieldSelector: "regarding.name=n-0,reason=PhalanxNodeTotalsOverflow"})
		if err != nil {
			return false, err
		}
		warnings = warnings[:0]
		for _, e := range evs.Items {
			count := 1
			if e.Series != nil {
				count = int(e.Series.Count)
			}
			for range count {
				warnings = append(warnings, e.Note)
			}
		}
		return len(warnings) > 0, nil
	})
	require.Len(t, warnings, 1, "one warning for the node, not one per plan")
	assert.Contains(t, warnings[0], "requested memory is negative")
}

// TestLabelGangWhoseMembersDisagreeOnMinAvailable: four pods say
// min-available 5 and one says 1. Nothing binds, and every pod's
// FailedScheduling event and PodScheduled condition name the pods on
// each side; once the odd pod agrees, the gang binds whole.
func TestLabelGangWhoseMembersDisagreeOnMinAvailable(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	addNodes(t, c, "n", 3, "8", 0)
	ns := namespace(t, c)
	say := func(n string) map[string]string {
		return map[string]string{v1alpha1.LightweightNameLabel: "mixed", v1alpha1.LightweightMinAvailableLabel: n}
	}
	for i := range 4 {
		createPods(t, c, ns, member{name: fmt.Sprintf("mixed-%d", i), labels: say("5"), cpu: "1"})
	}
	createPods(t, c, ns, member{name: "mixed-odd", labels: say("1"), cpu: "1"})

	want := []string{groups.MsgMinAvailableMismatch, "pods mixed-0, mixed-1, mixed-2 and 1 more", "min-available=5", "pod mixed-odd", "min-available=1"}
	for _, pod := range []string{"mixed-0", "mixed-odd"} {
		note := failedSchedulingFor(t, c, ns, pod)
		for _, w := range want {
			assert.Contains(t, note, w, "FailedScheduling of %s", pod)
		}
	}
	eventually(t, 30*time.Second, "PodScheduled=False naming the disagreeing pods on mixed-3", func() (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "mixed-3", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && strings.Contains(cond.Message, "pod mixed-odd") {
				return true, nil
			}
		}
		return false, nil
	})
	consistently(t, 2*time.Second, "no member bound", func() bool { return len(boundPods(t, c, ns)) == 0 })

	odd, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "mixed-odd", metav1.GetOptions{})
	require.NoError(t, err)
	odd.Labels[v1alpha1.LightweightMinAvailableLabel] = "5"
	_, err = c.Client.CoreV1().Pods(ns).Update(context.Background(), odd, metav1.UpdateOptions{})
	require.NoError(t, err)
	waitBound(t, c, ns, "mixed-", 5)
}
