package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"

	"github.com/phalanx-sched/phalanx/pkg/controller"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// kueueBinary builds phalanx-kueue once per test process.
func kueueBinary(t *testing.T) string {
	t.Helper()
	binaries.mu.Lock()
	defer binaries.mu.Unlock()
	if path, ok := binaries.built["phalanx-kueue"]; ok {
		return path
	}
	path := filepath.Join(t.TempDir(), "phalanx-kueue")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	require.NoError(t, sandbox.BuildKueue(ctx, path))
	t.Logf("built phalanx-kueue in %v", time.Since(start).Round(time.Second))
	if binaries.built == nil {
		binaries.built = map[string]string{}
	}
	binaries.built["phalanx-kueue"] = path
	return path
}

var kueueWorkloads = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}

// kueueWorkloadOf returns Kueue's Workload for a Job (its controller
// owner is the Job), nil while there is none.
func kueueWorkloadOf(t *testing.T, dyn dynamic.Interface, ns string, job *batchv1.Job) *unstructured.Unstructured {
	t.Helper()
	list, err := dyn.Resource(kueueWorkloads).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	for i := range list.Items {
		for _, ref := range list.Items[i].GetOwnerReferences() {
			if ref.UID == job.UID {
				return &list.Items[i]
			}
		}
	}
	return nil
}

// condition returns the status, reason and message of a condition of an
// unstructured object; status "" when it has none.
func condition(obj *unstructured.Unstructured, typ string) (status, reason, message string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]interface{})
		if m["type"] == typ {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
		}
	}
	return status, reason, message
}

// jobPods returns the Job's pods that are not being deleted, by name, with
// their nodes ("" when pending).
func jobPods(t *testing.T, c *sandbox.Cluster, ns, job string) map[string]string {
	t.Helper()
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	require.NoError(t, err)
	out := map[string]string{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p.Spec.NodeName
		}
	}
	return out
}

// racksOf returns the racks of the given nodes.
func racksOf(t *testing.T, c *sandbox.Cluster, nodes map[string]string) sets.Set[string] {
	t.Helper()
	racks := sets.New[string]()
	for _, n := range nodes {
		node, err := c.Client.CoreV1().Nodes().Get(context.Background(), n, metav1.GetOptions{})
		require.NoError(t, err)
		racks.Insert(node.Labels[sandbox.RackLabel])
	}
	return racks
}

// TestKueueAdmitsPhalanxPlaces runs Kueue's own manager in front of
// Phalanx: Kueue admits gang Jobs by quota and preempts by its workload
// priority; Phalanx places each admitted Job's pods as a gang in one rack.
// The cluster has room for both Jobs; the quota has room for one.
func TestKueueAdmitsPhalanxPlaces(t *testing.T) {
	c := startCluster(t, sandbox.Options{
		// 2 racks of 4 nodes of 2 CPUs: one 8-pod Job fills a rack.
		Topology:    &sandbox.Topology{Zones: 1, RacksPerZone: 2, NodesPerRack: 4, CPU: "2", Memory: "8Gi", Pods: 110},
		Scheduler:   true,
		NodeAgent:   true,
		Controllers: true,
		Kueue:       &sandbox.Kueue{Binary: kueueBinary(t)},
	})
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.Config)
	require.NoError(t, err)
	ns := namespace(t, c)
	require.NoError(t, applyYAML(ctx, c, ns, []byte(fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-%[1]s}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq-%[1]s}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default-%[1]s
      resources: [{name: cpu, nominalQuota: 8}]
  preemption: {withinClusterQueue: Never}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team}
spec: {clusterQueue: cq-%[1]s}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata: {name: urgent-%[1]s}
value: 1000
`, ns))))

	// A gang Job in one rack, handed to Kueue by its queue-name label. It
	// is created running: Kueue's webhook suspends it until admitted.
	kueueJob := func(name string, labels map[string]string) *batchv1.Job {
		job := gangJobOf(name, 8)
		job.Annotations[controller.TopologyKeyAnnotation] = sandbox.RackLabel
		job.Labels = map[string]string{"kueue.x-k8s.io/queue-name": "team"}
		for k, v := range labels {
			job.Labels[k] = v
		}
		return job
	}
	first, err := c.Client.BatchV1().Jobs(ns).Create(ctx, kueueJob("first", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	require.True(t, first.Spec.Suspend != nil && *first.Spec.Suspend, "Kueue's webhook suspends a queued Job at creation")

	var firstPods map[string]string
	eventually(t, 60*time.Second, "Kueue to admit first and Phalanx to bind its 8 pods", func() (bool, error) {
		firstPods = jobPods(t, c, ns, "first")
		bound := 0
		for _, n := range firstPods {
			if n != "" {
				bound++
			}
		}
		return bound == 8, nil
	})
	assert.Equal(t, 1, racksOf(t, c, firstPods).Len(), "first's gang is in one rack: %v", firstPods)

	// The second Job, of a higher workload priority, is over the quota
	// while the queue does not preempt: it stays suspended, with Kueue's
	// reason, although the other rack is free.
	second, err := c.Client.BatchV1().Jobs(ns).Create(ctx, kueueJob("second", map[string]string{"kueue.x-k8s.io/priority-class": "urgent-" + ns}), metav1.CreateOptions{})
	require.NoError(t, err)
	var pendingMessage string
	eventually(t, 30*time.Second, "Kueue to find no quota for second", func() (bool, error) {
		wl := kueueWorkloadOf(t, dyn, ns, second)
		if wl == nil {
			return false, nil
		}
		status, _, message := condition(wl, "QuotaReserved")
		pendingMessage = message
		return status == "False" && contains(message, "insufficient unused quota"), nil
	})
	t.Logf("Kueue on second: %s", pendingMessage)
	got, err := c.Client.BatchV1().Jobs(ns).Get(ctx, "second", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, *got.Spec.Suspend, "second stays suspended")
	assert.Empty(t, jobPods(t, c, ns, "second"), "second has no pods")

	// The queue now preempts lower workload priorities: Kueue evicts
	// first whole, and second binds whole in one rack. Phalanx does not
	// bring first back: its Job stays suspended with no pods.
	_, err = dyn.Resource(schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}).Patch(ctx,
		"cq-"+ns, types.MergePatchType, []byte(`{"spec":{"preemption":{"withinClusterQueue":"LowerPriority"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	var secondPods map[string]string
	eventually(t, 60*time.Second, "second's 8 pods bound once first is preempted", func() (bool, error) {
		secondPods = jobPods(t, c, ns, "second")
		bound := 0
		for _, n := range secondPods {
			if n != "" {
				bound++
			}
		}
		return bound == 8, nil
	})
	assert.Equal(t, 1, racksOf(t, c, secondPods).Len(), "second's gang is in one rack: %v", secondPods)
	assert.Empty(t, jobPods(t, c, ns, "first"), "first left whole")
	got, err = c.Client.BatchV1().Jobs(ns).Get(ctx, "first", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, *got.Spec.Suspend, "Kueue suspended first")
	wl := kueueWorkloadOf(t, dyn, ns, first)
	require.NotNil(t, wl)
	status, reason, message := condition(wl, "Evicted")
	assert.Equal(t, "True", status, "first's Workload is evicted")
	assert.Equal(t, "Preempted", reason, message)
	for name, node := range firstPods {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		assert.True(t, err != nil, "first's pod %s (on %s) is gone", name, node)
	}
}
