package integration

import (
	"context"
	"fmt"
	"os"
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
	"k8s.io/utils/ptr"

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
	// Not the test's TempDir: later tests (TestScenarios) run the same
	// binary after this test's directory is gone. One file per process,
	// as the shards of the package run side by side; TestMain removes it.
	dir := filepath.Join(os.TempDir(), "phalanx-integration-bin")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	path := filepath.Join(dir, fmt.Sprintf("phalanx-kueue-%d", os.Getpid()))
	processFiles.add(path)
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
// Kueue runs with its TAS on, as it ships; only the second subtest's queue
// has a topology-aware flavor.
func TestKueueAdmitsPhalanxPlaces(t *testing.T) {
	c := startCluster(t, sandbox.Options{
		// 2 racks of 4 nodes of 2 CPUs: one 8-pod Job fills a rack.
		Topology:    &sandbox.Topology{Zones: 1, RacksPerZone: 2, NodesPerRack: 4, CPU: "2", Memory: "8Gi", Pods: 110},
		Scheduler:   true,
		NodeAgent:   true,
		Controllers: true,
		Kueue:       &sandbox.Kueue{Binary: kueueBinary(t), TAS: true},
	})
	dyn, err := dynamic.NewForConfig(c.Config)
	require.NoError(t, err)
	t.Run("quota admits, Kueue preempts whole, Phalanx places the gang in one rack", func(t *testing.T) {
		kueueQuotaAndPreemption(t, c, dyn)
	})
	t.Run("Kueue's TAS assigns the nodes, Phalanx binds the gang on them", func(t *testing.T) {
		kueueTASAssigns(t, c, dyn)
	})
	t.Run("the Kueue sample binds whole in one rack", func(t *testing.T) {
		ns := namespace(t, c)
		data, err := os.ReadFile("../../manifests/samples/kueue/rack-job.yaml")
		require.NoError(t, err)
		require.NoError(t, applyYAML(context.Background(), c, ns, data))
		var pods map[string]string
		eventually(t, 30*time.Second, "the sample's 8 pods bound", func() (bool, error) {
			pods = jobPods(t, c, ns, "trainer")
			return boundCount(pods) == 8, nil
		})
		assert.Equal(t, 1, racksOf(t, c, pods).Len(), "one rack: %v", pods)
	})
}

// kueueJob is an 8-pod gang Job that Phalanx places in one rack, handed
// to Kueue's LocalQueue queue by its queue-name label.
func kueueJob(name, queue string, labels map[string]string) *batchv1.Job {
	job := gangJobOf(name, 8)
	job.Annotations[controller.TopologyKeyAnnotation] = sandbox.RackLabel
	job.Labels = map[string]string{"kueue.x-k8s.io/queue-name": queue}
	for k, v := range labels {
		job.Labels[k] = v
	}
	return job
}

// boundCount is how many of pods have a node.
func boundCount(pods map[string]string) int {
	n := 0
	for _, node := range pods {
		if node != "" {
			n++
		}
	}
	return n
}

// deleteJobs deletes the Jobs with their pods and waits until the pods
// are gone, so that the next subtest has the cluster to itself.
func deleteJobs(t *testing.T, c *sandbox.Cluster, ns string, names ...string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range names {
		require.NoError(t, c.Client.BatchV1().Jobs(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}))
	}
	eventually(t, 30*time.Second, "the Jobs' pods to be gone", func() (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, err
	})
}

func kueueQuotaAndPreemption(t *testing.T, c *sandbox.Cluster, dyn dynamic.Interface) {
	ctx := context.Background()
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

	// The first Job is created running: Kueue's webhook suspends it until
	// Kueue admits it.
	first, err := c.Client.BatchV1().Jobs(ns).Create(ctx, kueueJob("first", "team", nil), metav1.CreateOptions{})
	require.NoError(t, err)
	require.True(t, first.Spec.Suspend != nil && *first.Spec.Suspend, "Kueue's webhook suspends a queued Job at creation")

	var firstPods map[string]string
	eventually(t, 60*time.Second, "Kueue to admit first and Phalanx to bind its 8 pods", func() (bool, error) {
		firstPods = jobPods(t, c, ns, "first")
		return boundCount(firstPods) == 8, nil
	})
	assert.Equal(t, 1, racksOf(t, c, firstPods).Len(), "first's gang is in one rack: %v", firstPods)

	// The second Job, of a higher workload priority, is over the quota
	// while the queue does not preempt: it stays suspended, with Kueue's
	// reason, although the other rack is free.
	second, err := c.Client.BatchV1().Jobs(ns).Create(ctx, kueueJob("second", "team", map[string]string{"kueue.x-k8s.io/priority-class": "urgent-" + ns}), metav1.CreateOptions{})
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
		return boundCount(secondPods) == 8, nil
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
	deleteJobs(t, c, ns, "first", "second")
}

// kueueTASAssigns: with Kueue's TAS on and a topology-aware flavor, Kueue
// chooses the rack and the node of every pod at admission (its ungater
// writes a kubernetes.io/hostname node selector into each pod); Phalanx
// then binds the gang exactly there, whole.
func kueueTASAssigns(t *testing.T, c *sandbox.Cluster, dyn dynamic.Interface) {
	ctx := context.Background()
	ns := namespace(t, c)
	require.NoError(t, applyYAML(ctx, c, ns, []byte(fmt.Sprintf(`
apiVersion: kueue.x-k8s.io/v1beta2
kind: Topology
metadata: {name: racks-%[1]s}
spec:
  levels:
  - nodeLabel: %[2]s
  - nodeLabel: kubernetes.io/hostname
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: tas-%[1]s}
spec:
  nodeLabels: {%[3]s: zone-0}
  topologyName: racks-%[1]s
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: tas-%[1]s}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: tas-%[1]s
      resources: [{name: cpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: tas}
spec: {clusterQueue: tas-%[1]s}
`, ns, sandbox.RackLabel, sandbox.ZoneLabel))))

	job := kueueJob("ranked", "tas", nil)
	job.Spec.Template.Annotations = map[string]string{"kueue.x-k8s.io/podset-required-topology": sandbox.RackLabel}
	job, err := c.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { dumpKueueOnFailure(t, c, dyn, ns) })

	var pods map[string]string
	eventually(t, 20*time.Second, "Kueue to admit ranked and Phalanx to bind its 8 pods", func() (bool, error) {
		pods = jobPods(t, c, ns, "ranked")
		return boundCount(pods) == 8, nil
	})
	assert.Equal(t, 1, racksOf(t, c, pods).Len(), "one rack: %v", pods)
	wl := kueueWorkloadOf(t, dyn, ns, job)
	require.NotNil(t, wl)
	assignments, _, _ := unstructured.NestedSlice(wl.Object, "status", "admission", "podSetAssignments")
	require.Len(t, assignments, 1)
	_, hasTopology := assignments[0].(map[string]interface{})["topologyAssignment"]
	assert.True(t, hasTopology, "Kueue's TAS assigned the pod set a topology")
	for name, node := range pods {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, node, p.Spec.NodeSelector[sandbox.HostnameLabel], "pod %s binds on the node Kueue assigned it", name)
	}
	deleteJobs(t, c, ns, "ranked")
}

// dumpKueueOnFailure logs, for a failed test, Kueue's Workloads of ns, the
// pods with their gates and node selectors, and the end of Kueue's log.
func dumpKueueOnFailure(t *testing.T, c *sandbox.Cluster, dyn dynamic.Interface, ns string) {
	if !t.Failed() {
		return
	}
	ctx := context.Background()
	if list, err := dyn.Resource(kueueWorkloads).Namespace(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, wl := range list.Items {
			status, _, _ := unstructured.NestedMap(wl.Object, "status")
			t.Logf("Kueue Workload %s: %v", wl.GetName(), status)
		}
	}
	if pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			t.Logf("pod %s: node %q, gates %v, nodeSelector %v, labels %v", p.Name, p.Spec.NodeName, p.Spec.SchedulingGates, p.Spec.NodeSelector, p.Labels)
		}
	}
	if pgs, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, pg := range pgs.Items {
			t.Logf("PodGroup %s: %+v", pg.Name, pg.Status.Conditions)
		}
	}
	if events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range events.Items {
			t.Logf("event %s %s: %s %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	data, _ := os.ReadFile(filepath.Join(c.Dir, sandbox.KueueLog))
	if len(data) > 6000 {
		data = data[len(data)-6000:]
	}
	t.Logf("end of Kueue's log:\n%s", data)
}
