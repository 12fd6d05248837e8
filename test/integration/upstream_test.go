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
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/sandbox"
)

// Scenarios of upstream v1.37.2's podgroup integration tests, restated in
// Phalanx's terms (PodGroup CRDs, label attachment, phalanx-scheduler) so
// they act as acceptance tests. docs/upstream-acceptance.md maps every
// upstream case to the test here or elsewhere that covers it. Each subtest
// owns its namespace and its nodes (reached through the suite label), so
// one sandbox serves a whole top-level test.

// upstreamNodes adds n nodes named suite-1..suite-n (1-based, as upstream
// names them) with the given cpu, reachable only by the suite's pods.
func upstreamNodes(t *testing.T, c *sandbox.Cluster, suite string, n int, cpu string, label func(i int) map[string]string) []string {
	t.Helper()
	return suiteNodesWith(t, c, suite, 1, n, corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(cpu),
		corev1.ResourceMemory: resource.MustParse("4Gi"),
		corev1.ResourcePods:   resource.MustParse("32"),
	}, label)
}

// upstreamPriorities are the priority values the upstream cases use; a
// Phalanx group names its priority through a PriorityClass, so each value
// gets one.
var upstreamPriorities = []int32{5, 10, 15, 50, 100, 200, 500}

func prio(v int32) string { return fmt.Sprintf("u-%d", v) }

func createUpstreamPriorities(t *testing.T, c *sandbox.Cluster) {
	t.Helper()
	for _, v := range upstreamPriorities {
		_, err := c.Client.SchedulingV1().PriorityClasses().Create(context.Background(),
			&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: prio(v)}, Value: v}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

func onNode(node string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeName = node }
}

func selectHost(node string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeSelector[sandbox.HostnameLabel] = node }
}

// antiAffinityExists repels every pod carrying the label key at all.
func antiAffinityExists(label, topologyKey string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
					Key: label, Operator: metav1.LabelSelectorOpExists,
				}}},
				TopologyKey: topologyKey,
			}},
		}}
	}
}

// podLevelCPU moves the cpu request from the container to the pod.
func podLevelCPU(cpu string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
		p.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}
	}
}

// upPod is a pod of the suite at priority value v; group may be empty.
// Victims go away at once, as upstream's zero grace period makes them.
func upPod(name, suite, group string, v int32, cpu string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	p := constrainedPod(name, suite, group, withCPU(cpu), withPriority(prio(v)))
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	for _, m := range mutate {
		m(p)
	}
	return p
}

func upGang(name string, minCount, v int32, mutate ...func(*v1alpha1.PodGroup)) *v1alpha1.PodGroup {
	pg := gangPG(name, minCount)
	pg.Spec.PriorityClassName = prio(v)
	for _, m := range mutate {
		m(pg)
	}
	return pg
}

func upBasic(name string, v int32, mutate ...func(*v1alpha1.PodGroup)) *v1alpha1.PodGroup {
	pg := upGang(name, 1, v, mutate...)
	pg.Spec.SchedulingPolicy = v1alpha1.PodGroupSchedulingPolicy{Basic: &v1alpha1.BasicSchedulingPolicy{}}
	return pg
}

func disruptAll(pg *v1alpha1.PodGroup) {
	pg.Spec.DisruptionMode = &v1alpha1.DisruptionMode{All: &v1alpha1.AllDisruptionMode{}}
}

func TestUpstreamPodGroupConstraints(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	createUpstreamPriorities(t, c)

	// The anti-affinity pod is pinned to the first node by selector; its
	// sibling carries the label it repels but no anti-affinity of its own,
	// so only the sibling-to-sibling check keeps them apart.
	antiPair := func(suite, first string) []*corev1.Pod {
		foo := withLabels(map[string]string{"app": "foo"})
		return []*corev1.Pod{
			upPod("anti-pod", suite, "pg", 200, "1", foo, selectHost(first), antiAffinity(sandbox.HostnameLabel, map[string]string{"app": "foo"})),
			upPod("plain-pod", suite, "pg", 200, "1", foo),
		}
	}

	t.Run("podgroup_affinity: anti-affinity honored across the cycle on a multi-topology cluster", func(t *testing.T) {
		ns := namespace(t, c)
		nodes := upstreamNodes(t, c, "u-aff-multi", 2, "2", nil)
		createPodGroup(t, c, ns, upGang("pg", 2, 200))
		createAll(t, c, ns, antiPair("u-aff-multi", nodes[0])...)
		bound := waitAllBound(t, c, ns, 2)
		assert.Equal(t, nodes[0], bound["anti-pod"])
		assert.Equal(t, nodes[1], bound["plain-pod"])
	})

	t.Run("podgroup_affinity: anti-affinity keeps the group unschedulable on a single-topology cluster", func(t *testing.T) {
		ns := namespace(t, c)
		nodes := upstreamNodes(t, c, "u-aff-single", 1, "2", nil)
		createPodGroup(t, c, ns, upGang("pg", 2, 200))
		createAll(t, c, ns, antiPair("u-aff-single", nodes[0])...)
		failedSchedulingFor(t, c, ns, "plain-pod")
		consistently(t, 5*time.Second, "neither member binds", func() bool { return len(boundPods(t, c, ns)) == 0 })
		cond := groupCondition(t, c, ns, "pg", v1alpha1.PodGroupSchedulable)
		require.NotNil(t, cond, "the group says why it waits")
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
	})

	// A ReadWriteOncePod claim already bound to a volume: only one pod in
	// the cluster may use it, so two members sharing it cannot both run.
	rwopClaim := func(t *testing.T, ns, name string) {
		t.Helper()
		ctx := context.Background()
		dirOrCreate := corev1.HostPathDirectoryOrCreate
		size := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv-" + ns + "-" + name},
			Spec: corev1.PersistentVolumeSpec{
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod},
				Capacity:               size,
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/mnt", Type: &dirOrCreate}},
			},
		}
		_, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
		require.NoError(t, err)
		pvc := &corev1.PersistentVolumeClaim{
			// The bind-completed annotation and the volume name make the
			// claim count as bound without a volume controller.
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"pv.kubernetes.io/bind-completed": "yes"}},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOncePod},
				Resources:   corev1.VolumeResourceRequirements{Requests: size},
				VolumeName:  pv.Name,
			},
		}
		_, err = c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	withClaim := func(claim string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim},
			}}}
		}
	}

	t.Run("podgroup_pvc: two pods sharing a ReadWriteOncePod PVC keep the group unschedulable", func(t *testing.T) {
		ns := namespace(t, c)
		suite := "u-pvc-shared"
		upstreamNodes(t, c, suite, 1, "2", nil)
		rwopClaim(t, ns, "pvc-1")
		createPodGroup(t, c, ns, upGang("pg", 2, 200))
		createAll(t, c, ns,
			upPod("pvc-pod-1", suite, "pg", 200, "1", withClaim("pvc-1")),
			upPod("pvc-pod-2", suite, "pg", 200, "1", withClaim("pvc-1")))
		failedSchedulingFor(t, c, ns, "pvc-pod-2")
		consistently(t, 5*time.Second, "neither member binds", func() bool { return len(boundPods(t, c, ns)) == 0 })
		cond := groupCondition(t, c, ns, "pg", v1alpha1.PodGroupSchedulable)
		require.NotNil(t, cond)
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
	})

	t.Run("podgroup_pvc: two pods with distinct ReadWriteOncePod PVCs are scheduled", func(t *testing.T) {
		ns := namespace(t, c)
		suite := "u-pvc-distinct"
		upstreamNodes(t, c, suite, 1, "2", nil)
		rwopClaim(t, ns, "pvc-1")
		rwopClaim(t, ns, "pvc-2")
		createPodGroup(t, c, ns, upGang("pg", 2, 200))
		createAll(t, c, ns,
			upPod("pvc-pod-1", suite, "pg", 200, "1", withClaim("pvc-1")),
			upPod("pvc-pod-2", suite, "pg", 200, "1", withClaim("pvc-2")))
		waitAllBound(t, c, ns, 2)
	})
}

// upPreemption is one upstream preemption case: nodes of nodeCPU each,
// groups, pods already running (pinned where upstream pins them, on the
// only node otherwise), then the preemptors. Outcomes: which initial pods
// are evicted and which are kept, and how many preemptors bind (upstream
// names which ones only because its queue order is fixed; the count is the
// behaviour).
type upPreemption struct {
	name       string
	nodes      int
	nodeCPU    string
	nodeLabel  func(i int) map[string]string
	groups     []*v1alpha1.PodGroup
	initial    func(suite string, nodes []string) []*corev1.Pod
	preemptors func(suite string, nodes []string) []*corev1.Pod
	evicted    []string
	kept       []string
	bound      int
	// before runs once the namespace exists, before any pod.
	before func(t *testing.T, ns string)
}

func TestUpstreamPodGroupPreemption(t *testing.T) {
	c := preemptionCluster(t, nil)
	createUpstreamPriorities(t, c)
	const zoneKey = "topology.phalanx.dev/upstream-zone"

	lows := func(n int, v int32, cpu string) func(string, []string) []*corev1.Pod {
		return func(suite string, nodes []string) []*corev1.Pod {
			var out []*corev1.Pod
			for i := 1; i <= n; i++ {
				out = append(out, upPod(fmt.Sprintf("low-%d", i), suite, "", v, cpu, onNode(nodes[0])))
			}
			return out
		}
	}
	members := func(prefix, group string, n int, v int32, cpu string, mutate ...func(*corev1.Pod)) func(string, []string) []*corev1.Pod {
		return func(suite string, _ []string) []*corev1.Pod {
			var out []*corev1.Pod
			for i := 1; i <= n; i++ {
				out = append(out, upPod(fmt.Sprintf("%s%d", prefix, i), suite, group, v, cpu, mutate...))
			}
			return out
		}
	}
	// oneEach pins pod i (named names[i]) at priority prios[i] to node i.
	oneEach := func(names []string, groups []string, prios []int32) func(string, []string) []*corev1.Pod {
		return func(suite string, nodes []string) []*corev1.Pod {
			var out []*corev1.Pod
			for i, n := range names {
				out = append(out, upPod(n, suite, groups[i], prios[i], "1", onNode(nodes[i])))
			}
			return out
		}
	}
	zones := func(i int) map[string]string {
		return map[string]string{zoneKey: map[bool]string{true: "zone1", false: "zone2"}[i <= 2]}
	}
	inZoneGang := func(pg *v1alpha1.PodGroup) {
		pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(zoneKey)}
	}
	foo := map[string]string{"app": "foo"}
	// spreadMinDomains is upstream's spread: maxSkew 2 over hostnames,
	// counting app=foo, with more domains required than exist, so the
	// least loaded domain counts as empty.
	spreadMinDomains := func(p *corev1.Pod) {
		spreadOn(sandbox.HostnameLabel, 2, foo)(p)
		p.Spec.TopologySpreadConstraints[0].MinDomains = ptr.To[int32](10)
	}

	cases := []upPreemption{
		{
			name:  "Full PodGroup Preemption",
			nodes: 1, nodeCPU: "3",
			groups:     []*v1alpha1.PodGroup{upGang("pg1", 3, 100)},
			initial:    lows(3, 10, "1"),
			preemptors: members("high-", "pg1", 3, 100, "1"),
			evicted:    []string{"low-1", "low-2", "low-3"}, bound: 3,
		},
		{
			name:  "Full PodGroup Preemption for basic policy",
			nodes: 1, nodeCPU: "3",
			groups:     []*v1alpha1.PodGroup{upBasic("pg1", 100)},
			initial:    lows(3, 10, "1"),
			preemptors: members("high-", "pg1", 3, 100, "1"),
			evicted:    []string{"low-1", "low-2", "low-3"}, bound: 3,
		},
		{
			name:  "PodGroup with PreemptLowerPriority preemption policy performs preemption",
			nodes: 1, nodeCPU: "3",
			groups: []*v1alpha1.PodGroup{upGang("pg1", 3, 100, func(pg *v1alpha1.PodGroup) {
				pg.Spec.PreemptionPolicy = ptr.To(v1alpha1.PreemptLowerPriority)
			})},
			initial:    lows(3, 10, "1"),
			preemptors: members("high-", "pg1", 3, 100, "1"),
			evicted:    []string{"low-1", "low-2", "low-3"}, bound: 3,
		},
		{
			// Upstream steers the members to the first node with a score
			// plugin; here it needs none: evicting low-2 alone leaves two
			// slots, so only evicting low-1 makes room for three.
			name:  "Partial Preemption",
			nodes: 2, nodeCPU: "2",
			groups: []*v1alpha1.PodGroup{upGang("pg1", 3, 100)},
			initial: func(suite string, nodes []string) []*corev1.Pod {
				return []*corev1.Pod{upPod("low-1", suite, "", 10, "2", onNode(nodes[0])), upPod("low-2", suite, "", 10, "1", onNode(nodes[1]))}
			},
			preemptors: members("high-", "pg1", 3, 100, "1"),
			evicted:    []string{"low-1"}, kept: []string{"low-2"}, bound: 3,
		},
		{
			// low-1 and low-2 are guarded by a budget that allows no
			// disruption, so the free victim low-3 is taken instead.
			name:  "PDB Violation Handling (Reprieve)",
			nodes: 1, nodeCPU: "3",
			before: func(t *testing.T, ns string) {
				pdb := &policyv1.PodDisruptionBudget{
					ObjectMeta: metav1.ObjectMeta{Name: "foo-pdb"},
					Spec: policyv1.PodDisruptionBudgetSpec{
						MinAvailable: ptr.To(intstr.FromInt32(2)),
						Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "foo"}},
					},
				}
				_, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Create(context.Background(), pdb, metav1.CreateOptions{})
				require.NoError(t, err)
			},
			groups: []*v1alpha1.PodGroup{upGang("pg1", 2, 100)},
			initial: func(suite string, nodes []string) []*corev1.Pod {
				foo := withLabels(map[string]string{"app": "foo"})
				return []*corev1.Pod{
					upPod("low-1", suite, "", 10, "1", foo, onNode(nodes[0])), upPod("low-2", suite, "", 10, "1", foo, onNode(nodes[0])),
					upPod("low-3", suite, "", 10, "1", onNode(nodes[0])),
				}
			},
			preemptors: members("high-", "pg1", 2, 100, "500m"),
			evicted:    []string{"low-3"}, kept: []string{"low-1", "low-2"}, bound: 2,
		},
		{
			name:  "Multi-node Preemption",
			nodes: 2, nodeCPU: "2",
			groups: []*v1alpha1.PodGroup{upGang("pg1", 4, 100)},
			initial: func(suite string, nodes []string) []*corev1.Pod {
				return []*corev1.Pod{
					upPod("low-1", suite, "", 10, "1", onNode(nodes[0])), upPod("low-2", suite, "", 10, "1", onNode(nodes[0])),
					upPod("low-3", suite, "", 10, "1", onNode(nodes[1])), upPod("low-4", suite, "", 10, "1", onNode(nodes[1])),
				}
			},
			preemptors: members("high-", "pg1", 4, 100, "1"),
			evicted:    []string{"low-1", "low-2", "low-3", "low-4"}, bound: 4,
		},
		{
			name:  "Insufficient Resources (No Preemption)",
			nodes: 1, nodeCPU: "3",
			groups: []*v1alpha1.PodGroup{upGang("pg1", 3, 100)},
			initial: func(suite string, nodes []string) []*corev1.Pod {
				return []*corev1.Pod{
					upPod("mid-1", suite, "", 500, "1", onNode(nodes[0])),
					upPod("low-1", suite, "", 10, "1", onNode(nodes[0])), upPod("low-2", suite, "", 10, "1", onNode(nodes[0])),
				}
			},
			preemptors: members("high-", "pg1", 3, 100, "1"),
			kept:       []string{"mid-1", "low-1", "low-2"}, bound: 0,
		},
		{
			name:  "Priority-based Victim Selection",
			nodes: 1, nodeCPU: "3",
			groups: []*v1alpha1.PodGroup{upGang("pg1", 2, 100)},
			initial: func(suite string, nodes []string) []*corev1.Pod {
				return []*corev1.Pod{
					upPod("mid-1", suite, "", 50, "1", onNode(nodes[0])),
					upPod("low-1", suite, "", 10, "1", onNode(nodes[0])), upPod("low-2", suite, "", 10, "1", onNode(nodes[0])),
				}
			},
			preemptors: members("high-", "pg1", 2, 100, "1"),
			evicted:    []string{"low-1", "low-2"}, kept: []string{"mid-1"}, bound: 2,
		},
		{
			name:  "Preempt the whole PodGroup even if preempting a single Pod would suffice",
			nodes: 1, nodeCPU: "3",
			groups: []*v1alpha1.PodGroup{upGang("pg1", 1, 100), upGang("pg2", 3, 10, disruptAll)},
			initial: func(suite string, nodes []string) []*corev1.Pod {
				return members("low-", "pg2", 3, 10, "1", onNode(nodes[0]))(suite, nodes)
			},
			preemptors: members("high-", "pg1", 1, 100, "1"),
			evicted:    []string{"low-1", "low-2", "low-3"}, bound: 1,
		},
		{
			name:  "Gang scheduling: do not reprieve victim pod group of lower priority",
			nodes: 3, nodeCPU: "1",
			groups:     []*v1alpha1.PodGroup{upGang("victim-pg", 1, 50, disruptAll), upGang("preemptor-pg", 3, 100)},
			initial:    oneEach([]string{"v1", "v2", "v3"}, []string{"victim-pg", "victim-pg", ""}, []int32{50, 50, 10}),
			preemptors: members("p-", "preemptor-pg", 3, 100, "1"),
			evicted:    []string{"v1", "v2", "v3"}, bound: 3,
		},
		{
			name:  "Gang scheduling: preempt a pod group victim but do not schedule full pod group",
			nodes: 4, nodeCPU: "1",
			groups: []*v1alpha1.PodGroup{
				upGang("victim-pg", 2, 50, disruptAll), upGang("victim-pg2", 2, 200, disruptAll), upGang("preemptor-pg", 1, 100, disruptAll),
			},
			initial:    oneEach([]string{"v1", "v2", "v3", "v4"}, []string{"victim-pg", "victim-pg", "victim-pg2", "victim-pg2"}, []int32{50, 50, 200, 200}),
			preemptors: members("p-", "preemptor-pg", 3, 100, "1"),
			evicted:    []string{"v1", "v2"}, kept: []string{"v3", "v4"}, bound: 2,
		},
		{
			name:  "Gang scheduling: schedule as many pods as possible without preempting higher priority pods, but still more than minCount",
			nodes: 4, nodeCPU: "1",
			groups:     []*v1alpha1.PodGroup{upGang("preemptor-pg", 1, 100)},
			initial:    oneEach([]string{"p1", "p2", "p3", "p4"}, []string{"", "", "", ""}, []int32{10, 10, 200, 200}),
			preemptors: members("p-", "preemptor-pg", 3, 100, "1"),
			evicted:    []string{"p1", "p2"}, kept: []string{"p3", "p4"}, bound: 2,
		},
		{
			name:  "Basic scheduling: schedule as many pods as possible without preempting higher priority pods",
			nodes: 4, nodeCPU: "1",
			groups:     []*v1alpha1.PodGroup{upBasic("preemptor-pg", 100)},
			initial:    oneEach([]string{"p1", "p2", "p3", "p4"}, []string{"", "", "", ""}, []int32{10, 10, 200, 200}),
			preemptors: members("p-", "preemptor-pg", 3, 100, "1"),
			evicted:    []string{"p1", "p2"}, kept: []string{"p3", "p4"}, bound: 2,
		},
		{
			name:  "Basic scheduling: do not reprieve victim pod group of lower priority",
			nodes: 3, nodeCPU: "1",
			groups:     []*v1alpha1.PodGroup{upGang("victim-pg", 1, 50, disruptAll), upBasic("preemptor-pg", 100)},
			initial:    oneEach([]string{"v1", "v2", "v3"}, []string{"victim-pg", "victim-pg", ""}, []int32{50, 50, 10}),
			preemptors: members("p-", "preemptor-pg", 3, 100, "1"),
			evicted:    []string{"v1", "v2", "v3"}, bound: 3,
		},
		{
			// Upstream also gives the basic preemptor group disruptionMode
			// all; Phalanx's PodGroup refuses all with the basic policy, and
			// the preemptor's own disruption mode plays no part in what is
			// asserted (which victims go, how many preemptors bind).
			name:  "Basic scheduling: preempt a pod group victim but do not schedule full pod group",
			nodes: 4, nodeCPU: "1",
			groups: []*v1alpha1.PodGroup{
				upGang("victim-pg", 2, 50, disruptAll), upGang("victim-pg2", 2, 200, disruptAll), upBasic("preemptor-pg", 100),
			},
			initial:    oneEach([]string{"v1", "v2", "v3", "v4"}, []string{"victim-pg", "victim-pg", "victim-pg2", "victim-pg2"}, []int32{50, 50, 200, 200}),
			preemptors: members("p-", "preemptor-pg", 3, 100, "1"),
			evicted:    []string{"v1", "v2"}, kept: []string{"v3", "v4"}, bound: 2,
		},
		{
			name:  "Gang scheduling: preemption with node resources",
			nodes: 2, nodeCPU: "2",
			groups: []*v1alpha1.PodGroup{upGang("preemptor-pg", 2, 100)},
			initial: func(suite string, nodes []string) []*corev1.Pod {
				return []*corev1.Pod{upPod("initial-pod", suite, "", 10, "2", onNode(nodes[0]))}
			},
			preemptors: members("preemptor-", "preemptor-pg", 2, 100, "2"),
			evicted:    []string{"initial-pod"}, bound: 2,
		},
		{
			name:  "Gang scheduling: preemption with node resources, prioritizes reprieval of higher priority pods",
			nodes: 2, nodeCPU: "2",
			groups: []*v1alpha1.PodGroup{upGang("preemptor-pg", 2, 100)},
			initial: func(suite string, nodes []string) []*corev1.Pod {
				return []*corev1.Pod{
					upPod("initial-pod-1", suite, "", 5, "1", onNode(nodes[0])),
					upPod("initial-pod-2", suite, "", 10, "1", onNode(nodes[0])),
				}
			},
			preemptors: func(suite string, nodes []string) []*corev1.Pod {
				return []*corev1.Pod{
					upPod("preemptor-1", suite, "preemptor-pg", 100, "1", selectHost(nodes[0])),
					upPod("preemptor-2", suite, "preemptor-pg", 100, "1", selectHost(nodes[1])),
				}
			},
			evicted: []string{"initial-pod-1"}, kept: []string{"initial-pod-2"}, bound: 2,
		},
		{
			name:  "Gang scheduling: preemption with pod level resources",
			nodes: 2, nodeCPU: "2",
			groups: []*v1alpha1.PodGroup{upGang("preemptor-pg", 2, 100)},
			initial: func(suite string, nodes []string) []*corev1.Pod {
				return []*corev1.Pod{upPod("initial-pod", suite, "", 10, "1", podLevelCPU("2"), withLabels(map[string]string{"app": "initial"}), onNode(nodes[0]))}
			},
			preemptors: members("preemptor-", "preemptor-pg", 2, 100, "1", podLevelCPU("2"), antiAffinityExists("app", sandbox.HostnameLabel)),
			evicted:    []string{"initial-pod"}, bound: 2,
		},
		{
			name:  "Gang scheduling: preemption with pod anti-affinity constraints",
			nodes: 2, nodeCPU: "2",
			groups: []*v1alpha1.PodGroup{upGang("preemptor-pg", 2, 100)},
			initial: func(suite string, nodes []string) []*corev1.Pod {
				return []*corev1.Pod{upPod("initial-pod", suite, "", 10, "250m", withLabels(map[string]string{"app": "initial"}), onNode(nodes[0]))}
			},
			preemptors: members("preemptor-", "preemptor-pg", 2, 100, "1500m", antiAffinityExists("app", sandbox.HostnameLabel)),
			evicted:    []string{"initial-pod"}, bound: 2,
		},
		{
			name:  "Gang scheduling: preemption with pod node port",
			nodes: 2, nodeCPU: "2",
			groups: []*v1alpha1.PodGroup{upGang("preemptor-pg", 2, 100)},
			initial: func(suite string, nodes []string) []*corev1.Pod {
				return []*corev1.Pod{upPod("initial-pod", suite, "", 10, "250m", hostPort(8080), onNode(nodes[0]))}
			},
			preemptors: members("preemptor-", "preemptor-pg", 2, 100, "1500m", hostPort(8080)),
			evicted:    []string{"initial-pod"}, bound: 2,
		},
		{
			// The members' own spread counts initial-pod: with it, node 1
			// would hold three app=foo pods, one more than maxSkew 2 above
			// the empty domains minDomains 10 implies. There is room for
			// it; only the spread makes it a victim.
			name:  "Gang scheduling: preemption with pod topology spread constraints",
			nodes: 2, nodeCPU: "16",
			groups: []*v1alpha1.PodGroup{upGang("preemptor-pg", 2, 100)},
			initial: func(suite string, nodes []string) []*corev1.Pod {
				return []*corev1.Pod{upPod("initial-pod", suite, "", 10, "1", withLabels(foo), onNode(nodes[0]))}
			},
			preemptors: func(suite string, nodes []string) []*corev1.Pod {
				return members("preemptor-", "preemptor-pg", 2, 100, "1", withLabels(foo), selectHost(nodes[0]), spreadMinDomains)(suite, nodes)
			},
			evicted: []string{"initial-pod"}, bound: 2,
		},
		{
			// initial-pod-2 has the lower priority, but on node 2 it adds
			// nothing to node 1's count: it stays.
			name:  "Gang scheduling: preemption with pod topology spread constraints, single reprieve",
			nodes: 2, nodeCPU: "16",
			groups: []*v1alpha1.PodGroup{upGang("preemptor-pg", 2, 100)},
			initial: func(suite string, nodes []string) []*corev1.Pod {
				return []*corev1.Pod{
					upPod("initial-pod", suite, "", 10, "1", withLabels(foo), onNode(nodes[0])),
					upPod("initial-pod-2", suite, "", 5, "1", withLabels(foo), onNode(nodes[1])),
				}
			},
			preemptors: func(suite string, nodes []string) []*corev1.Pod {
				return members("preemptor-", "preemptor-pg", 2, 100, "1", withLabels(foo), selectHost(nodes[0]), spreadMinDomains)(suite, nodes)
			},
			evicted: []string{"initial-pod"}, kept: []string{"initial-pod-2"}, bound: 2,
		},
		{
			// Upstream removes the group while its first members bind so the
			// last two arrive together; here they simply join the running
			// gang. The outcome is the same: one fits as is, the other needs
			// the low-priority pod's room.
			name:  "Binding first before preemption for gang policy",
			nodes: 1, nodeCPU: "4",
			groups: []*v1alpha1.PodGroup{upGang("pg1", 2, 100)},
			initial: func(suite string, nodes []string) []*corev1.Pod {
				return []*corev1.Pod{
					upPod("pg-pod-1", suite, "pg1", 100, "1", onNode(nodes[0])), upPod("pg-pod-2", suite, "pg1", 100, "1", onNode(nodes[0])),
					upPod("low-1", suite, "", 10, "1", onNode(nodes[0])),
				}
			},
			preemptors: members("high-", "pg1", 2, 100, "1"),
			evicted:    []string{"low-1"}, kept: []string{"pg-pod-1", "pg-pod-2"}, bound: 2,
		},
		{
			name:  "Binding first before preemption for basic policy",
			nodes: 1, nodeCPU: "4",
			groups: []*v1alpha1.PodGroup{upBasic("pg1", 100)},
			initial: func(suite string, nodes []string) []*corev1.Pod {
				return []*corev1.Pod{
					upPod("pg-pod-1", suite, "pg1", 100, "1", onNode(nodes[0])), upPod("pg-pod-2", suite, "pg1", 100, "1", onNode(nodes[0])),
					upPod("low-1", suite, "", 10, "1", onNode(nodes[0])),
				}
			},
			preemptors: members("high-", "pg1", 2, 100, "1"),
			evicted:    []string{"low-1"}, kept: []string{"pg-pod-1", "pg-pod-2"}, bound: 2,
		},
		{
			name:  "Topology-Aware Preemption: single topology domain",
			nodes: 2, nodeCPU: "1", nodeLabel: zones,
			groups:     []*v1alpha1.PodGroup{upGang("pg1", 2, 100, inZoneGang)},
			initial:    oneEach([]string{"low-1", "low-2"}, []string{"", ""}, []int32{10, 10}),
			preemptors: members("high-", "pg1", 2, 100, "1"),
			evicted:    []string{"low-1", "low-2"}, bound: 2,
		},
		{
			name:  "Topology-Aware Preemption: two topologies, only one eligible",
			nodes: 4, nodeCPU: "1", nodeLabel: zones,
			groups: []*v1alpha1.PodGroup{upGang("pg1", 2, 100, inZoneGang)},
			initial: oneEach([]string{"low-1", "low-2", "high-priority-initial-1", "high-priority-initial-2"},
				[]string{"", "", "", ""}, []int32{10, 10, 200, 200}),
			preemptors: members("high-", "pg1", 2, 100, "1"),
			evicted:    []string{"low-1", "low-2"}, kept: []string{"high-priority-initial-1", "high-priority-initial-2"}, bound: 2,
		},
		{
			name:  "Topology-Aware Preemption: insufficient capacity across all topologies, no preemption performed",
			nodes: 4, nodeCPU: "1", nodeLabel: zones,
			groups: []*v1alpha1.PodGroup{upGang("pg1", 2, 100, inZoneGang)},
			initial: oneEach([]string{"low-1", "high-priority-initial-1", "low-2", "high-priority-initial-2"},
				[]string{"", "", "", ""}, []int32{10, 200, 10, 200}),
			preemptors: members("high-", "pg1", 2, 100, "1"),
			kept:       []string{"low-1", "low-2", "high-priority-initial-1", "high-priority-initial-2"}, bound: 0,
		},
	}

	for i, tc := range cases {
		t.Run("podgrouppreemption: "+tc.name, func(t *testing.T) {
			ns := namespace(t, c)
			suite := fmt.Sprintf("u-pre-%d", i)
			t.Cleanup(func() {
				if t.Failed() {
					dumpOutcome(t, c, ns)
				}
			})
			nodes := upstreamNodes(t, c, suite, tc.nodes, tc.nodeCPU, tc.nodeLabel)
			if tc.before != nil {
				tc.before(t, ns)
			}
			for _, pg := range tc.groups {
				createPodGroup(t, c, ns, pg.DeepCopy())
			}
			initial := tc.initial(suite, nodes)
			createAll(t, c, ns, initial...)
			waitAllBound(t, c, ns, len(initial))
			preemptors := tc.preemptors(suite, nodes)
			createAll(t, c, ns, preemptors...)
			countBound := func() int {
				bound := boundPods(t, c, ns)
				n := 0
				for _, p := range preemptors {
					if bound[p.Name] != "" {
						n++
					}
				}
				return n
			}
			if tc.bound > 0 {
				eventually(t, 60*time.Second, fmt.Sprintf("%d preemptors bound", tc.bound), func() (bool, error) {
					return countBound() >= tc.bound, nil
				})
			} else {
				failedSchedulingFor(t, c, ns, preemptors[0].Name)
			}
			for _, v := range tc.evicted {
				waitGone(t, c, ns, v)
			}
			// Nothing more happens: no further preemptor binds, no further
			// pod is evicted.
			consistently(t, 3*time.Second, "the outcome holds", func() bool {
				if countBound() != tc.bound {
					return false
				}
				for _, k := range tc.kept {
					if len(podNames(t, c, ns, k)) == 0 {
						return false
					}
				}
				return true
			})
			bound := boundPods(t, c, ns)
			for _, k := range tc.kept {
				assert.NotEmpty(t, bound[k], "%s kept running", k)
			}
			assert.Equal(t, tc.bound, countBound(), "preemptors bound")
		})
	}
}

// dumpOutcome logs where the namespace's pods are and why the scheduler
// left any pending, so a failing case says what happened instead.
func dumpOutcome(t *testing.T, c *sandbox.Cluster, ns string) {
	ctx := context.Background()
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, p := range pods.Items {
			t.Logf("pod %s node=%q nominated=%q deleting=%v", p.Name, p.Spec.NodeName, p.Status.NominatedNodeName, p.DeletionTimestamp != nil)
		}
	}
	evs, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range evs.Items {
			t.Logf("event %s %s: %s", e.Regarding.Name, e.Reason, e.Note)
		}
	}
}

// TestUpstreamPodGroupScheduling restates upstream's podgroup_test.go
// scenarios: one 4-cpu node per subtest, 1-cpu members at priority 100.
func TestUpstreamPodGroupScheduling(t *testing.T) {
	// Victims and deleted blockers must really go away, so a node agent runs.
	c := preemptionCluster(t, nil)
	createUpstreamPriorities(t, c)
	const zoneKey = "topology.phalanx.dev/upstream-zone"

	setup := func(t *testing.T, suite string) (string, string) {
		ns := namespace(t, c)
		t.Cleanup(func() {
			if t.Failed() {
				dumpOutcome(t, c, ns)
			}
		})
		nodes := upstreamNodes(t, c, suite, 1, "4", func(int) map[string]string { return map[string]string{zoneKey: "zone1"} })
		return ns, nodes[0]
	}
	pods := func(suite, group string, v int32, names ...string) []*corev1.Pod {
		var out []*corev1.Pod
		for _, n := range names {
			out = append(out, upPod(n, suite, group, v, "1"))
		}
		return out
	}
	bound := func(ns string, names ...string) int {
		b := boundPods(t, c, ns)
		n := 0
		for _, name := range names {
			if b[name] != "" {
				n++
			}
		}
		return n
	}
	waitN := func(t *testing.T, ns string, want int, names ...string) {
		t.Helper()
		eventually(t, 45*time.Second, fmt.Sprintf("%d of %v bound", want, names), func() (bool, error) {
			return bound(ns, names...) >= want, nil
		})
	}
	holdN := func(t *testing.T, ns string, want int, names ...string) {
		t.Helper()
		consistently(t, 3*time.Second, fmt.Sprintf("exactly %d of %v bound", want, names), func() bool {
			return bound(ns, names...) == want
		})
	}
	deletePod := func(t *testing.T, ns, name string) {
		t.Helper()
		require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}))
	}

	t.Run("podgroup: gang schedules when pod group and resources are available", func(t *testing.T) {
		suite := "u-pg-ok"
		ns, _ := setup(t, suite)
		createPodGroup(t, c, ns, upGang("pg1", 3, 100))
		createAll(t, c, ns, pods(suite, "pg1", 100, "p1", "p2", "p3")...)
		waitN(t, ns, 3, "p1", "p2", "p3")
	})

	t.Run("podgroup: any available pod group members get scheduled", func(t *testing.T) {
		suite := "u-pg-late"
		ns, _ := setup(t, suite)
		createPodGroup(t, c, ns, upGang("pg1", 3, 100))
		createAll(t, c, ns, pods(suite, "pg1", 100, "p1", "p2", "p3")...)
		waitN(t, ns, 3, "p1", "p2", "p3")
		createAll(t, c, ns, pods(suite, "pg1", 100, "p4")...)
		waitN(t, ns, 4, "p1", "p2", "p3", "p4")
	})

	t.Run("podgroup: gang waits for quorum to start, then schedules", func(t *testing.T) {
		suite := "u-pg-quorum"
		ns, _ := setup(t, suite)
		createPodGroup(t, c, ns, upGang("pg1", 3, 100))
		createAll(t, c, ns, pods(suite, "pg1", 100, "p1", "p2")...)
		holdN(t, ns, 0, "p1", "p2")
		createAll(t, c, ns, pods(suite, "pg1", 100, "p3")...)
		waitN(t, ns, 3, "p1", "p2", "p3")
	})

	t.Run("podgroup: gang waits for pod group, then for resources, then schedules", func(t *testing.T) {
		suite := "u-pg-wait"
		ns, _ := setup(t, suite)
		createAll(t, c, ns, upPod("blocker", suite, "", 100, "2"))
		waitN(t, ns, 1, "blocker")
		createAll(t, c, ns, pods(suite, "pg1", 100, "p1", "p2", "p3")...)
		holdN(t, ns, 0, "p1", "p2", "p3")
		createPodGroup(t, c, ns, upGang("pg1", 3, 100))
		failedSchedulingFor(t, c, ns, "p1")
		holdN(t, ns, 0, "p1", "p2", "p3")
		deletePod(t, ns, "blocker")
		waitN(t, ns, 3, "p1", "p2", "p3")
	})

	t.Run("podgroup: minCount is scheduled, but one pod from a gang remain unschedulable until the blocked resources are released", func(t *testing.T) {
		suite := "u-pg-extra"
		ns, _ := setup(t, suite)
		createAll(t, c, ns, upPod("small-blocker", suite, "", 100, "1"))
		waitN(t, ns, 1, "small-blocker")
		members := []string{"p1", "p2", "p3", "p4"}
		createAll(t, c, ns, pods(suite, "pg1", 100, members...)...)
		createPodGroup(t, c, ns, upGang("pg1", 3, 100))
		waitN(t, ns, 3, members...)
		holdN(t, ns, 3, members...)
		deletePod(t, ns, "small-blocker")
		waitN(t, ns, 4, members...)
	})

	for _, order := range []struct {
		name   string
		pods   []string
		winner string
	}{
		{"two gangs competing for the same resources shouldn't deadlock, reversed order", []string{"other-p3", "p3", "other-p2", "p2", "other-p1", "p1"}, "other"},
		{"two gangs competing for the same resources shouldn't deadlock", []string{"p1", "other-p1", "p2", "other-p2", "p3", "other-p3"}, "pg1"},
	} {
		t.Run("podgroup: "+order.name, func(t *testing.T) {
			suite := "u-pg-race-" + order.winner
			ns, _ := setup(t, suite)
			createPodGroup(t, c, ns, upGang("pg1", 3, 100))
			createPodGroup(t, c, ns, upGang("pg2", 3, 100))
			for _, n := range order.pods {
				group := "pg1"
				if len(n) > 6 && n[:6] == "other-" {
					group = "pg2"
				}
				createAll(t, c, ns, upPod(n, suite, group, 100, "1"))
			}
			// Upstream names the winner by its queue order; the behaviour
			// is that one whole gang binds and the other binds nothing.
			gang1 := []string{"p1", "p2", "p3"}
			gang2 := []string{"other-p1", "other-p2", "other-p3"}
			eventually(t, 45*time.Second, "one whole gang bound", func() (bool, error) {
				return bound(ns, gang1...) == 3 || bound(ns, gang2...) == 3, nil
			})
			consistently(t, 3*time.Second, "the other gang binds nothing", func() bool {
				return bound(ns, gang1...)+bound(ns, gang2...) == 3
			})
		})
	}

	t.Run("podgroup: pod group interleaving with an individual pod shouldn't deadlock nor livelock, and the individual pod gets scheduled", func(t *testing.T) {
		suite := "u-pg-interleave"
		ns, _ := setup(t, suite)
		createPodGroup(t, c, ns, upGang("pg1", 3, 100))
		createAll(t, c, ns, upPod("blocker", suite, "", 100, "2"))
		createAll(t, c, ns, pods(suite, "pg1", 100, "p1", "p2", "p3")...)
		waitN(t, ns, 1, "blocker")
		failedSchedulingFor(t, c, ns, "p1")
		holdN(t, ns, 0, "p1", "p2", "p3")
	})

	t.Run("podgroup: basic group schedules when pod group and resources are available, without gang enforcement", func(t *testing.T) {
		suite := "u-pg-basic"
		ns, _ := setup(t, suite)
		createPodGroup(t, c, ns, upBasic("pg1", 100))
		createAll(t, c, ns, pods(suite, "pg1", 100, "p1")...)
		waitN(t, ns, 1, "p1")
		createAll(t, c, ns, pods(suite, "pg1", 100, "p2", "p3")...)
		waitN(t, ns, 3, "p1", "p2", "p3")
	})

	t.Run("podgroup: basic group waits for pod group, part of it waits for resources, then schedules", func(t *testing.T) {
		suite := "u-pg-basic-wait"
		ns, _ := setup(t, suite)
		createAll(t, c, ns, upPod("blocker", suite, "", 100, "2"))
		waitN(t, ns, 1, "blocker")
		createAll(t, c, ns, pods(suite, "pg1", 100, "p1", "p2", "p3")...)
		holdN(t, ns, 0, "p1", "p2", "p3")
		createPodGroup(t, c, ns, upBasic("pg1", 100))
		waitN(t, ns, 2, "p1", "p2", "p3")
		holdN(t, ns, 2, "p1", "p2", "p3")
		deletePod(t, ns, "blocker")
		waitN(t, ns, 3, "p1", "p2", "p3")
	})

	t.Run("podgroup: basic group schedules with workload-aware preemption", func(t *testing.T) {
		suite := "u-pg-basic-wap"
		ns, _ := setup(t, suite)
		createAll(t, c, ns, upPod("low-priority-blocker", suite, "", 10, "2"))
		waitN(t, ns, 1, "low-priority-blocker")
		createPodGroup(t, c, ns, upBasic("pg1", 100))
		createAll(t, c, ns, pods(suite, "pg1", 100, "p1", "p2", "p3", "p4")...)
		waitN(t, ns, 4, "p1", "p2", "p3", "p4")
		waitGone(t, c, ns, "low-priority-blocker")
	})

	t.Run("podgroup: gang schedules with workload-aware preemption", func(t *testing.T) {
		suite := "u-pg-gang-wap"
		ns, _ := setup(t, suite)
		lows := []string{"low-p1", "low-p2", "low-p3", "low-p4"}
		createAll(t, c, ns, pods(suite, "", 10, lows...)...)
		waitN(t, ns, 4, lows...)
		createPodGroup(t, c, ns, upGang("pg1", 3, 100))
		createAll(t, c, ns, pods(suite, "pg1", 100, "p1", "p2", "p3", "p4")...)
		waitN(t, ns, 4, "p1", "p2", "p3", "p4")
		for _, l := range lows {
			waitGone(t, c, ns, l)
		}
	})

	for _, withTopology := range []bool{false, true} {
		name := "gang schedules with partial workload-aware preemption"
		if withTopology {
			name = "tas gang with constraint uses workload preemption"
		}
		t.Run("podgroup: "+name, func(t *testing.T) {
			suite := fmt.Sprintf("u-pg-partial-%v", withTopology)
			ns, _ := setup(t, suite)
			createAll(t, c, ns, pods(suite, "", 5, "very-low-p1", "very-low-p2")...)
			createAll(t, c, ns, pods(suite, "", 10, "low-p1", "low-p2")...)
			waitN(t, ns, 4, "very-low-p1", "very-low-p2", "low-p1", "low-p2")
			pg := upGang("mid-pg", 2, 50)
			if withTopology {
				pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(zoneKey)}
			}
			createPodGroup(t, c, ns, pg)
			createAll(t, c, ns, pods(suite, "mid-pg", 50, "mid-p1", "mid-p2")...)
			waitN(t, ns, 2, "mid-p1", "mid-p2")
			waitGone(t, c, ns, "very-low-p1")
			waitGone(t, c, ns, "very-low-p2")
			holdN(t, ns, 4, "mid-p1", "mid-p2", "low-p1", "low-p2")
		})
	}

	t.Run("podgroup: workload-aware preemption is invoked (TestWorkloadAwarePreemptionInvocation)", func(t *testing.T) {
		suite := "u-pg-invoked"
		ns, _ := setup(t, suite)
		lows := []string{"low-1", "low-2", "low-3", "low-4"}
		createAll(t, c, ns, pods(suite, "", 10, lows...)...)
		waitN(t, ns, 4, lows...)
		createPodGroup(t, c, ns, upGang("pg1", 3, 100, disruptAll))
		createAll(t, c, ns, pods(suite, "pg1", 100, "high-1", "high-2", "high-3")...)
		// Upstream proves its group preemption ran by the victims' event;
		// Phalanx's group preemption says "Preempted by group <root>".
		eventually(t, 45*time.Second, "a victim preempted by the group", func() (bool, error) {
			evs, err := c.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for _, e := range evs.Items {
				if e.Reason == "Preempted" && strings.HasPrefix(e.Note, "Preempted by group") {
					return true, nil
				}
			}
			return false, nil
		})
		waitN(t, ns, 3, "high-1", "high-2", "high-3")
	})

	t.Run("tas: gang remains pending when resources are consumed by existing pods", func(t *testing.T) {
		ns := namespace(t, c)
		t.Cleanup(func() {
			if t.Failed() {
				dumpOutcome(t, c, ns)
			}
		})
		suite := "u-tas-consumed"
		const rackKey = "topology.phalanx.dev/upstream-rack"
		// One rack of three 2-cpu nodes; two of them are full, so the rack
		// has 2 cpu for a 3-member gang of 1 cpu each.
		nodes := upstreamNodes(t, c, suite, 3, "2", func(int) map[string]string { return map[string]string{rackKey: "rack-1"} })
		createAll(t, c, ns,
			upPod("existing1", suite, "", 100, "2", onNode(nodes[0])),
			upPod("existing2", suite, "", 100, "2", onNode(nodes[2])))
		waitN(t, ns, 2, "existing1", "existing2")
		createPodGroup(t, c, ns, upGang("pg1", 3, 100, func(pg *v1alpha1.PodGroup) {
			pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(rackKey)}
		}))
		createAll(t, c, ns, pods(suite, "pg1", 100, "p1", "p2", "p3")...)
		failedSchedulingFor(t, c, ns, "p1")
		holdN(t, ns, 0, "p1", "p2", "p3")
		deletePod(t, ns, "existing1")
		waitN(t, ns, 3, "p1", "p2", "p3")
	})

	t.Run("podgroup: gang pods are unschedulable due to lack of quorum, then scheduled when minCount is decreased", func(t *testing.T) {
		suite := "u-pg-min-quorum"
		ns, _ := setup(t, suite)
		members := []string{"mut-p1", "mut-p2", "mut-p3", "mut-p4"}
		createPodGroup(t, c, ns, upGang("pg-mutable", 5, 100))
		createAll(t, c, ns, pods(suite, "pg-mutable", 100, members...)...)
		holdN(t, ns, 0, members...)
		setMinCount(t, c, ns, "pg-mutable", 4)
		waitN(t, ns, 4, members...)
	})

	t.Run("podgroup: gang pods are unschedulable due to lack of space, then scheduled when minCount is decreased", func(t *testing.T) {
		suite := "u-pg-min-space"
		ns, _ := setup(t, suite)
		members := []string{"mut-p1", "mut-p2", "mut-p3", "mut-p4", "mut-p5"}
		createPodGroup(t, c, ns, upGang("pg-mutable", 5, 100))
		createAll(t, c, ns, pods(suite, "pg-mutable", 100, members...)...)
		failedSchedulingFor(t, c, ns, "mut-p1")
		holdN(t, ns, 0, members...)
		setMinCount(t, c, ns, "pg-mutable", 4)
		waitN(t, ns, 4, members...)
		holdN(t, ns, 4, members...)
	})
}

// setMinCount changes a gang's minCount, the one mutable field of its spec.
func setMinCount(t *testing.T, c *sandbox.Cluster, ns, name string, minCount int32) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 15*time.Second, "minCount of "+name+" updated", func() (bool, error) {
		pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pg.Spec.SchedulingPolicy.Gang.MinCount = minCount
		_, err = c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Update(ctx, pg, metav1.UpdateOptions{})
		return err == nil, nil
	})
}
