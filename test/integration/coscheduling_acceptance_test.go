package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// scheduler-plugins v0.34.7's own coscheduling integration tests
// (coscheduling_test.go) as acceptance tests of the scheduling.x-k8s.io
// dialect: the same PodGroups, pods, priorities and node, scheduled by
// Phalanx. Each case asserts what scheduler-plugins' asserts (the expected
// pods bind) and, where it holds for any gang scheduler, that the other
// gangs bind nothing. docs/user-guide.md lists each case and its result.

// Priorities of scheduler-plugins' integration tests (midPriority,
// highPriority), as PriorityClasses: the API server's Priority admission
// refuses a pod that sets spec.priority itself.
var spPriorities = map[string]int32{"sp-mid": 100, "sp-high": 1000}

// spCase is one case of TestCoschedulingPlugin.
type spCase struct {
	name      string
	pods      []*corev1.Pod
	groups    []*xv1alpha1.PodGroup
	expected  []string
	neverBind []string // gangs that must bind nothing (equal priorities only)
}

// spPod is st.MakePod()...Req(memory).Priority(p).Label(pod-group, pg).
func spPod(name, group, mem, class string) *corev1.Pod {
	labels := map[string]string{}
	if group != "" {
		labels = inXGroup(group)
	}
	return xPod(name, labels, memoryReq(mem), class)
}

// spMinResources is &v1.ResourceList{memory: q}.
func spMinResources(q string) corev1.ResourceList { return memoryReq(q) }

// TestCoschedulingPlugin: one node with 300 bytes of memory and 32 pods;
// each case's gangs compete for it, created in the order of the original.
func TestCoschedulingPlugin(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, SchedulerPluginsCRD: true})
	x := xClient(t, c)
	priorityClasses(t, c, spPriorities)
	require.NoError(t, sandbox.CreateNodes(context.Background(), c.Client, []*corev1.Node{sandbox.NewNode("fake-node",
		map[string]string{"node": "fake-node", sandbox.HostnameLabel: "fake-node"},
		corev1.ResourceList{corev1.ResourcePods: resource.MustParse("32"), corev1.ResourceMemory: *resource.NewQuantity(300, resource.DecimalSI)})}))
	const mid, high = "sp-mid", "sp-high"

	for _, tc := range []spCase{
		{
			name: "equal priority, sequentially pg1 meet min and pg2 not meet min",
			pods: []*corev1.Pod{
				spPod("t1-p1-1", "pg1-1", "50", mid), spPod("t1-p1-2", "pg1-1", "50", mid), spPod("t1-p1-3", "pg1-1", "50", mid),
				spPod("t1-p2-1", "pg1-2", "100", mid), spPod("t1-p2-2", "pg1-2", "100", mid), spPod("t1-p2-3", "pg1-2", "100", mid), spPod("t1-p2-4", "pg1-2", "100", mid),
			},
			groups:    []*xv1alpha1.PodGroup{xPodGroup("pg1-1", 3, nil), xPodGroup("pg1-2", 4, nil)},
			expected:  []string{"t1-p1-1", "t1-p1-2", "t1-p1-3"},
			neverBind: []string{"t1-p2-"},
		},
		{
			name: "equal priority, not sequentially pg1 meet min and pg2 not meet min",
			pods: []*corev1.Pod{
				spPod("t2-p1-1", "pg2-1", "50", mid), spPod("t2-p2-1", "pg2-2", "100", mid), spPod("t2-p1-2", "pg2-1", "50", mid),
				spPod("t2-p2-2", "pg2-2", "100", mid), spPod("t2-p1-3", "pg2-1", "50", mid), spPod("t2-p2-3", "pg2-2", "100", mid),
				spPod("t2-p2-4", "pg2-2", "100", mid),
			},
			groups:    []*xv1alpha1.PodGroup{xPodGroup("pg2-1", 3, nil), xPodGroup("pg2-2", 4, nil)},
			expected:  []string{"t2-p1-1", "t2-p1-2", "t2-p1-3"},
			neverBind: []string{"t2-p2-"},
		},
		{
			name: "equal priority, not sequentially pg1 not meet min and 3 regular pods",
			pods: []*corev1.Pod{
				spPod("t3-p1-1", "pg3-1", "50", mid), spPod("t3-p2", "", "100", mid), spPod("t3-p1-2", "pg3-1", "50", mid),
				spPod("t3-p3", "", "100", mid), spPod("t3-p1-3", "pg3-1", "50", mid),
			},
			groups:    []*xv1alpha1.PodGroup{xPodGroup("pg3-1", 4, nil)},
			expected:  []string{"t3-p2", "t3-p3"},
			neverBind: []string{"t3-p1-"},
		},
		{
			name: "different priority, sequentially pg1 meet min and pg2 meet min",
			pods: []*corev1.Pod{
				spPod("t4-p1-1", "pg4-1", "100", mid), spPod("t4-p1-2", "pg4-1", "100", mid), spPod("t4-p1-3", "pg4-1", "100", mid),
				spPod("t4-p2-1", "pg4-2", "50", high), spPod("t4-p2-2", "pg4-2", "50", high), spPod("t4-p2-3", "pg4-2", "50", high),
			},
			groups:   []*xv1alpha1.PodGroup{xPodGroup("pg4-1", 3, nil), xPodGroup("pg4-2", 3, nil)},
			expected: []string{"t4-p2-1", "t4-p2-2", "t4-p2-3"},
		},
		{
			name: "different priority, not sequentially pg1 meet min and pg2 meet min",
			pods: []*corev1.Pod{
				spPod("t5-p1-1", "pg5-1", "100", mid), spPod("t5-p2-1", "pg5-2", "50", high), spPod("t5-p1-2", "pg5-1", "100", mid),
				spPod("t5-p2-2", "pg5-2", "50", high), spPod("t5-p1-3", "pg5-1", "100", mid), spPod("t5-p2-3", "pg5-2", "50", high),
			},
			groups:   []*xv1alpha1.PodGroup{xPodGroup("pg5-1", 3, nil), xPodGroup("pg5-2", 3, nil)},
			expected: []string{"t5-p2-1", "t5-p2-2", "t5-p2-3"},
		},
		{
			name: "different priority, not sequentially pg1 meet min and 3 regular pods",
			pods: []*corev1.Pod{
				spPod("t6-p1-1", "pg6-1", "50", mid), spPod("t6-p2", "", "100", high), spPod("t6-p1-2", "pg6-1", "50", mid),
				spPod("t6-p3", "", "100", high), spPod("t6-p1-3", "pg6-1", "50", mid), spPod("t6-p4", "", "100", high),
			},
			groups:   []*xv1alpha1.PodGroup{xPodGroup("pg6-1", 3, nil)},
			expected: []string{"t6-p2", "t6-p3", "t6-p4"},
		},
		{
			name: "equal priority, not sequentially pg1 meet min and p2 p3 not meet min",
			pods: []*corev1.Pod{
				spPod("t7-p1-1", "pg7-1", "50", mid), spPod("t7-p2-1", "pg7-2", "100", mid), spPod("t7-p3-1", "pg7-3", "100", mid),
				spPod("t7-p1-2", "pg7-1", "50", mid), spPod("t7-p2-2", "pg7-2", "100", mid), spPod("t7-p3-2", "pg7-3", "100", mid),
				spPod("t7-p1-3", "pg7-1", "50", mid), spPod("t7-p2-3", "pg7-2", "100", mid), spPod("t7-p3-3", "pg7-3", "100", mid),
				spPod("t7-p2-4", "pg7-2", "100", mid), spPod("t7-p3-4", "pg7-3", "100", mid),
			},
			groups:    []*xv1alpha1.PodGroup{xPodGroup("pg7-1", 3, nil), xPodGroup("pg7-2", 4, nil), xPodGroup("pg7-3", 4, nil)},
			expected:  []string{"t7-p1-1", "t7-p1-2", "t7-p1-3"},
			neverBind: []string{"t7-p2-", "t7-p3-"},
		},
		{
			name: "equal priority, not sequentially pg1 meet min and p2 p3 not meet min, pgs have min resources",
			pods: []*corev1.Pod{
				spPod("t8-p1-1", "pg8-1", "50", mid), spPod("t8-p2-1", "pg8-2", "100", mid), spPod("t8-p3-1", "pg8-3", "100", mid),
				spPod("t8-p1-2", "pg8-1", "50", mid), spPod("t8-p2-2", "pg8-2", "100", mid), spPod("t8-p3-2", "pg8-3", "100", mid),
				spPod("t8-p1-3", "pg8-1", "50", mid), spPod("t8-p2-3", "pg8-2", "100", mid), spPod("t8-p3-3", "pg8-3", "100", mid),
				spPod("t8-p2-4", "pg8-2", "100", mid), spPod("t8-p3-4", "pg8-3", "100", mid),
			},
			groups: []*xv1alpha1.PodGroup{
				xPodGroup("pg8-1", 3, spMinResources("150")), xPodGroup("pg8-2", 4, spMinResources("400")), xPodGroup("pg8-3", 4, spMinResources("400")),
			},
			expected:  []string{"t8-p1-1", "t8-p1-2", "t8-p1-3"},
			neverBind: []string{"t8-p2-", "t8-p3-"},
		},
		{
			name: "equal priority, not sequentially pg1 meet min and pg2 not meet min, pgs have min resources",
			pods: []*corev1.Pod{
				spPod("t9-p1-1", "pg9-1", "50", mid), spPod("t9-p2-1", "pg9-2", "100", mid), spPod("t9-p1-2", "pg9-1", "50", mid),
				spPod("t9-p2-2", "pg9-2", "100", mid), spPod("t9-p1-3", "pg9-1", "50", mid), spPod("t9-p2-3", "pg9-2", "100", mid),
				spPod("t9-p2-4", "pg9-2", "100", mid),
			},
			groups:    []*xv1alpha1.PodGroup{xPodGroup("pg9-1", 3, spMinResources("150")), xPodGroup("pg9-2", 4, spMinResources("400"))},
			expected:  []string{"t9-p1-1", "t9-p1-2", "t9-p1-3"},
			neverBind: []string{"t9-p2-"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := namespace(t, c)
			defer deletePodsNow(t, c, ns)
			for _, pg := range tc.groups {
				createXPodGroup(t, x, ns, pg)
			}
			createPodObjects(t, c, ns, tc.pods...)
			eventually(t, 120*time.Second, fmt.Sprintf("%v bound", tc.expected), func() (bool, error) {
				bound := boundPods(t, c, ns)
				for _, name := range tc.expected {
					if _, ok := bound[name]; !ok {
						return false, nil
					}
				}
				return true, nil
			})
			for _, prefix := range tc.neverBind {
				consistently(t, 2*time.Second, "no pod of the gang "+prefix+"* bound", func() bool { return boundWithPrefix(t, c, ns, prefix) == 0 })
			}
		})
	}

	// pg8-2 and pg9-2 need 400 bytes of memory, more than the node has:
	// the group says so on its PodGroup and its pods rather than waiting
	// silently (scheduler-plugins retries it forever without a word).
	t.Run("a gang larger than the cluster is reported, not waited on", func(t *testing.T) {
		ns := namespace(t, c)
		defer deletePodsNow(t, c, ns)
		createXPodGroup(t, x, ns, xPodGroup("pg9-2", 4, spMinResources("400")))
		createPodObjects(t, c, ns, spPod("t9-p2-1", "pg9-2", "100", mid), spPod("t9-p2-2", "pg9-2", "100", mid),
			spPod("t9-p2-3", "pg9-2", "100", mid), spPod("t9-p2-4", "pg9-2", "100", mid))
		const why = "needs 4 pods of 100 memory; the cluster's allocatable holds at most 3 (1 nodes)"
		e := xGroupEvent(t, c, ns, "pg9-2", why)
		assert.Equal(t, corev1.EventTypeWarning, e.Type)
		assert.Equal(t, "Unschedulable", e.Reason)
		anyPodEvent(t, c, ns, why)
	})
}

// TestPodCompleted: a completed member does not count toward minMember, so
// the rest of the gang does not bind. scheduler-plugins' version never
// creates its node, so nothing there could bind anyway; here the node has
// room for all six.
func TestPodCompleted(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, SchedulerPluginsCRD: true})
	x := xClient(t, c)
	priorityClasses(t, c, spPriorities)
	ctx := context.Background()
	require.NoError(t, sandbox.CreateNodes(ctx, c.Client, []*corev1.Node{sandbox.NewNode("fake-node-1",
		map[string]string{"node": "fake-node-1", sandbox.HostnameLabel: "fake-node-1"},
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("6"), corev1.ResourcePods: resource.MustParse("32")})}))
	ns := namespace(t, c)
	createXPodGroup(t, x, ns, xPodGroup("pg1-1", 6, nil))
	done := xPod("t1-p1-1", inXGroup("pg1-1"), cpuReq("1"), "sp-mid")
	done.Spec.NodeName = "fake-node-1"
	created, err := c.Client.CoreV1().Pods(ns).Create(ctx, done, metav1.CreateOptions{})
	require.NoError(t, err)
	created.Status.Phase = corev1.PodSucceeded
	_, err = c.Client.CoreV1().Pods(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
	require.NoError(t, err)
	for i := 2; i <= 6; i++ {
		createPodObjects(t, c, ns, xPod(fmt.Sprintf("t1-p1-%d", i), inXGroup("pg1-1"), cpuReq("1"), "sp-mid"))
	}
	anyPodEvent(t, c, ns, "waiting for pods: 5/6 present")
	consistently(t, 10*time.Second, "none of the 5 pending members bound", func() bool {
		bound := boundPods(t, c, ns)
		return len(bound) == 1 && bound["t1-p1-1"] != ""
	})
}

// TestPodgroupBackoff: pg1-1 (6 pods of 4 cpu) cannot fit nodes of 6, 2, 2
// and 2 cpu; pg2-1 (1 pod of 2 cpu) binds regardless. scheduler-plugins
// needs its podGroupBackoffSeconds for that; Phalanx refuses the larger
// gang in PreFilter, so it never holds a node the smaller one needs.
func TestPodgroupBackoff(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, SchedulerPluginsCRD: true})
	x := xClient(t, c)
	priorityClasses(t, c, spPriorities)
	var nodes []*corev1.Node
	for i, n := range []string{"6", "2", "2", "2"} {
		name := fmt.Sprintf("fake-node-%d", i+1)
		nodes = append(nodes, sandbox.NewNode(name, map[string]string{"node": name, sandbox.HostnameLabel: name},
			corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(n), corev1.ResourcePods: resource.MustParse("32")}))
	}
	require.NoError(t, sandbox.CreateNodes(context.Background(), c.Client, nodes))
	ns := namespace(t, c)
	createXPodGroup(t, x, ns, xPodGroup("pg1-1", 6, nil))
	createXPodGroup(t, x, ns, xPodGroup("pg2-1", 1, nil))
	for i := 1; i <= 6; i++ {
		createPodObjects(t, c, ns, xPod(fmt.Sprintf("t1-p1-%d", i), inXGroup("pg1-1"), cpuReq("4"), "sp-mid"))
	}
	createPodObjects(t, c, ns, xPod("t1-p2-1", inXGroup("pg2-1"), cpuReq("2"), "sp-mid"))
	eventually(t, 120*time.Second, "t1-p2-1 bound", func() (bool, error) {
		_, ok := boundPods(t, c, ns)["t1-p2-1"]
		return ok, nil
	})
	consistently(t, 2*time.Second, "no member of pg1-1 bound", func() bool { return boundWithPrefix(t, c, ns, "t1-p1-") == 0 })
}
