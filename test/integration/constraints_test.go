package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// Gangs whose members carry constraints the scheduler's filters enforce:
// among themselves (anti-affinity, host ports, spread) and against pods
// already running (their anti-affinity, the members' affinity to them).
// Each subtest has its own nodes, reached through a node selector, and its
// own namespace.

const suiteLabel = "phalanx.test/suite"

// constrainedPod is a member of a test gang on the suite's nodes.
func constrainedPod(name, suite, group string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"job": suite}},
		Spec: corev1.PodSpec{
			SchedulerName: "phalanx-scheduler",
			NodeSelector:  map[string]string{suiteLabel: suite},
			Containers: []corev1.Container{{
				Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
			}},
		},
	}
	if group != "" {
		p.Labels[v1alpha1.PodGroupLabel] = group
	}
	for _, m := range mutate {
		m(p)
	}
	return p
}

func antiAffinity(key string, match map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: match}, TopologyKey: key,
			}},
		}}
	}
}

func podAffinity(key string, match map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: match}, TopologyKey: key,
			}},
		}}
	}
}

func hostPort(port int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: port, HostPort: port, Protocol: corev1.ProtocolTCP}}
	}
}

func hostNetwork(port int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.HostNetwork = true
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: port, Protocol: corev1.ProtocolTCP}}
	}
}

func spreadOn(key string, maxSkew int32, match map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: match},
		}}
	}
}

func withCPU(cpu string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
}

func withLabels(l map[string]string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for k, v := range l {
			p.Labels[k] = v
		}
	}
}

// suiteNodes adds n 32-cpu nodes reachable only by the suite's pods, with
// extra labels per node from label(i).
func suiteNodes(t *testing.T, c *sandbox.Cluster, suite string, first, n int, label func(i int) map[string]string) []string {
	t.Helper()
	return suiteNodesWith(t, c, suite, first, n, corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}, label)
}

// suiteNodesWith adds nodes suite-first..suite-(first+n-1) of the given
// capacity, labelled with the suite (pods reach them by node selector), their
// hostname and label(i).
func suiteNodesWith(t *testing.T, c *sandbox.Cluster, suite string, first, n int, capacity corev1.ResourceList, label func(i int) map[string]string) []string {
	t.Helper()
	var nodes []*corev1.Node
	var names []string
	for i := first; i < first+n; i++ {
		name := fmt.Sprintf("%s-%d", suite, i)
		labels := map[string]string{sandbox.HostnameLabel: name, suiteLabel: suite}
		if label != nil {
			for k, v := range label(i) {
				labels[k] = v
			}
		}
		nodes = append(nodes, sandbox.NewNode(name, labels, capacity))
		names = append(names, name)
	}
	require.NoError(t, sandbox.CreateNodes(context.Background(), c.Client, nodes))
	return names
}

func createAll(t *testing.T, c *sandbox.Cluster, ns string, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		_, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
		require.NoError(t, err, "create pod %s", p.Name)
	}
}

// gangOf makes a PodGroup with minCount n and n members built by mk.
func gangOf(t *testing.T, c *sandbox.Cluster, ns, group string, n int, mk func(i int) *corev1.Pod) {
	t.Helper()
	createPodGroup(t, c, ns, gangPG(group, int32(n)))
	for i := range n {
		createAll(t, c, ns, mk(i))
	}
}

// waitAllBound waits until want pods of ns are bound and returns their nodes.
func waitAllBound(t *testing.T, c *sandbox.Cluster, ns string, want int) map[string]string {
	t.Helper()
	var bound map[string]string
	eventually(t, 45*time.Second, fmt.Sprintf("%d pods bound in %s", want, ns), func() (bool, error) {
		bound = boundPods(t, c, ns)
		return len(bound) >= want, nil
	})
	return bound
}

func nodeSet(bound map[string]string) map[string]int {
	out := map[string]int{}
	for _, n := range bound {
		out[n]++
	}
	return out
}

func TestGangMemberConstraints(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})

	oneEach := map[string]func(suite string) func(*corev1.Pod){
		"hostname anti-affinity": func(s string) func(*corev1.Pod) {
			return antiAffinity(sandbox.HostnameLabel, map[string]string{"job": s})
		},
		"host port":    func(string) func(*corev1.Pod) { return hostPort(8080) },
		"host network": func(string) func(*corev1.Pod) { return hostNetwork(29500) },
		"hostname topology spread": func(s string) func(*corev1.Pod) {
			return spreadOn(sandbox.HostnameLabel, 1, map[string]string{"job": s})
		},
	}
	i := 0
	for name, constraint := range oneEach {
		i++
		suite := fmt.Sprintf("one%d", i)
		t.Run("a 3-pod gang with "+name+" binds one member per node on 3 free nodes", func(t *testing.T) {
			ns := namespace(t, c)
			suiteNodes(t, c, suite, 0, 3, nil)
			gangOf(t, c, ns, "w", 3, func(i int) *corev1.Pod {
				return constrainedPod(fmt.Sprintf("w-%d", i), suite, "w", constraint(suite))
			})
			bound := waitAllBound(t, c, ns, 3)
			assert.Len(t, nodeSet(bound), 3, "members share a node: %v", bound)
		})
	}

	t.Run("a one-per-node gang larger than its nodes stays pending, says why, and binds when a node is added", func(t *testing.T) {
		ns := namespace(t, c)
		suite := "short"
		suiteNodes(t, c, suite, 0, 2, nil)
		gangOf(t, c, ns, "w", 3, func(i int) *corev1.Pod {
			return constrainedPod(fmt.Sprintf("w-%d", i), suite, "w", antiAffinity(sandbox.HostnameLabel, map[string]string{"job": suite}))
		})
		cond := waitGroupCondition(t, c, ns, "w", v1alpha1.PodGroupSchedulable, "pod anti-affinity among members")
		t.Logf("why the gang waits: %s", cond.Message)
		assert.Contains(t, cond.Message, "2 of 3 pods fit")
		assert.NotContains(t, cond.Message, "NodeAffinity", "the planner's own node selection is not a filter verdict worth naming")
		consistently(t, 2*time.Second, "no member bound", func() bool { return len(boundPods(t, c, ns)) == 0 })

		suiteNodes(t, c, suite, 2, 1, nil)
		bound := waitAllBound(t, c, ns, 3)
		assert.Len(t, nodeSet(bound), 3)
	})

	t.Run("a running pod's anti-affinity keeps members off its node", func(t *testing.T) {
		ns := namespace(t, c)
		suite := "guard"
		nodes := suiteNodes(t, c, suite, 0, 3, nil)
		// The guard runs on the first node (by name, the planner's first
		// choice) and refuses the gang's pods beside it.
		guard := constrainedPod("guard", suite, "", antiAffinity(sandbox.HostnameLabel, map[string]string{"role": "worker"}))
		guard.Labels["job"] = "other"
		guard.Spec.NodeName = nodes[0]
		createAll(t, c, ns, guard)
		gangOf(t, c, ns, "w", 2, func(i int) *corev1.Pod {
			return constrainedPod(fmt.Sprintf("w-%d", i), suite, "w", withCPU("20"), withLabels(map[string]string{"role": "worker"}))
		})
		bound := waitAllBound(t, c, ns, 3)
		for pod, node := range bound {
			if pod != "guard" {
				assert.NotEqual(t, nodes[0], node, "%s placed beside the guard that refuses it", pod)
			}
		}
	})

	t.Run("members with affinity to a running pod join its node", func(t *testing.T) {
		ns := namespace(t, c)
		suite := "cache"
		nodes := suiteNodes(t, c, suite, 0, 3, nil)
		cache := constrainedPod("cache", suite, "")
		cache.Labels = map[string]string{"app": "cache"}
		cache.Spec.NodeName = nodes[2]
		createAll(t, c, ns, cache)
		gangOf(t, c, ns, "w", 2, func(i int) *corev1.Pod {
			return constrainedPod(fmt.Sprintf("w-%d", i), suite, "w", podAffinity(sandbox.HostnameLabel, map[string]string{"app": "cache"}))
		})
		bound := waitAllBound(t, c, ns, 3)
		assert.Equal(t, map[string]int{nodes[2]: 3}, nodeSet(bound))
	})

	t.Run("members with affinity to each other share one zone", func(t *testing.T) {
		ns := namespace(t, c)
		suite := "together"
		// zone-a has two nodes of 32 cpu, zone-b one: three 16-cpu members
		// fit only in zone-a, and must not be split.
		suiteNodes(t, c, suite, 0, 3, func(i int) map[string]string {
			return map[string]string{"topology.kubernetes.io/zone": map[bool]string{true: "zone-a", false: "zone-b"}[i < 2]}
		})
		gangOf(t, c, ns, "w", 3, func(i int) *corev1.Pod {
			return constrainedPod(fmt.Sprintf("w-%d", i), suite, "w", withCPU("16"), podAffinity("topology.kubernetes.io/zone", map[string]string{"job": suite}))
		})
		bound := waitAllBound(t, c, ns, 3)
		for pod, node := range bound {
			assert.Contains(t, []string{suite + "-0", suite + "-1"}, node, "%s left zone-a", pod)
		}
	})

	t.Run("a gang composite whose members all refuse each other spreads over nodes", func(t *testing.T) {
		ns := namespace(t, c)
		suite := "composite"
		suiteNodes(t, c, suite, 0, 4, nil)
		cpg := composite("job", 2)
		_, err := c.Phalanx.SchedulingV1alpha1().CompositePodGroups(ns).Create(context.Background(), cpg, metav1.CreateOptions{})
		require.NoError(t, err)
		for _, leaf := range []string{"ps", "worker"} {
			pg := gangPG(leaf, 2)
			pg.Spec.ParentCompositePodGroupName = ptr.To("job")
			createPodGroup(t, c, ns, pg)
			for i := range 2 {
				createAll(t, c, ns, constrainedPod(fmt.Sprintf("%s-%d", leaf, i), suite, leaf, antiAffinity(sandbox.HostnameLabel, map[string]string{"job": suite})))
			}
		}
		bound := waitAllBound(t, c, ns, 4)
		assert.Len(t, nodeSet(bound), 4, "members share a node: %v", bound)
	})

	t.Run("a rack-constrained one-per-node gang takes the rack with enough nodes", func(t *testing.T) {
		ns := namespace(t, c)
		suite := "racks"
		// rack-a (first by name) has 2 nodes, rack-b 3.
		suiteNodes(t, c, suite, 0, 5, func(i int) map[string]string {
			return map[string]string{"topology.phalanx.dev/rack": map[bool]string{true: "rack-a", false: "rack-b"}[i < 2]}
		})
		pg := gangPG("w", 3)
		pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo("topology.phalanx.dev/rack")}
		createPodGroup(t, c, ns, pg)
		for i := range 3 {
			createAll(t, c, ns, constrainedPod(fmt.Sprintf("w-%d", i), suite, "w", antiAffinity(sandbox.HostnameLabel, map[string]string{"job": suite})))
		}
		bound := waitAllBound(t, c, ns, 3)
		nodes := nodeSet(bound)
		assert.Len(t, nodes, 3)
		for n := range nodes {
			assert.Contains(t, []string{suite + "-2", suite + "-3", suite + "-4"}, n)
		}
	})
}

func withPriority(class string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.PriorityClassName = class }
}

// highConstrainedGang is a high-priority PodGroup of n members (min n
// unless minCount is set) built by mk.
func highConstrainedGang(t *testing.T, c *sandbox.Cluster, ns, group string, minCount, n int, mk func(i int) *corev1.Pod) {
	t.Helper()
	pg := gangPG(group, int32(minCount))
	pg.Spec.PriorityClassName = "high"
	createPodGroup(t, c, ns, pg)
	for i := range n {
		p := mk(i)
		p.Spec.PriorityClassName = "high"
		createAll(t, c, ns, p)
	}
}

func waitGone(t *testing.T, c *sandbox.Cluster, ns, name string) {
	t.Helper()
	eventually(t, 45*time.Second, "pod "+name+" evicted", func() (bool, error) {
		_, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err != nil, nil
	})
}

func TestGangPreemptionClearsEveryBlocker(t *testing.T) {
	c := preemptionCluster(t, nil)

	t.Run("a one-per-node gang evicts the lower-priority pod whose anti-affinity refuses it", func(t *testing.T) {
		ns := namespace(t, c)
		suite := "p-anti"
		nodes := suiteNodes(t, c, suite, 0, 3, nil)
		squatter := constrainedPod("squatter", suite, "", withPriority("low"), antiAffinity(sandbox.HostnameLabel, map[string]string{"job": suite}))
		squatter.Labels["job"] = "other"
		squatter.Spec.NodeName = nodes[0]
		createAll(t, c, ns, squatter)
		highConstrainedGang(t, c, ns, "w", 3, 3, func(i int) *corev1.Pod {
			return constrainedPod(fmt.Sprintf("w-%d", i), suite, "w", antiAffinity(sandbox.HostnameLabel, map[string]string{"job": suite}))
		})
		waitGone(t, c, ns, "squatter")
		bound := waitAllBound(t, c, ns, 3)
		assert.Len(t, nodeSet(bound), 3)
	})

	t.Run("a host-port gang evicts the lower-priority pod holding its port", func(t *testing.T) {
		ns := namespace(t, c)
		suite := "p-port"
		nodes := suiteNodes(t, c, suite, 0, 3, nil)
		squatter := constrainedPod("squatter", suite, "", withPriority("low"), hostPort(8080))
		squatter.Labels["job"] = "other"
		squatter.Spec.NodeName = nodes[1]
		createAll(t, c, ns, squatter)
		highConstrainedGang(t, c, ns, "w", 3, 3, func(i int) *corev1.Pod {
			return constrainedPod(fmt.Sprintf("w-%d", i), suite, "w", hostPort(8080))
		})
		waitGone(t, c, ns, "squatter")
		bound := waitAllBound(t, c, ns, 3)
		assert.Len(t, nodeSet(bound), 3)
	})

	t.Run("members beyond minCount preempt too", func(t *testing.T) {
		ns := namespace(t, c)
		suite := "p-beyond"
		nodes := suiteNodes(t, c, suite, 0, 4, nil)
		for i, n := range nodes {
			p := constrainedPod(fmt.Sprintf("low-%d", i), suite, "", withPriority("low"), withCPU("32"))
			p.Labels["job"] = "other"
			p.Spec.NodeName = n
			createAll(t, c, ns, p)
		}
		highConstrainedGang(t, c, ns, "w", 3, 4, func(i int) *corev1.Pod {
			return constrainedPod(fmt.Sprintf("w-%d", i), suite, "w", withCPU("32"))
		})
		eventually(t, 60*time.Second, "all 4 members bound", func() (bool, error) {
			return boundWithPrefix(t, c, ns, "w-") == 4, nil
		})
		assert.Empty(t, podNames(t, c, ns, "low-"))
	})

	t.Run("a member added to a running gang preempts inside the gang's domain", func(t *testing.T) {
		ns := namespace(t, c)
		suite := "p-join"
		// rack-a has 3 nodes, rack-b 1: the 2-pod gang takes rack-a.
		nodes := suiteNodes(t, c, suite, 0, 4, func(i int) map[string]string {
			return map[string]string{"topology.phalanx.dev/rack": map[bool]string{true: "rack-a", false: "rack-b"}[i < 3]}
		})
		pg := gangPG("w", 2)
		pg.Spec.PriorityClassName = "high"
		pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo("topology.phalanx.dev/rack")}
		createPodGroup(t, c, ns, pg)
		for i := range 2 {
			p := constrainedPod(fmt.Sprintf("w-%d", i), suite, "w", withCPU("32"))
			p.Spec.PriorityClassName = "high"
			createAll(t, c, ns, p)
		}
		eventually(t, 45*time.Second, "the gang bound", func() (bool, error) {
			return boundWithPrefix(t, c, ns, "w-") == 2, nil
		})
		used := map[string]bool{}
		for _, n := range boundPods(t, c, ns) {
			used[n] = true
		}
		// Low-priority pods fill the rest of both racks.
		for _, n := range nodes {
			if !used[n] {
				p := constrainedPod("low-"+n, suite, "", withPriority("low"), withCPU("32"))
				p.Labels["job"] = "other"
				p.Spec.NodeName = n
				createAll(t, c, ns, p)
			}
		}
		joiner := constrainedPod("w-2", suite, "w", withCPU("32"))
		joiner.Spec.PriorityClassName = "high"
		createAll(t, c, ns, joiner)
		eventually(t, 45*time.Second, "the third member bound", func() (bool, error) {
			return boundPods(t, c, ns)["w-2"] != "", nil
		})
		assert.NotEqual(t, nodes[3], boundPods(t, c, ns)["w-2"], "the joining member left the gang's rack")
		assert.Equal(t, []string{"low-" + nodes[3]}, podNames(t, c, ns, "low-"), "only the pod in the gang's rack is evicted")
	})
}

// TestRefusedPlanIsNotRepeated: a per-node limit the probe cannot see (CSI
// attach limits count the volumes of the members already placed) refuses
// the second member on the node the plan packed both onto. The next plan
// must not repeat that: the gang binds one member per node.
func TestRefusedPlanIsNotRepeated(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	ctx := context.Background()
	ns := namespace(t, c)
	suite := "csi"
	const driver = "attach.csi.phalanx.dev"
	nodes := suiteNodes(t, c, suite, 0, 2, nil)
	for _, n := range nodes {
		_, err := c.Client.StorageV1().CSINodes().Create(ctx, &storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{Name: n},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
				Name: driver, NodeID: n, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](1)},
			}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	createPodGroup(t, c, ns, gangPG("w", 2))
	for i := range 2 {
		pvName := fmt.Sprintf("%s-pv-%d", ns, i)
		claim := fmt.Sprintf("data-%d", i)
		pv, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: pvName},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: pvName}},
				ClaimRef:               &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: ns, Name: claim},
				StorageClassName:       "",
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		pv.Status.Phase = corev1.VolumeBound
		_, err = c.Client.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{})
		require.NoError(t, err)
		// Pre-bound both ways, as the PV controller (not running here)
		// would leave them.
		pvc, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: claim, Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				VolumeName:       pvName,
				StorageClassName: ptr.To(""),
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		pvc.Status.Phase = corev1.ClaimBound
		_, err = c.Client.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
		require.NoError(t, err)
		createAll(t, c, ns, constrainedPod(fmt.Sprintf("w-%d", i), suite, "w", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
		}))
	}
	bound := waitAllBound(t, c, ns, 2)
	assert.Len(t, nodeSet(bound), 2, "both members on one node past its attach limit: %v", bound)
}
