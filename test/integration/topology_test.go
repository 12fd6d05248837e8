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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// nodeLabels returns each node's labels by name.
func nodeLabels(t *testing.T, c *sandbox.Cluster) map[string]map[string]string {
	nodes, err := c.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]map[string]string{}
	for _, n := range nodes.Items {
		out[n.Name] = n.Labels
	}
	return out
}

// domainsOf returns the set of values of key over the nodes of the bound
// pods whose names start with prefix.
func domainsOf(t *testing.T, c *sandbox.Cluster, ns, prefix, key string) map[string]int {
	labels := nodeLabels(t, c)
	out := map[string]int{}
	for pod, node := range boundPods(t, c, ns) {
		if strings.HasPrefix(pod, prefix) {
			out[labels[node][key]]++
		}
	}
	return out
}

func rackGang(name string, minCount int32, key string) *v1alpha1.PodGroup {
	pg := gangPG(name, minCount)
	pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(key)}
	return pg
}

// pinnedFiller is a plain pod that can only run on one node.
func pinnedFiller(name, node, cpu string) *corev1.Pod {
	p := member{name: name, cpu: cpu}.pod()
	p.Spec.NodeSelector = map[string]string{sandbox.HostnameLabel: node}
	return p
}

// TestMultiLevelTopology is the example of the Kubernetes Workload API documentation: a zone-constrained root
// (minGroupCount 2) over rack-constrained workers (8) and driver (1). All
// pods land in one zone, and each child inside one rack of it.
func TestMultiLevelTopology(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, Topology: &sandbox.Topology{
		Zones: 2, RacksPerZone: 2, NodesPerRack: 4, CPU: "8", Memory: "64Gi", Pods: 110}})
	ctx := context.Background()
	ns := namespace(t, c)
	root := composite("job", 2)
	root.Spec.SchedulingConstraints = &v1alpha1.CompositePodGroupSchedulingConstraints{Topology: topo(sandbox.ZoneLabel)}
	_, err := c.Phalanx.SchedulingV1alpha1().CompositePodGroups(ns).Create(ctx, root, metav1.CreateOptions{})
	require.NoError(t, err)
	for name, n := range map[string]int32{"workers": 8, "driver": 1} {
		pg := rackGang(name, n, sandbox.RackLabel)
		pg.Spec.ParentCompositePodGroupName = ptr.To("job")
		createPodGroup(t, c, ns, pg)
		for i := 0; i < int(n); i++ {
			// 8 workers of 4 cpu fill one rack (4 nodes × 8 cpu) exactly.
			createPods(t, c, ns, member{name: fmt.Sprintf("%s-%d", name, i), labels: inGroup(name), cpu: "4"})
		}
	}
	eventually(t, 60*time.Second, "all 9 pods bound", func() (bool, error) { return len(boundPods(t, c, ns)) == 9, nil })
	assert.Len(t, domainsOf(t, c, ns, "", sandbox.ZoneLabel), 1, "every pod in one zone")
	assert.Len(t, domainsOf(t, c, ns, "workers-", sandbox.RackLabel), 1, "all workers in one rack")
	assert.Len(t, domainsOf(t, c, ns, "driver-", sandbox.RackLabel), 1, "the driver in one rack")
}

// TestRackTopology covers single-level rack constraints.
func TestRackTopology(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, NodeAgent: true, Topology: &sandbox.Topology{
		Zones: 1, RacksPerZone: 3, NodesPerRack: 2, CPU: "4", Memory: "32Gi", Pods: 110}})
	ctx := context.Background()

	t.Run("a gang that fits in only one rack lands there", func(t *testing.T) {
		ns := namespace(t, c)
		// Racks 0 and 2 keep one free node each; rack 1 keeps both.
		for _, node := range []string{"node-z0-r0-n0", "node-z0-r2-n1"} {
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, pinnedFiller("fill-"+node, node, "4"), metav1.CreateOptions{})
			require.NoError(t, err)
		}
		eventually(t, 30*time.Second, "fillers bound", func() (bool, error) { return len(boundPods(t, c, ns)) == 2, nil })
		createPodGroup(t, c, ns, rackGang("pair", 2, sandbox.RackLabel))
		createPods(t, c, ns,
			member{name: "pair-0", labels: inGroup("pair"), cpu: "4"},
			member{name: "pair-1", labels: inGroup("pair"), cpu: "4"})
		eventually(t, 30*time.Second, "the pair bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "pair-") == 2, nil })
		assert.Equal(t, map[string]int{"zone-0-rack-1": 2}, domainsOf(t, c, ns, "pair-", sandbox.RackLabel))
		require.NoError(t, c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
		require.NoError(t, c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
		eventually(t, 30*time.Second, "pods gone", func() (bool, error) {
			pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(pods.Items) == 0, err
		})
	})

	t.Run("a gang that fits in no single rack stays pending with numbers, though the cluster has room", func(t *testing.T) {
		ns := namespace(t, c)
		createPodGroup(t, c, ns, rackGang("trio", 3, sandbox.RackLabel))
		for i := 0; i < 3; i++ {
			createPods(t, c, ns, member{name: fmt.Sprintf("trio-%d", i), labels: inGroup("trio"), cpu: "4"})
		}
		cond := waitGroupCondition(t, c, ns, "trio", v1alpha1.PodGroupSchedulable, "no "+sandbox.RackLabel+" domain fits 3 pods: best")
		t.Logf("condition: %s: %s", cond.Reason, cond.Message)
		assert.Equal(t, v1alpha1.ReasonUnschedulable, cond.Reason)
		assert.Contains(t, cond.Message, "fits 2")
		consistently(t, 2*time.Second, "no trio member bound", func() bool { return boundWithPrefix(t, c, ns, "trio-") == 0 })
		require.NoError(t, c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
	})

	t.Run("a re-created member returns to its gang's rack, or waits when that rack is full", func(t *testing.T) {
		ns := namespace(t, c)
		createPodGroup(t, c, ns, rackGang("duo", 2, sandbox.RackLabel))
		createPods(t, c, ns,
			member{name: "duo-0", labels: inGroup("duo"), cpu: "4"},
			member{name: "duo-1", labels: inGroup("duo"), cpu: "4"})
		eventually(t, 30*time.Second, "the duo bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "duo-") == 2, nil })
		racks := domainsOf(t, c, ns, "duo-", sandbox.RackLabel)
		require.Len(t, racks, 1)
		var rack string
		for r := range racks {
			rack = r
		}

		recreate := func(name string) string {
			node := boundPods(t, c, ns)[name]
			require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}))
			eventually(t, 30*time.Second, name+" deleted", func() (bool, error) {
				_, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				return err != nil, nil
			})
			return node
		}
		recreate("duo-0")
		createPods(t, c, ns, member{name: "duo-0", labels: inGroup("duo"), cpu: "4"})
		eventually(t, 30*time.Second, "the re-created member bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "duo-") == 2, nil })
		assert.Equal(t, map[string]int{rack: 2}, domainsOf(t, c, ns, "duo-", sandbox.RackLabel), "back in its gang's rack")

		// Now take its slot away before it comes back.
		freed := recreate("duo-1")
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, pinnedFiller("squatter", freed, "4"), metav1.CreateOptions{})
		require.NoError(t, err)
		eventually(t, 30*time.Second, "the squatter bound", func() (bool, error) {
			_, ok := boundPods(t, c, ns)["squatter"]
			return ok, nil
		})
		createPods(t, c, ns, member{name: "duo-1", labels: inGroup("duo"), cpu: "4"})
		note := failedSchedulingFor(t, c, ns, "duo-1")
		t.Logf("why the member waits: %s", note)
		consistently(t, 2*time.Second, "the member stays pending although other racks have room", func() bool {
			_, bound := boundPods(t, c, ns)["duo-1"]
			return !bound
		})
	})
}
