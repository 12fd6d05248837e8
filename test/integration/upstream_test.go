package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
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
var upstreamPriorities = []int32{5, 10, 15, 20, 50, 100, 200, 500}

func prio(v int32) string { return fmt.Sprintf("u-%d", v) }

func createUpstreamPriorities(t *testing.T, c *sandbox.Cluster) {
	t.Helper()
	for _, v := range upstreamPriorities {
		createPriorityClasses(t, c, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: prio(v)}, Value: v})
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
			name:  "Basic scheduling: preempt a pod group victim but do not schedule full pod group",
			nodes: 4, nodeCPU: "1",
			groups: []*v1alpha1.PodGroup{
				upGang("victim-pg", 2, 50, disruptAll), upGang("victim-pg2", 2, 200, disruptAll), upBasic("preemptor-pg", 100, disruptAll),
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

// Upstream's topology-aware and composite cases run as sequences of steps
// (create nodes, groups and pods, delete some, wait for outcomes, check
// placements). upScenario restates such a sequence. Node names are
// upstream's; the runner prefixes them with the case's suite, and rewrites
// pods that name a node (pinned, selected by hostname, or preferred) to
// match. Topology label values are made unique per case as well, so a
// domain never spans two cases' nodes.

// Upstream's topology keys, as the label keys the translated nodes carry.
const (
	upRack  = "topology.phalanx.dev/upstream-rack"
	upZone  = "topology.phalanx.dev/upstream-zone"
	upBlock = "topology.phalanx.dev/upstream-block"
)

// upNode is one node of a case: its cpu, its topology labels by key, and
// a NoSchedule taint key if any.
type upNode struct {
	name   string
	cpu    string
	labels map[string]string
	taint  string
}

// rackNode is upstream's usual 2-cpu node in a rack and a zone.
func rackNode(name, rack, zone string) upNode {
	return upNode{name: name, cpu: "2", labels: map[string]string{upRack: rack, upZone: zone}}
}

// blockNode is a 2-cpu node in a zone, a block and a rack.
func blockNode(name, zone, block, rack string) upNode {
	return upNode{name: name, cpu: "2", labels: map[string]string{upZone: zone, upBlock: block, upRack: rack}}
}

func cpuNode(name, cpu string) upNode { return upNode{name: name, cpu: cpu} }

func tainted(n upNode, key string) upNode { n.taint = key; return n }

// upPlaced says every pod of pods is bound to one of nodes.
type upPlaced struct {
	pods  []string
	nodes []string
}

// upSome is n bound among pods.
type upSome struct {
	n    int
	pods []string
}

// upDomain says the pods are bound in one domain of key.
type upDomain struct {
	pods []string
	key  string
}

// upStep creates what it lists (nodes, composites, groups, a budget, pods,
// in that order), deletes what it lists, then waits for its outcomes: pods
// bound, pods pending with a verdict from the scheduler, pods gone
// (evicted), and checks where the bound ones are.
type upStep struct {
	nodes      []upNode
	composites []*v1alpha1.CompositePodGroup
	groups     []*v1alpha1.PodGroup
	pdb        *policyv1.PodDisruptionBudget
	pods       []*corev1.Pod
	remove     []string
	// removeComposites are deleted after the pods are created.
	removeComposites []string
	bound            []string
	// some waits until n of the pods are bound; the others must get a
	// verdict and stay pending (upstream names which ones by its queue
	// order).
	some    *upSome
	pending []string
	gone    []string
	// oneGone waits until one of these pods is evicted; the others must
	// stay.
	oneGone []string
	placed  []upPlaced
	domains []upDomain
}

// upScenario is one upstream case. kept are pods that must never be
// evicted. At the end the outcome must hold for a while: every pod a step
// waited bound stays bound, the last pending pods stay pending, and the
// kept pods stay.
type upScenario struct {
	name  string
	steps []upStep
	kept  []string
}

// upComposite is a CompositePodGroup at priority v: a gang of
// minGroupCount children, or basic when minGroupCount is 0; parent and key
// (a topology key) may be empty.
func upComposite(name string, minGroupCount, v int32, parent, key string, mutate ...func(*v1alpha1.CompositePodGroup)) *v1alpha1.CompositePodGroup {
	cpg := composite(name, minGroupCount)
	cpg.Spec.PriorityClassName = prio(v)
	if parent != "" {
		cpg.Spec.ParentCompositePodGroupName = ptr.To(parent)
	}
	if key != "" {
		cpg.Spec.SchedulingConstraints = &v1alpha1.CompositePodGroupSchedulingConstraints{Topology: topo(key)}
	}
	for _, m := range mutate {
		m(cpg)
	}
	return cpg
}

func underParent(parent string) func(*v1alpha1.PodGroup) {
	return func(pg *v1alpha1.PodGroup) { pg.Spec.ParentCompositePodGroupName = ptr.To(parent) }
}

func inDomainOf(key string) func(*v1alpha1.PodGroup) {
	return func(pg *v1alpha1.PodGroup) {
		pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(key)}
	}
}

func disruptSingle(pg *v1alpha1.PodGroup) {
	pg.Spec.DisruptionMode = &v1alpha1.DisruptionMode{Single: &v1alpha1.SingleDisruptionMode{}}
}

func compositeDisruptAll(cpg *v1alpha1.CompositePodGroup) {
	cpg.Spec.DisruptionMode = &v1alpha1.CompositeDisruptionMode{All: &v1alpha1.AllCompositeDisruptionMode{}}
}

func compositeDisruptSingle(cpg *v1alpha1.CompositePodGroup) {
	cpg.Spec.DisruptionMode = &v1alpha1.CompositeDisruptionMode{Single: &v1alpha1.SingleCompositeDisruptionMode{}}
}

// tolerate lets a pod onto nodes tainted with key.
func tolerate(key string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists})
	}
}

// preferNode prefers the node named node (rewritten per case like every
// node name).
func preferNode(node string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 100,
				Preference: corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{
					Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
				}}},
			}},
		}}
	}
}

// upPods makes pods named names, each of cpu at priority v in group.
func upPods(suite, group string, v int32, cpu string, names ...string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, n := range names {
		out = append(out, upPod(n, suite, group, v, cpu))
	}
	return out
}

func podList(pods ...[]*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		out = append(out, p...)
	}
	return out
}

func names(ns ...string) []string { return ns }

func podGroupList(groups ...[]*v1alpha1.PodGroup) []*v1alpha1.PodGroup {
	var out []*v1alpha1.PodGroup
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

// upConcurrency is how many cases of one runUpScenarios call run at once.
// Most of a case's time is spent waiting (for binds, for a pending member
// to stay pending), so more cases than cores overlap well.
const upConcurrency = 8

// runUpScenarios runs each scenario as a subtest; every case owns a
// namespace and its nodes, so the cases run concurrently on one sandbox.
// They are started from goroutines rather than with t.Parallel, whose
// limit (-parallel, the number of cores by default) would leave the
// waiting cases mostly idle.
func runUpScenarios(t *testing.T, c *sandbox.Cluster, tag, prefix string, build func(suite string) []upScenario) {
	var wg sync.WaitGroup
	slots := make(chan struct{}, upConcurrency)
	// The scenarios are built once to learn their names, and again per case
	// with the case's suite.
	for i, sc := range build("") {
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			t.Run(prefix+sc.name, func(t *testing.T) {
				suite := fmt.Sprintf("u-%s-%d", tag, i)
				runUpScenario(t, c, suite, build(suite)[i])
			})
		}()
	}
	wg.Wait()
}

func runUpScenario(t *testing.T, c *sandbox.Cluster, suite string, sc upScenario) {
	ctx := context.Background()
	ns := namespace(t, c)
	t.Cleanup(func() {
		if t.Failed() {
			dumpOutcome(t, c, ns)
		}
	})
	node := func(n string) string { return suite + "-" + n }
	label := func(v string) string { return suite + "." + v }
	stillBound := map[string]bool{}
	var lastPending []string
	for si, st := range sc.steps {
		var nodes []*corev1.Node
		for _, n := range st.nodes {
			labels := map[string]string{sandbox.HostnameLabel: node(n.name), suiteLabel: suite}
			for k, v := range n.labels {
				labels[k] = label(v)
			}
			nd := sandbox.NewNode(node(n.name), labels, corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(n.cpu),
				corev1.ResourceMemory: resource.MustParse("4Gi"),
				corev1.ResourcePods:   resource.MustParse("32"),
			})
			if n.taint != "" {
				nd.Spec.Taints = []corev1.Taint{{Key: n.taint, Effect: corev1.TaintEffectNoSchedule}}
			}
			nodes = append(nodes, nd)
		}
		if len(nodes) > 0 {
			require.NoError(t, sandbox.CreateNodes(ctx, c.Client, nodes))
		}
		for _, cpg := range st.composites {
			_, err := c.Phalanx.SchedulingV1alpha1().CompositePodGroups(ns).Create(ctx, cpg.DeepCopy(), metav1.CreateOptions{})
			require.NoError(t, err, "create composite %s", cpg.Name)
		}
		for _, pg := range st.groups {
			createPodGroup(t, c, ns, pg.DeepCopy())
		}
		if st.pdb != nil {
			_, err := c.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, st.pdb.DeepCopy(), metav1.CreateOptions{})
			require.NoError(t, err)
		}
		for _, p := range st.pods {
			p = p.DeepCopy()
			if p.Spec.NodeName != "" {
				p.Spec.NodeName = node(p.Spec.NodeName)
			}
			if h := p.Spec.NodeSelector[sandbox.HostnameLabel]; h != "" {
				p.Spec.NodeSelector[sandbox.HostnameLabel] = node(h)
			}
			if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil {
				for i := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
					fields := a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution[i].Preference.MatchFields
					for j := range fields {
						for k, v := range fields[j].Values {
							fields[j].Values[k] = node(v)
						}
					}
				}
			}
			createAll(t, c, ns, p)
		}
		for _, name := range st.remove {
			require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
			delete(stillBound, name)
		}
		for _, name := range st.removeComposites {
			require.NoError(t, c.Phalanx.SchedulingV1alpha1().CompositePodGroups(ns).Delete(ctx, name, metav1.DeleteOptions{}))
		}
		step := fmt.Sprintf("step %d: ", si+1)
		pending := st.pending
		if st.some != nil {
			var b map[string]string
			eventually(t, 60*time.Second, step+fmt.Sprintf("%d of %v bound", st.some.n, st.some.pods), func() (bool, error) {
				b = boundPods(t, c, ns)
				n := 0
				for _, p := range st.some.pods {
					if b[p] != "" {
						n++
					}
				}
				return n >= st.some.n, nil
			})
			pending = append([]string(nil), pending...)
			for _, p := range st.some.pods {
				if b[p] != "" {
					stillBound[p] = true
				} else {
					pending = append(pending, p)
				}
			}
		}
		if len(st.bound) > 0 {
			eventually(t, 60*time.Second, step+fmt.Sprintf("%v bound", st.bound), func() (bool, error) {
				b := boundPods(t, c, ns)
				for _, n := range st.bound {
					if b[n] == "" {
						return false, nil
					}
				}
				return true, nil
			})
			for _, n := range st.bound {
				stillBound[n] = true
			}
			var left []string
			for _, n := range lastPending {
				if !stillBound[n] {
					left = append(left, n)
				}
			}
			lastPending = left
		}
		for _, n := range st.gone {
			waitGone(t, c, ns, n)
			delete(stillBound, n)
		}
		if len(st.oneGone) > 0 {
			gone := 0
			eventually(t, 45*time.Second, step+fmt.Sprintf("one of %v evicted", st.oneGone), func() (bool, error) {
				gone = 0
				for _, n := range st.oneGone {
					if _, err := c.Client.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{}); err != nil {
						gone++
						delete(stillBound, n)
					}
				}
				return gone > 0, nil
			})
			assert.Equal(t, 1, gone, step+"one of %v evicted", st.oneGone)
		}
		for _, n := range pending {
			waitVerdict(t, c, ns, n)
		}
		if len(pending) > 0 {
			consistently(t, time.Second, step+fmt.Sprintf("%v stay pending", pending), func() bool {
				b := boundPods(t, c, ns)
				for _, n := range pending {
					if b[n] != "" {
						return false
					}
				}
				return true
			})
			lastPending = pending
		}
		bound := boundPods(t, c, ns)
		for _, pl := range st.placed {
			allowed := map[string]bool{}
			for _, n := range pl.nodes {
				allowed[node(n)] = true
			}
			for _, p := range pl.pods {
				if bound[p] == "" && st.some != nil {
					continue
				}
				assert.True(t, allowed[bound[p]], step+"%s is on %q, one of %v", p, bound[p], pl.nodes)
			}
		}
		if len(st.domains) > 0 {
			nodeList, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: suiteLabel + "=" + suite})
			require.NoError(t, err)
			labels := map[string]map[string]string{}
			for _, n := range nodeList.Items {
				labels[n.Name] = n.Labels
			}
			for _, d := range st.domains {
				// Pods of the list left pending (by some) are not counted.
				seen := map[string]bool{}
				for _, p := range d.pods {
					if bound[p] != "" {
						seen[labels[bound[p]][d.key]] = true
					}
				}
				assert.Len(t, seen, 1, step+"%v in one %s domain, got %v", d.pods, d.key, seen)
			}
		}
	}
	consistently(t, 2*time.Second, "the outcome holds", func() bool {
		b := boundPods(t, c, ns)
		for n := range stillBound {
			if b[n] == "" {
				return false
			}
		}
		for _, n := range lastPending {
			if b[n] != "" {
				return false
			}
		}
		for _, n := range sc.kept {
			if b[n] == "" {
				return false
			}
		}
		return true
	})
}

// waitVerdict waits until the scheduler has said why pod is not placed: a
// FailedScheduling event, the pod's PodScheduled=False condition, or (for a
// member held before it is tried) its group's Schedulable=False condition.
func waitVerdict(t *testing.T, c *sandbox.Cluster, ns, pod string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 30*time.Second, "a verdict on "+pod, func() (bool, error) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Spec.NodeName != "" {
			return false, fmt.Errorf("%s bound to %s, want pending", pod, p.Spec.NodeName)
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse {
				return true, nil
			}
		}
		evs, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + pod})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "FailedScheduling" {
				return true, nil
			}
		}
		if g := p.Labels[v1alpha1.PodGroupLabel]; g != "" {
			pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, g, metav1.GetOptions{})
			if err == nil {
				if cond := meta.FindStatusCondition(pg.Status.Conditions, v1alpha1.PodGroupSchedulable); cond != nil && cond.Status == metav1.ConditionFalse {
					return true, nil
				}
			}
		}
		return false, nil
	})
}

// TestUpstreamCompositeScheduling restates upstream's cpg_test.go: one
// 20-cpu node per case (8 cpu where upstream says so), composite
// hierarchies at priority 100, pods named <group>-pod-<i>.
func TestUpstreamCompositeScheduling(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	createUpstreamPriorities(t, c)
	// members makes pods <group>-pod-0.. of the given cpu each.
	members := func(suite, group string, cpus ...string) []*corev1.Pod {
		var out []*corev1.Pod
		for i, cpu := range cpus {
			out = append(out, upPod(fmt.Sprintf("%s-pod-%d", group, i), suite, group, 100, cpu))
		}
		return out
	}
	podsOf := func(groups ...string) []string {
		var out []string
		for _, g := range groups {
			for i := 0; i < 3; i++ {
				out = append(out, fmt.Sprintf("%s-pod-%d", g, i))
			}
		}
		return out
	}
	pairsOf := func(groups ...string) []string {
		var out []string
		for _, g := range groups {
			out = append(out, g+"-pod-0", g+"-pod-1")
		}
		return out
	}
	runUpScenarios(t, c, "cpg", "cpg: ", func(s string) []upScenario {
		return []upScenario{
			{
				// root (gang, 2 of 3) over sub1 (gang, 2 of pg1..pg3), sub2
				// (basic, over basic pg4 and gang pg5) and sub3 (gang, 2 of
				// pg6, pg7). pg3 and pg7 cannot fit, so sub3 fails and pg6
				// with it; root still has sub1 and sub2.
				name: "TestCPGHierarchicalScheduling",
				steps: []upStep{{
					nodes: []upNode{cpuNode("node1", "20")},
					composites: []*v1alpha1.CompositePodGroup{
						upComposite("cpg-root", 2, 100, "", ""),
						upComposite("cpg-sub1", 2, 100, "cpg-root", ""),
						upComposite("cpg-sub2", 0, 100, "cpg-root", ""),
						upComposite("cpg-sub3", 2, 100, "cpg-root", ""),
					},
					groups: []*v1alpha1.PodGroup{
						upGang("pg1", 3, 100, underParent("cpg-sub1")), upGang("pg2", 3, 100, underParent("cpg-sub1")),
						upGang("pg3", 3, 100, underParent("cpg-sub1")),
						upBasic("pg4", 100, underParent("cpg-sub2")), upGang("pg5", 3, 100, underParent("cpg-sub2")),
						upGang("pg6", 3, 100, underParent("cpg-sub3")), upGang("pg7", 3, 100, underParent("cpg-sub3")),
					},
					pods: podList(
						members(s, "pg1", "1", "1", "1"), members(s, "pg2", "1", "1", "1"), members(s, "pg3", "100", "100", "100"),
						members(s, "pg4", "1", "1", "1"), members(s, "pg5", "1", "1", "1"),
						members(s, "pg6", "1", "1", "1"), members(s, "pg7", "100", "100", "100"),
					),
					bound:   podsOf("pg1", "pg2", "pg4", "pg5"),
					pending: podsOf("pg3", "pg6", "pg7"),
				}},
			},
			{
				name: "TestCPGMinGroupCount",
				steps: []upStep{{
					nodes:      []upNode{cpuNode("node1", "20")},
					composites: []*v1alpha1.CompositePodGroup{upComposite("cpg-root", 2, 100, "", "")},
					groups: []*v1alpha1.PodGroup{
						upGang("pg1", 3, 100, underParent("cpg-root")), upGang("pg2", 3, 100, underParent("cpg-root")),
						upGang("pg3", 3, 100, underParent("cpg-root")),
					},
					pods:    podList(members(s, "pg1", "1", "1", "1"), members(s, "pg2", "1", "1", "1"), members(s, "pg3", "100", "1", "1")),
					bound:   podsOf("pg1", "pg2"),
					pending: podsOf("pg3"),
				}},
			},
			{
				name: "TestCPGBasicWithBasicChildren",
				steps: []upStep{{
					nodes:      []upNode{cpuNode("node1", "20")},
					composites: []*v1alpha1.CompositePodGroup{upComposite("cpg-root", 0, 100, "", "")},
					groups:     []*v1alpha1.PodGroup{upBasic("pg1", 100, underParent("cpg-root")), upBasic("pg2", 100, underParent("cpg-root"))},
					pods:       podList(members(s, "pg1", "1", "1"), members(s, "pg2", "1", "1")),
					bound:      pairsOf("pg1", "pg2"),
				}},
			},
			{
				name: "TestCPGGangWithBasicChildren",
				steps: []upStep{{
					nodes:      []upNode{cpuNode("node1", "8")},
					composites: []*v1alpha1.CompositePodGroup{upComposite("cpg-root", 2, 100, "", "")},
					groups: []*v1alpha1.PodGroup{
						upBasic("pg1", 100, underParent("cpg-root")), upBasic("pg2", 100, underParent("cpg-root")),
						upBasic("pg3", 100, underParent("cpg-root")),
					},
					pods:    podList(members(s, "pg1", "1", "1", "1"), members(s, "pg2", "1", "1", "1"), members(s, "pg3", "10", "10", "10")),
					bound:   podsOf("pg1", "pg2"),
					pending: podsOf("pg3"),
				}},
			},
			{
				name: "TestCPGBasicWithUnschedulableBasicChildren",
				steps: []upStep{{
					nodes:      []upNode{cpuNode("node1", "20")},
					composites: []*v1alpha1.CompositePodGroup{upComposite("cpg-root", 0, 100, "", "")},
					groups:     []*v1alpha1.PodGroup{upBasic("pg1", 100, underParent("cpg-root")), upBasic("pg2", 100, underParent("cpg-root"))},
					pods:       podList(members(s, "pg1", "50", "50"), members(s, "pg2", "50", "50")),
					pending:    pairsOf("pg1", "pg2"),
				}},
			},
			{
				// Children join a basic root one by one; a gang sub-composite
				// of two waits for its second child.
				name: "TestCPGDynamicChildAddition",
				steps: []upStep{
					{
						nodes:      []upNode{cpuNode("node1", "20")},
						composites: []*v1alpha1.CompositePodGroup{upComposite("cpg-root", 0, 100, "", "")},
						groups:     []*v1alpha1.PodGroup{upBasic("pg1", 100, underParent("cpg-root"))},
						pods:       members(s, "pg1", "1", "1"),
						bound:      pairsOf("pg1"),
					},
					{
						groups: []*v1alpha1.PodGroup{upBasic("pg2", 100, underParent("cpg-root"))},
						pods:   members(s, "pg2", "1", "1"),
						bound:  pairsOf("pg2"),
					},
					{
						composites: []*v1alpha1.CompositePodGroup{upComposite("cpg-sub", 2, 100, "cpg-root", "")},
						groups:     []*v1alpha1.PodGroup{upBasic("sub-pg1", 100, underParent("cpg-sub"))},
						pods:       members(s, "sub-pg1", "1", "1"),
						pending:    pairsOf("sub-pg1"),
					},
					{
						groups: []*v1alpha1.PodGroup{upBasic("sub-pg2", 100, underParent("cpg-sub"))},
						pods:   members(s, "sub-pg2", "1", "1"),
						bound:  pairsOf("sub-pg1", "sub-pg2"),
					},
				},
			},
		}
	})
}

// TestUpstreamTopologyScheduling restates upstream's tas_test.go and
// cpg_tas_test.go cases: 2-cpu nodes in racks, zones (and blocks), 1-cpu
// pods at priority 100 (2 cpu "large", 3 cpu "unfittable"), pods already
// running pinned to nodes, and lower-priority (10) pods that preemption
// may evict.
func TestUpstreamTopologyScheduling(t *testing.T) {
	c := preemptionCluster(t, nil)
	createUpstreamPriorities(t, c)
	gangIn := func(name, key string, minCount int32, mutate ...func(*v1alpha1.PodGroup)) *v1alpha1.PodGroup {
		if key != "" {
			mutate = append(mutate, inDomainOf(key))
		}
		return upGang(name, minCount, 100, mutate...)
	}
	basicIn := func(name, key string, mutate ...func(*v1alpha1.PodGroup)) *v1alpha1.PodGroup {
		if key != "" {
			mutate = append(mutate, inDomainOf(key))
		}
		return upBasic(name, 100, mutate...)
	}
	runUpScenarios(t, c, "tas", "tas gang: ", func(s string) []upScenario {
		pods := func(group, cpu string, names ...string) []*corev1.Pod { return upPods(s, group, 100, cpu, names...) }
		running := func(name, node, cpu string, v int32) *corev1.Pod { return upPod(name, s, "", v, cpu, onNode(node)) }
		return []upScenario{
			{
				name: "two gangs schedule consecutively, each on a separate rack",
				steps: []upStep{
					{
						nodes: []upNode{
							rackNode("node1-rack1", "rack-1", "zone-1"), rackNode("node2-rack1", "rack-1", "zone-1"), rackNode("node3-rack1", "rack-1", "zone-1"),
							rackNode("node4-rack2", "rack-2", "zone-1"), rackNode("node5-rack2", "rack-2", "zone-1"),
						},
						groups: []*v1alpha1.PodGroup{gangIn("pg1", upRack, 3)},
						pods:   pods("pg1", "2", "p1", "p2", "p3"),
						bound:  names("p1", "p2", "p3"),
					},
					{
						groups: []*v1alpha1.PodGroup{gangIn("pg2", upRack, 2)},
						pods:   pods("pg2", "1", "p4", "p5"),
						bound:  names("p4", "p5"),
						placed: []upPlaced{
							{names("p1", "p2", "p3"), names("node1-rack1", "node2-rack1", "node3-rack1")},
							{names("p4", "p5"), names("node4-rack2", "node5-rack2")},
						},
					},
				},
			},
			{
				name: "two gangs schedule consecutively, both on the same rack",
				steps: []upStep{{
					nodes: []upNode{
						rackNode("node1-rack1", "rack-1", "zone-1"), rackNode("node2-rack1", "rack-1", "zone-1"), rackNode("node3-rack1", "rack-1", "zone-1"),
						rackNode("node4-rack2", "rack-2", "zone-1"),
					},
					groups: []*v1alpha1.PodGroup{gangIn("pg1", upRack, 2), gangIn("pg2", upRack, 3)},
					pods:   podList(pods("pg1", "2", "p1"), pods("pg1", "1", "p2"), pods("pg2", "1", "p3", "p4", "p5")),
					bound:  names("p1", "p2", "p3", "p4", "p5"),
					placed: []upPlaced{{names("p1", "p2", "p3", "p4", "p5"), names("node1-rack1", "node2-rack1", "node3-rack1")}},
				}},
			},
			{
				name: "two gangs schedule consecutively, different topology keys",
				steps: []upStep{
					{
						nodes: []upNode{
							rackNode("node1-rack1", "rack-1", "zone-1"), rackNode("node2-rack1", "rack-1", "zone-1"), rackNode("node3-rack2", "rack-2", "zone-1"),
							rackNode("node4-zone2", "rack-3", "zone-2"), rackNode("node5-zone2", "rack-3", "zone-2"), rackNode("node6-zone2", "rack-3", "zone-2"),
						},
						groups: []*v1alpha1.PodGroup{gangIn("pg1", upRack, 3)},
						pods:   pods("pg1", "2", "p1", "p2", "p3"),
						bound:  names("p1", "p2", "p3"),
					},
					{
						groups: []*v1alpha1.PodGroup{gangIn("pg2", upZone, 3)},
						pods:   pods("pg2", "2", "p4", "p5", "p6"),
						bound:  names("p4", "p5", "p6"),
						placed: []upPlaced{
							{names("p1", "p2", "p3"), names("node4-zone2", "node5-zone2", "node6-zone2")},
							{names("p4", "p5", "p6"), names("node1-rack1", "node2-rack1", "node3-rack2")},
						},
					},
				},
			},
			{
				name: "two gangs schedule consecutively, only one fits in the cluster",
				steps: []upStep{
					{
						nodes:  []upNode{rackNode("node1-rack1", "rack-1", "zone-1"), rackNode("node2-rack1", "rack-1", "zone-1")},
						groups: []*v1alpha1.PodGroup{gangIn("pg1", upRack, 3)},
						pods:   pods("pg1", "1", "p1", "p2", "p3"),
						bound:  names("p1", "p2", "p3"),
					},
					{
						groups:  []*v1alpha1.PodGroup{gangIn("pg2", upRack, 2)},
						pods:    pods("pg2", "1", "p4", "p5"),
						pending: names("p4", "p5"),
						placed:  []upPlaced{{names("p1", "p2", "p3"), names("node1-rack1", "node2-rack1")}},
					},
				},
			},
			{
				name: "gang with minCount < pod count schedules on a single rack",
				steps: []upStep{{
					nodes: []upNode{
						rackNode("node1-rack1", "rack-1", "zone-1"), rackNode("node2-rack1", "rack-1", "zone-1"),
						rackNode("node3-rack2", "rack-2", "zone-1"), rackNode("node4-rack2", "rack-2", "zone-1"),
					},
					groups:  []*v1alpha1.PodGroup{gangIn("pg1", upRack, 2)},
					pods:    pods("pg1", "1", "p1", "p2", "p3"),
					bound:   names("p1", "p2", "p3"),
					domains: []upDomain{{names("p1", "p2", "p3"), upRack}},
				}},
			},
			{
				// Racks of 6, 4 and 2 cpu: the gang of 3 takes the smaller
				// rack that fits it, a fourth member joins it there, and a
				// fifth finds the rack full.
				name: "gang with minCount < pod count schedules on a single rack, choosing smaller rack",
				steps: []upStep{
					{
						nodes: []upNode{
							rackNode("node1-rack1", "rack-1", "zone-1"), rackNode("node2-rack1", "rack-1", "zone-1"), rackNode("node3-rack1", "rack-1", "zone-1"),
							rackNode("node4-rack2", "rack-2", "zone-1"), rackNode("node5-rack2", "rack-2", "zone-1"),
							rackNode("node6-rack3", "rack-3", "zone-2"),
						},
						groups: []*v1alpha1.PodGroup{gangIn("pg1", upRack, 3)},
						pods:   pods("pg1", "1", "p1", "p2", "p3"),
						bound:  names("p1", "p2", "p3"),
					},
					{
						pods:   pods("pg1", "1", "p4"),
						bound:  names("p4"),
						placed: []upPlaced{{names("p1", "p2", "p3", "p4"), names("node4-rack2", "node5-rack2")}},
					},
					{
						pods:    pods("pg1", "1", "p5"),
						pending: names("p5"),
					},
				},
			},
			{
				// existing1 has the gang's priority: nothing may evict it.
				name: "gang does not schedule on a single rack when preemption could free up enough resources",
				steps: []upStep{
					{
						nodes: []upNode{rackNode("node1-rack1", "rack-1", "zone-1"), rackNode("node2-rack1", "rack-1", "zone-1")},
						pods:  []*corev1.Pod{running("existing1", "node2-rack1", "2", 100)},
						bound: names("existing1"),
					},
					{
						groups:  []*v1alpha1.PodGroup{gangIn("pg1", upRack, 3)},
						pods:    pods("pg1", "1", "p1", "p2", "p3"),
						pending: names("p1", "p2", "p3"),
					},
				},
				kept: names("existing1"),
			},
		}
	})
	runUpScenarios(t, c, "ctas", "cpg_tas: ", func(s string) []upScenario {
		pods := func(group string, names ...string) []*corev1.Pod { return upPods(s, group, 100, "1", names...) }
		running := func(name, group, node, cpu string, v int32) *corev1.Pod {
			return upPod(name, s, group, v, cpu, onNode(node))
		}
		twoByTwo := []upNode{
			rackNode("node1-z1-r1", "rack-1", "zone-1"), rackNode("node2-z1-r1", "rack-1", "zone-1"),
			rackNode("node3-z1-r2", "rack-2", "zone-1"), rackNode("node4-z1-r2", "rack-2", "zone-1"),
		}
		rootOver := func(key string, minGroupCount int32) []*v1alpha1.CompositePodGroup {
			return []*v1alpha1.CompositePodGroup{upComposite("cpg-root", minGroupCount, 100, "", key)}
		}
		// leaves are gangs of 2 under parent, in a domain of key if any.
		leaves := func(parent, key string, groups ...string) []*v1alpha1.PodGroup {
			var out []*v1alpha1.PodGroup
			for _, g := range groups {
				out = append(out, gangIn(g, key, 2, underParent(parent)))
			}
			return out
		}
		threeLevel := func(rootKey, subKey string, subMin int32, rootMin int32) []*v1alpha1.CompositePodGroup {
			return []*v1alpha1.CompositePodGroup{
				upComposite("cpg-root", rootMin, 100, "", rootKey),
				upComposite("cpg-sub1", subMin, 100, "cpg-root", subKey),
				upComposite("cpg-sub2", subMin, 100, "cpg-root", subKey),
			}
		}
		eight := podList(pods("pg1", "p1", "p2"), pods("pg2", "p3", "p4"), pods("pg3", "p5", "p6"), pods("pg4", "p7", "p8"))
		pairs := func(key string) []upDomain {
			return []upDomain{
				{names("p1", "p2"), key}, {names("p3", "p4"), key}, {names("p5", "p6"), key}, {names("p7", "p8"), key},
			}
		}
		all8 := names("p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8")
		return []upScenario{
			{
				name: "parent CPG has topology constraints, children do not; schedules on a single rack",
				steps: []upStep{
					{nodes: twoByTwo, pods: []*corev1.Pod{running("existing", "", "node4-z1-r2", "2", 100)}, bound: names("existing")},
					{
						composites: rootOver(upRack, 2),
						groups:     leaves("cpg-root", "", "pg1", "pg2"),
						pods:       podList(pods("pg1", "p1", "p2"), pods("pg2", "p3", "p4")),
						bound:      names("p1", "p2", "p3", "p4"),
						placed:     []upPlaced{{names("p1", "p2", "p3", "p4"), names("node1-z1-r1", "node2-z1-r1")}},
					},
				},
			},
			{
				name: "parent CPG has topology constraints, children do not; preexisting pod belonging to the hierarchy determines the topology",
				steps: []upStep{
					{nodes: twoByTwo, pods: []*corev1.Pod{running("existing", "pg1", "node4-z1-r2", "1", 100)}, bound: names("existing")},
					{
						composites: rootOver(upRack, 2),
						groups:     leaves("cpg-root", "", "pg1", "pg2"),
						pods:       podList(pods("pg1", "p1"), pods("pg2", "p2", "p3")),
						bound:      names("p1", "p2", "p3"),
						placed:     []upPlaced{{names("p1", "p2", "p3"), names("node3-z1-r2", "node4-z1-r2")}},
					},
				},
			},
			{
				name: "parent CPG has topology constraints, children do not; remains pending when no single rack can fit all children",
				steps: []upStep{
					{
						nodes: []upNode{rackNode("node1-z1-r1", "rack-1", "zone-1"), rackNode("node2-z1-r2", "rack-2", "zone-1")},
						pods: []*corev1.Pod{
							running("existing1", "", "node1-z1-r1", "1", 100), running("existing2", "", "node2-z1-r2", "1", 100),
						},
						bound: names("existing1", "existing2"),
					},
					{
						composites: rootOver(upRack, 2),
						groups:     []*v1alpha1.PodGroup{basicIn("pg1", "", underParent("cpg-root")), basicIn("pg2", "", underParent("cpg-root"))},
						pods:       podList(pods("pg1", "p1"), pods("pg2", "p2")),
						pending:    names("p1", "p2"),
					},
				},
			},
			{
				// Only zone-1 holds both gangs, and pg1's rack there is the
				// tainted node1, which only pg1 tolerates; pg2 prefers a node
				// of zone-2, which must not sway it.
				name: "parent CPG and only one child PG has topology constraints; the other child uses parent's topology",
				steps: []upStep{
					{
						nodes: []upNode{
							tainted(rackNode("node1-z1-r1", "rack-1", "zone-1"), "taint"), rackNode("node2-z1-r2", "rack-2", "zone-1"),
							rackNode("node3-z1-r3", "rack-3", "zone-1"), rackNode("node4-z2-r1", "rack-1", "zone-2"), rackNode("node5-z2-r2", "rack-2", "zone-2"),
						},
						pods: []*corev1.Pod{
							running("existing-z2", "", "node5-z2-r2", "1", 100), running("existing-z1-r2", "", "node2-z1-r2", "1", 100),
							running("existing-z1-r3", "", "node3-z1-r3", "1", 100),
						},
						bound: names("existing-z2", "existing-z1-r2", "existing-z1-r3"),
					},
					{
						composites: rootOver(upZone, 2),
						groups:     []*v1alpha1.PodGroup{gangIn("pg1", upRack, 2, underParent("cpg-root")), gangIn("pg2", "", 2, underParent("cpg-root"))},
						pods: podList(
							[]*corev1.Pod{upPod("p1", s, "pg1", 100, "1", tolerate("taint")), upPod("p2", s, "pg1", 100, "1", tolerate("taint"))},
							[]*corev1.Pod{upPod("p3", s, "pg2", 100, "1", preferNode("node4-z2-r1")), upPod("p4", s, "pg2", 100, "1", preferNode("node4-z2-r1"))},
						),
						bound:   names("p1", "p2", "p3", "p4"),
						domains: []upDomain{{names("p1", "p2", "p3", "p4"), upZone}, {names("p1", "p2"), upRack}},
					},
				},
			},
			{
				name: "parent CPG and all child PGs have topology constraints, preexisting pod group pods constrain the available topology domains",
				steps: []upStep{
					{
						nodes: []upNode{
							rackNode("node1-z1-r1", "rack-1", "zone-1"), rackNode("node2-z1-r2", "rack-2", "zone-1"), rackNode("node3-z1-r2", "rack-2", "zone-1"),
							rackNode("node4-z2-r1", "rack-1", "zone-2"), rackNode("node5-z2-r1", "rack-1", "zone-2"),
						},
						composites: rootOver(upZone, 2),
						groups:     leaves("cpg-root", upRack, "pg1", "pg2"),
						pods:       []*corev1.Pod{running("existing-z1", "pg1", "node1-z1-r1", "1", 100)},
						bound:      names("existing-z1"),
					},
					{
						pods:  podList(pods("pg1", "p1"), pods("pg2", "p2", "p3")),
						bound: names("p1", "p2", "p3"),
						placed: []upPlaced{
							{names("p1"), names("node1-z1-r1")}, {names("p2", "p3"), names("node2-z1-r2", "node3-z1-r2")},
						},
					},
				},
			},
			{
				// A deliberate difference: upstream fails every member when
				// running members of one hierarchy already disagree on its
				// domain. Phalanx settles the disagreement (most running
				// members, ties to the smallest value, here zone-1) and
				// places the rest there, so the hierarchy adds no third
				// domain and does not stall.
				name: "parent CPG has topology constraints, preexisting pod group pods are in conflicting domains across pod groups, fails to schedule any pod",
				steps: []upStep{
					{
						nodes: []upNode{
							rackNode("node1-z1-r1", "rack-1", "zone-1"), rackNode("node2-z1-r1", "rack-1", "zone-1"),
							rackNode("node3-z2-r1", "rack-1", "zone-2"), rackNode("node4-z2-r1", "rack-1", "zone-2"),
						},
						composites: rootOver(upZone, 2),
						groups:     leaves("cpg-root", upRack, "pg1", "pg2"),
						pods: []*corev1.Pod{
							running("existing-z1", "pg1", "node1-z1-r1", "1", 100), running("existing-z2", "pg2", "node3-z2-r1", "1", 100),
						},
						bound: names("existing-z1", "existing-z2"),
					},
					{
						pods:    podList(pods("pg1", "p1"), pods("pg2", "p2")),
						bound:   names("p1", "p2"),
						domains: []upDomain{{names("existing-z1", "p1", "p2"), upZone}},
					},
				},
			},
			{
				name: "3-level CPG hierarchy: all levels have topology constraints (root=zone, sub=block, leaf=rack)",
				steps: []upStep{{
					nodes: []upNode{
						blockNode("node1-z1-g1-r1", "zone-1", "block-1", "rack-1"), blockNode("node2-z1-g1-r2", "zone-1", "block-1", "rack-2"),
						blockNode("node3-z1-g2-r1", "zone-1", "block-2", "rack-1"), blockNode("node4-z1-g2-r2", "zone-1", "block-2", "rack-2"),
						blockNode("node5-z2-g1-r1", "zone-2", "block-1", "rack-1"), blockNode("node6-z2-g1-r1", "zone-2", "block-1", "rack-1"),
					},
					composites: threeLevel(upZone, upBlock, 2, 2),
					groups:     podGroupList(leaves("cpg-sub1", upRack, "pg1", "pg2"), leaves("cpg-sub2", upRack, "pg3", "pg4")),
					pods:       eight,
					bound:      all8,
					domains: append(pairs(upRack), upDomain{all8, upZone},
						upDomain{names("p1", "p2", "p3", "p4"), upBlock}, upDomain{names("p5", "p6", "p7", "p8"), upBlock}),
				}},
			},
			{
				name: "3-level CPG hierarchy: mid-level without topology constraints (root=zone, sub=none, leaf=rack)",
				steps: []upStep{{
					nodes: []upNode{
						rackNode("node1-z1-r1", "rack-1", "zone-1"), rackNode("node2-z1-r2", "rack-2", "zone-1"), rackNode("node3-z2-r1", "rack-1", "zone-2"),
					},
					composites: threeLevel(upZone, "", 0, 2),
					groups:     podGroupList(leaves("cpg-sub1", upRack, "pg1"), leaves("cpg-sub2", upRack, "pg2")),
					pods:       podList(pods("pg1", "p1", "p2"), pods("pg2", "p3", "p4")),
					bound:      names("p1", "p2", "p3", "p4"),
					domains: []upDomain{
						{names("p1", "p2", "p3", "p4"), upZone}, {names("p1", "p2"), upRack}, {names("p3", "p4"), upRack},
					},
				}},
			},
			{
				name: "3-level CPG hierarchy: top level without topology constraint (root=none, sub=zone, leaf=rack)",
				steps: []upStep{{
					nodes: []upNode{
						rackNode("node1-z1-r1", "rack-1", "zone-1"), rackNode("node2-z1-r2", "rack-2", "zone-1"),
						rackNode("node3-z2-r3", "rack-3", "zone-2"), rackNode("node4-z2-r4", "rack-4", "zone-2"), rackNode("node5-z2-r5", "rack-5", "zone-2"),
					},
					composites: threeLevel("", upZone, 2, 0),
					groups:     podGroupList(leaves("cpg-sub1", upRack, "pg1", "pg2"), leaves("cpg-sub2", upRack, "pg3", "pg4")),
					pods:       eight,
					bound:      all8,
					domains: append(pairs(upRack),
						upDomain{names("p1", "p2", "p3", "p4"), upZone}, upDomain{names("p5", "p6", "p7", "p8"), upZone}),
				}},
			},
			{
				name: "3-level CPG hierarchy: bottom level without topology constraint (root=zone, sub=rack, leaf=none)",
				steps: []upStep{{
					nodes: []upNode{
						rackNode("node1-z1-r1", "rack-1", "zone-1"), rackNode("node2-z1-r1", "rack-1", "zone-1"),
						rackNode("node3-z1-r2", "rack-2", "zone-1"), rackNode("node4-z1-r2", "rack-2", "zone-1"),
						rackNode("node5-z2-r3", "rack-3", "zone-2"), rackNode("node6-z2-r3", "rack-3", "zone-2"),
					},
					composites: threeLevel(upZone, upRack, 2, 2),
					groups:     podGroupList(leaves("cpg-sub1", "", "pg1", "pg2"), leaves("cpg-sub2", "", "pg3", "pg4")),
					pods:       eight,
					bound:      all8,
					domains: []upDomain{
						{all8, upZone}, {names("p1", "p2", "p3", "p4"), upRack}, {names("p5", "p6", "p7", "p8"), upRack},
					},
				}},
			},
			{
				name: "3-level CPG hierarchy: preexisting pod in leaf PodGroup determines topology for intermediate and root CPGs",
				steps: []upStep{
					{
						nodes: []upNode{
							rackNode("node1-z1-r1", "rack-1", "zone-1"), rackNode("node2-z1-r1", "rack-1", "zone-1"),
							rackNode("node3-z1-r2", "rack-2", "zone-1"), rackNode("node4-z1-r2", "rack-2", "zone-1"),
							rackNode("node5-z2-r1", "rack-1", "zone-2"), rackNode("node6-z2-r1", "rack-1", "zone-2"),
							rackNode("node7-z2-r2", "rack-2", "zone-2"), rackNode("node8-z2-r2", "rack-2", "zone-2"),
						},
						composites: threeLevel(upZone, upRack, 2, 2),
						groups:     podGroupList(leaves("cpg-sub1", "", "pg1", "pg2"), leaves("cpg-sub2", "", "pg3", "pg4")),
						pods:       []*corev1.Pod{running("existing-pg1", "pg1", "node5-z2-r1", "1", 100)},
						bound:      names("existing-pg1"),
					},
					{
						pods:  podList(pods("pg1", "p1"), pods("pg2", "p2", "p3"), pods("pg3", "p4", "p5"), pods("pg4", "p6", "p7")),
						bound: names("p1", "p2", "p3", "p4", "p5", "p6", "p7"),
						placed: []upPlaced{
							{names("p1", "p2", "p3"), names("node5-z2-r1", "node6-z2-r1")},
							{names("p4", "p5", "p6", "p7"), names("node7-z2-r2", "node8-z2-r2")},
						},
					},
				},
			},
		}
	})
	runUpScenarios(t, c, "ctasp", "cpg_tas preemption: ", func(s string) []upScenario {
		pods := func(group string, names ...string) []*corev1.Pod { return upPods(s, group, 100, "1", names...) }
		running := func(name, group, node, cpu string, v int32) *corev1.Pod {
			return upPod(name, s, group, v, cpu, onNode(node))
		}
		low := func(name, node, cpu string) *corev1.Pod { return running(name, "", node, cpu, 10) }
		twoByTwo := []upNode{
			rackNode("node1-z1-r1", "rack-1", "zone-1"), rackNode("node2-z1-r1", "rack-1", "zone-1"),
			rackNode("node3-z1-r2", "rack-2", "zone-1"), rackNode("node4-z1-r2", "rack-2", "zone-1"),
		}
		rootOver := func(key string, minGroupCount int32) []*v1alpha1.CompositePodGroup {
			return []*v1alpha1.CompositePodGroup{upComposite("cpg-root", minGroupCount, 100, "", key)}
		}
		leaves := func(parent, key string, groups ...string) []*v1alpha1.PodGroup {
			var out []*v1alpha1.PodGroup
			for _, g := range groups {
				out = append(out, gangIn(g, key, 2, underParent(parent)))
			}
			return out
		}
		threeLevel := func(rootKey, subKey string, subMin int32, rootMin int32) []*v1alpha1.CompositePodGroup {
			return []*v1alpha1.CompositePodGroup{
				upComposite("cpg-root", rootMin, 100, "", rootKey),
				upComposite("cpg-sub1", subMin, 100, "cpg-root", subKey),
				upComposite("cpg-sub2", subMin, 100, "cpg-root", subKey),
			}
		}
		eight := podList(pods("pg1", "p1", "p2"), pods("pg2", "p3", "p4"), pods("pg3", "p5", "p6"), pods("pg4", "p7", "p8"))
		all8 := names("p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8")
		pairs := func(key string) []upDomain {
			return []upDomain{
				{names("p1", "p2"), key}, {names("p3", "p4"), key}, {names("p5", "p6"), key}, {names("p7", "p8"), key},
			}
		}
		fullRack1 := func() []*corev1.Pod {
			return []*corev1.Pod{
				low("low1-z1-r1", "node1-z1-r1", "2"), low("low2-z1-r1", "node2-z1-r1", "2"), running("existing", "", "node4-z1-r2", "2", 100),
			}
		}
		return []upScenario{
			{
				name: "parent CPG has topology constraints, children do not; schedules on a single rack after preempting lower priority pods",
				steps: []upStep{
					{nodes: twoByTwo, pods: fullRack1(), bound: names("low1-z1-r1", "low2-z1-r1", "existing")},
					{
						composites: rootOver(upRack, 2),
						groups:     leaves("cpg-root", "", "pg1", "pg2"),
						pods:       podList(pods("pg1", "p1", "p2"), pods("pg2", "p3", "p4")),
						bound:      names("p1", "p2", "p3", "p4"),
						gone:       names("low1-z1-r1", "low2-z1-r1"),
						placed:     []upPlaced{{names("p1", "p2", "p3", "p4"), names("node1-z1-r1", "node2-z1-r1")}},
					},
				},
				kept: names("existing"),
			},
			{
				// rack-2 has 2 cpu free, but p5 belongs in its hierarchy's
				// rack, which is full of equal-priority members.
				name: "parent CPG has topology constraints, children do not; schedules on a single rack after preempting lower priority pods, then cannot schedule additional pods",
				steps: []upStep{
					{nodes: twoByTwo, pods: fullRack1(), bound: names("low1-z1-r1", "low2-z1-r1", "existing")},
					{
						composites: rootOver(upRack, 2),
						groups:     leaves("cpg-root", "", "pg1", "pg2"),
						pods:       podList(pods("pg1", "p1", "p2"), pods("pg2", "p3", "p4")),
						bound:      names("p1", "p2", "p3", "p4"),
						gone:       names("low1-z1-r1", "low2-z1-r1"),
						placed:     []upPlaced{{names("p1", "p2", "p3", "p4"), names("node1-z1-r1", "node2-z1-r1")}},
					},
					{pods: pods("pg1", "p5"), pending: names("p5")},
				},
				kept: names("existing"),
			},
			{
				name: "parent CPG has topology constraints, children do not; preexisting pod belonging to the hierarchy determines topology and lower priority pods are preempted",
				steps: []upStep{
					{
						nodes: twoByTwo,
						pods: []*corev1.Pod{
							running("existing", "pg1", "node4-z1-r2", "1", 100), low("low1-z1-r2", "node3-z1-r2", "2"), low("low2-z1-r2", "node4-z1-r2", "1"),
						},
						bound: names("existing", "low1-z1-r2", "low2-z1-r2"),
					},
					{
						composites: rootOver(upRack, 2),
						groups:     leaves("cpg-root", "", "pg1", "pg2"),
						pods:       podList(pods("pg1", "p1"), pods("pg2", "p2", "p3")),
						bound:      names("p1", "p2", "p3"),
						gone:       names("low1-z1-r2", "low2-z1-r2"),
						placed:     []upPlaced{{names("p1", "p2", "p3"), names("node3-z1-r2", "node4-z1-r2")}},
					},
				},
				kept: names("existing"),
			},
			{
				name: "parent CPG has topology constraints, children do not; schedules on a rack after preempting lower priority pods",
				steps: []upStep{
					{
						nodes: []upNode{rackNode("node1-z1-r1", "rack-1", "zone-1"), rackNode("node2-z1-r2", "rack-2", "zone-1")},
						pods:  []*corev1.Pod{low("low1-z1-r1", "node1-z1-r1", "2"), running("existing2", "", "node2-z1-r2", "2", 100)},
						bound: names("low1-z1-r1", "existing2"),
					},
					{
						composites: rootOver(upRack, 2),
						groups:     []*v1alpha1.PodGroup{basicIn("pg1", "", underParent("cpg-root")), basicIn("pg2", "", underParent("cpg-root"))},
						pods:       podList(pods("pg1", "p1"), pods("pg2", "p2")),
						bound:      names("p1", "p2"),
						gone:       names("low1-z1-r1"),
						placed:     []upPlaced{{names("p1", "p2"), names("node1-z1-r1")}},
					},
				},
				kept: names("existing2"),
			},
			{
				name: "parent CPG and child PGs both have topology constraints (multi-level constraints: zone and rack) with preemption",
				steps: []upStep{
					{
						nodes: []upNode{
							rackNode("node1-z1-r1", "rack-1", "zone-1"), rackNode("node2-z1-r2", "rack-2", "zone-1"),
							rackNode("node3-z2-r1", "rack-1", "zone-2"), rackNode("node4-z2-r1", "rack-1", "zone-2"),
						},
						pods: []*corev1.Pod{
							low("low-z1-r1", "node1-z1-r1", "2"), low("low-z1-r2", "node2-z1-r2", "2"), running("existing-z2", "", "node3-z2-r1", "1", 100),
						},
						bound: names("low-z1-r1", "low-z1-r2", "existing-z2"),
					},
					{
						composites: rootOver(upZone, 2),
						groups:     leaves("cpg-root", upRack, "pg1", "pg2"),
						pods:       podList(pods("pg1", "p1", "p2"), pods("pg2", "p3", "p4")),
						bound:      names("p1", "p2", "p3", "p4"),
						gone:       names("low-z1-r1", "low-z1-r2"),
						placed:     []upPlaced{{names("p1", "p2", "p3", "p4"), names("node1-z1-r1", "node2-z1-r2")}},
						domains:    []upDomain{{names("p1", "p2"), upRack}, {names("p3", "p4"), upRack}},
					},
				},
				kept: names("existing-z2"),
			},
			{
				// The first two gangs fit zone-1 as it is; a third evicts the
				// low pod of zone-1's third rack; a fourth would need zone-2,
				// where preemption could make room, but the hierarchy lives
				// in zone-1.
				name: "parent CPG and child PGs both have topology constraints (multi-level constraints: zone and rack), preemption does not help for subsequent",
				steps: []upStep{
					{
						nodes: []upNode{
							rackNode("node1-z1-r1", "rack-1", "zone-1"), rackNode("node2-z1-r2", "rack-2", "zone-1"), rackNode("node3-z1-r3", "rack-3", "zone-1"),
							rackNode("node4-z2-r1", "rack-1", "zone-2"), rackNode("node5-z2-r1", "rack-1", "zone-2"),
						},
						pods:  []*corev1.Pod{low("low-z1-r3", "node3-z1-r3", "2"), low("low-z2-r1", "node4-z2-r1", "2")},
						bound: names("low-z1-r3", "low-z2-r1"),
					},
					{
						composites: rootOver(upZone, 2),
						groups:     leaves("cpg-root", upRack, "pg1", "pg2"),
						pods:       podList(pods("pg1", "p1", "p2"), pods("pg2", "p3", "p4")),
						bound:      names("p1", "p2", "p3", "p4"),
						domains:    []upDomain{{names("p1", "p2"), upRack}, {names("p3", "p4"), upRack}},
					},
					{
						groups:  leaves("cpg-root", upRack, "pg3"),
						pods:    pods("pg3", "p5", "p6"),
						bound:   names("p5", "p6"),
						gone:    names("low-z1-r3"),
						domains: []upDomain{{names("p5", "p6"), upRack}},
					},
					{
						groups:  leaves("cpg-root", upRack, "pg4"),
						pods:    pods("pg4", "p7", "p8"),
						pending: names("p7", "p8"),
					},
				},
				kept: names("low-z2-r1"),
			},
			{
				name: "parent CPG and only one child PG has topology constraints; the other child uses parent's topology with preemption",
				steps: []upStep{
					{
						nodes: []upNode{
							tainted(rackNode("node1-z1-r1", "rack-1", "zone-1"), "taint"), rackNode("node2-z1-r2", "rack-2", "zone-1"),
							rackNode("node3-z1-r3", "rack-3", "zone-1"), rackNode("node4-z2-r1", "rack-1", "zone-2"), rackNode("node5-z2-r2", "rack-2", "zone-2"),
						},
						pods: []*corev1.Pod{
							upPod("low-z1-r1", s, "", 10, "2", onNode("node1-z1-r1"), tolerate("taint")),
							running("existing-z2", "", "node5-z2-r2", "1", 100), running("existing-z1-r2", "", "node2-z1-r2", "1", 100),
							running("existing-z1-r3", "", "node3-z1-r3", "1", 100),
						},
						bound: names("low-z1-r1", "existing-z2", "existing-z1-r2", "existing-z1-r3"),
					},
					{
						composites: rootOver(upZone, 2),
						groups:     []*v1alpha1.PodGroup{gangIn("pg1", upRack, 2, underParent("cpg-root")), gangIn("pg2", "", 2, underParent("cpg-root"))},
						pods: podList(
							[]*corev1.Pod{upPod("p1", s, "pg1", 100, "1", tolerate("taint")), upPod("p2", s, "pg1", 100, "1", tolerate("taint"))},
							[]*corev1.Pod{upPod("p3", s, "pg2", 100, "1", preferNode("node4-z2-r1")), upPod("p4", s, "pg2", 100, "1", preferNode("node4-z2-r1"))},
						),
						bound:   names("p1", "p2", "p3", "p4"),
						gone:    names("low-z1-r1"),
						domains: []upDomain{{names("p1", "p2", "p3", "p4"), upZone}, {names("p1", "p2"), upRack}},
					},
				},
			},
			{
				// A deliberate difference: upstream also evicts low-z1-r2,
				// though node3 of the same rack is free for pg2. Phalanx
				// evicts only low-z1-r1, which pg1's member needs.
				name: "parent CPG and all child PGs have topology constraints, preexisting pod group pods constrain available topology domains with preemption",
				steps: []upStep{
					{
						nodes: []upNode{
							rackNode("node1-z1-r1", "rack-1", "zone-1"), rackNode("node2-z1-r2", "rack-2", "zone-1"), rackNode("node3-z1-r2", "rack-2", "zone-1"),
							rackNode("node4-z2-r1", "rack-1", "zone-2"), rackNode("node5-z2-r1", "rack-1", "zone-2"),
						},
						composites: rootOver(upZone, 2),
						groups:     leaves("cpg-root", upRack, "pg1", "pg2"),
						pods: []*corev1.Pod{
							running("existing-z1", "pg1", "node1-z1-r1", "1", 100), low("low-z1-r1", "node1-z1-r1", "1"), low("low-z1-r2", "node2-z1-r2", "2"),
						},
						bound: names("existing-z1", "low-z1-r1", "low-z1-r2"),
					},
					{
						pods:  podList(pods("pg1", "p1"), pods("pg2", "p2", "p3")),
						bound: names("p1", "p2", "p3"),
						gone:  names("low-z1-r1"),
						placed: []upPlaced{
							{names("p1"), names("node1-z1-r1")}, {names("p2", "p3"), names("node3-z1-r2")},
						},
					},
				},
				kept: names("low-z1-r2"),
			},
			{
				name: "3-level CPG hierarchy: all levels have topology constraints (root=zone, sub=block, leaf=rack) with preemption",
				steps: []upStep{
					{
						nodes: []upNode{
							blockNode("node1-z1-g1-r1", "zone-1", "block-1", "rack-1"), blockNode("node2-z1-g1-r2", "zone-1", "block-1", "rack-2"),
							blockNode("node3-z1-g2-r1", "zone-1", "block-2", "rack-1"), blockNode("node4-z1-g2-r2", "zone-1", "block-2", "rack-2"),
							blockNode("node5-z2-g1-r1", "zone-2", "block-1", "rack-1"), blockNode("node6-z2-g1-r1", "zone-2", "block-1", "rack-1"),
						},
						pods: []*corev1.Pod{
							low("low-z1-1", "node1-z1-g1-r1", "2"), low("low-z1-2", "node2-z1-g1-r2", "2"),
							low("low-z1-3", "node3-z1-g2-r1", "2"), low("low-z1-4", "node4-z1-g2-r2", "2"),
						},
						bound: names("low-z1-1", "low-z1-2", "low-z1-3", "low-z1-4"),
					},
					{
						composites: threeLevel(upZone, upBlock, 2, 2),
						groups:     podGroupList(leaves("cpg-sub1", upRack, "pg1", "pg2"), leaves("cpg-sub2", upRack, "pg3", "pg4")),
						pods:       eight,
						bound:      all8,
						gone:       names("low-z1-1", "low-z1-2", "low-z1-3", "low-z1-4"),
						domains: append(pairs(upRack), upDomain{all8, upZone},
							upDomain{names("p1", "p2", "p3", "p4"), upBlock}, upDomain{names("p5", "p6", "p7", "p8"), upBlock}),
					},
				},
			},
			{
				name: "3-level CPG hierarchy: mid-level without topology constraints (root=zone, sub=none, leaf=rack) with preemption",
				steps: []upStep{
					{
						nodes: []upNode{
							rackNode("node1-z1-r1", "rack-1", "zone-1"), rackNode("node2-z1-r2", "rack-2", "zone-1"), rackNode("node3-z2-r1", "rack-1", "zone-2"),
						},
						pods:  []*corev1.Pod{low("low-z1-r1", "node1-z1-r1", "2"), low("low-z1-r2", "node2-z1-r2", "2")},
						bound: names("low-z1-r1", "low-z1-r2"),
					},
					{
						composites: threeLevel(upZone, "", 0, 2),
						groups:     podGroupList(leaves("cpg-sub1", upRack, "pg1"), leaves("cpg-sub2", upRack, "pg2")),
						pods:       podList(pods("pg1", "p1", "p2"), pods("pg2", "p3", "p4")),
						bound:      names("p1", "p2", "p3", "p4"),
						gone:       names("low-z1-r1", "low-z1-r2"),
						domains: []upDomain{
							{names("p1", "p2", "p3", "p4"), upZone}, {names("p1", "p2"), upRack}, {names("p3", "p4"), upRack},
						},
					},
				},
			},
			{
				name: "3-level CPG hierarchy: top level without topology constraint (root=none, sub=zone, leaf=rack) with preemption",
				steps: []upStep{
					{
						nodes: []upNode{
							rackNode("node1-z1-r1", "rack-1", "zone-1"), rackNode("node2-z1-r2", "rack-2", "zone-1"),
							rackNode("node3-z2-r3", "rack-3", "zone-2"), rackNode("node4-z2-r4", "rack-4", "zone-2"),
						},
						pods: []*corev1.Pod{
							low("low-z1-r1", "node1-z1-r1", "2"), low("low-z1-r2", "node2-z1-r2", "2"),
							low("low-z2-r3", "node3-z2-r3", "2"), low("low-z2-r4", "node4-z2-r4", "2"),
						},
						bound: names("low-z1-r1", "low-z1-r2", "low-z2-r3", "low-z2-r4"),
					},
					{
						composites: threeLevel("", upZone, 2, 0),
						groups:     podGroupList(leaves("cpg-sub1", upRack, "pg1", "pg2"), leaves("cpg-sub2", upRack, "pg3", "pg4")),
						pods:       eight,
						bound:      all8,
						gone:       names("low-z1-r1", "low-z1-r2", "low-z2-r3", "low-z2-r4"),
						domains: append(pairs(upRack),
							upDomain{names("p1", "p2", "p3", "p4"), upZone}, upDomain{names("p5", "p6", "p7", "p8"), upZone}),
					},
				},
			},
			{
				name: "3-level CPG hierarchy: bottom level without topology constraint (root=zone, sub=rack, leaf=none) with preemption",
				steps: []upStep{
					{
						nodes: []upNode{
							rackNode("node1-z1-r1", "rack-1", "zone-1"), rackNode("node2-z1-r1", "rack-1", "zone-1"),
							rackNode("node3-z1-r2", "rack-2", "zone-1"), rackNode("node4-z1-r2", "rack-2", "zone-1"),
							rackNode("node5-z2-r3", "rack-3", "zone-2"), rackNode("node6-z2-r3", "rack-3", "zone-2"),
						},
						pods: []*corev1.Pod{
							low("low-z1-r1-1", "node1-z1-r1", "2"), low("low-z1-r1-2", "node2-z1-r1", "2"),
							low("low-z1-r2-1", "node3-z1-r2", "2"), low("low-z1-r2-2", "node4-z1-r2", "2"),
						},
						bound: names("low-z1-r1-1", "low-z1-r1-2", "low-z1-r2-1", "low-z1-r2-2"),
					},
					{
						composites: threeLevel(upZone, upRack, 2, 2),
						groups:     podGroupList(leaves("cpg-sub1", "", "pg1", "pg2"), leaves("cpg-sub2", "", "pg3", "pg4")),
						pods:       eight,
						bound:      all8,
						gone:       names("low-z1-r1-1", "low-z1-r1-2", "low-z1-r2-1", "low-z1-r2-2"),
						domains: []upDomain{
							{all8, upZone}, {names("p1", "p2", "p3", "p4"), upRack}, {names("p5", "p6", "p7", "p8"), upRack},
						},
					},
				},
			},
			{
				name: "3-level CPG hierarchy: preexisting pod in leaf PodGroup determines topology for intermediate and root CPGs with preemption",
				steps: []upStep{
					{
						nodes: []upNode{
							rackNode("node1-z1-r1", "rack-1", "zone-1"), rackNode("node2-z1-r1", "rack-1", "zone-1"),
							rackNode("node3-z1-r2", "rack-2", "zone-1"), rackNode("node4-z1-r2", "rack-2", "zone-1"),
							rackNode("node5-z2-r1", "rack-1", "zone-2"), rackNode("node6-z2-r1", "rack-1", "zone-2"),
							rackNode("node7-z2-r2", "rack-2", "zone-2"), rackNode("node8-z2-r2", "rack-2", "zone-2"),
						},
						composites: threeLevel(upZone, upRack, 2, 2),
						groups:     podGroupList(leaves("cpg-sub1", "", "pg1", "pg2"), leaves("cpg-sub2", "", "pg3", "pg4")),
						pods: []*corev1.Pod{
							running("existing-pg1", "pg1", "node5-z2-r1", "1", 100), low("low-z2-r1", "node6-z2-r1", "2"), low("low-z2-r2", "node7-z2-r2", "2"),
						},
						bound: names("existing-pg1", "low-z2-r1", "low-z2-r2"),
					},
					{
						pods:  podList(pods("pg1", "p1"), pods("pg2", "p2", "p3"), pods("pg3", "p4", "p5"), pods("pg4", "p6", "p7")),
						bound: names("p1", "p2", "p3", "p4", "p5", "p6", "p7"),
						gone:  names("low-z2-r1", "low-z2-r2"),
						placed: []upPlaced{
							{names("p1", "p2", "p3"), names("node5-z2-r1", "node6-z2-r1")},
							{names("p4", "p5", "p6", "p7"), names("node7-z2-r2", "node8-z2-r2")},
						},
					},
				},
			},
		}
	})
	runUpScenarios(t, c, "tasb", "tas basic: ", func(s string) []upScenario {
		pods := func(group, cpu string, names ...string) []*corev1.Pod { return upPods(s, group, 100, cpu, names...) }
		running := func(name, node, cpu string) *corev1.Pod { return upPod(name, s, "", 100, cpu, onNode(node)) }
		twoRacks := []upNode{rackNode("node1-rack1", "rack-1", "zone-1"), rackNode("node2-rack2", "rack-2", "zone-1")}
		return []upScenario{
			{
				name: "basic podgroup schedules on the only rack in the cluster",
				steps: []upStep{{
					nodes:  []upNode{rackNode("node1-rack1", "rack-1", "zone-1"), rackNode("node2-rack1", "rack-1", "zone-1")},
					groups: []*v1alpha1.PodGroup{basicIn("pg1", upRack)},
					pods:   pods("pg1", "1", "p1", "p2", "p3"),
					bound:  names("p1", "p2", "p3"),
					placed: []upPlaced{{names("p1", "p2", "p3"), names("node1-rack1", "node2-rack1")}},
				}},
			},
			{
				name: "basic podgroup schedules all pods on a single rack, when there are multiple racks fitting in the cluster",
				steps: []upStep{{
					nodes: []upNode{
						rackNode("node1-rack1", "rack-1", "zone-1"), rackNode("node2-rack1", "rack-1", "zone-1"),
						rackNode("node3-rack2", "rack-2", "zone-1"), rackNode("node4-rack2", "rack-2", "zone-1"),
						rackNode("node5-zone2", "rack-3", "zone-2"), rackNode("node6-zone2", "rack-3", "zone-2"),
					},
					groups:  []*v1alpha1.PodGroup{basicIn("pg1", upRack)},
					pods:    pods("pg1", "1", "p1", "p2", "p3"),
					bound:   names("p1", "p2", "p3"),
					domains: []upDomain{{names("p1", "p2", "p3"), upRack}},
				}},
			},
			{
				// Upstream names p1 and p2 as the two that bind (its queue
				// order); any two bind, in one rack, and the third waits.
				name: "basic podgroup cannot fit on a single rack, no pods get scheduled on a different rack",
				steps: []upStep{{
					nodes:   twoRacks,
					groups:  []*v1alpha1.PodGroup{basicIn("pg1", upRack)},
					pods:    pods("pg1", "1", "p1", "p2", "p3"),
					some:    &upSome{2, names("p1", "p2", "p3")},
					domains: []upDomain{{names("p1", "p2", "p3"), upRack}},
				}},
			},
			{
				name: "basic podgroup does not schedule at all when no pods fit",
				steps: []upStep{{
					nodes:   twoRacks,
					groups:  []*v1alpha1.PodGroup{basicIn("pg1", upRack)},
					pods:    pods("pg1", "3", "p1", "p2"),
					pending: names("p1", "p2"),
				}},
			},
			{
				name: "basic podgroup schedules only some pods when others don't fit on any node",
				steps: []upStep{{
					nodes:   twoRacks,
					groups:  []*v1alpha1.PodGroup{basicIn("pg1", upRack)},
					pods:    podList(pods("pg1", "3", "p1"), pods("pg1", "1", "p2")),
					bound:   names("p2"),
					pending: names("p1"),
				}},
			},
			{
				name: "two basic podgroups schedule consecutively, each on a single rack",
				steps: []upStep{{
					nodes: []upNode{
						rackNode("node1-rack1", "rack-1", "zone-1"), rackNode("node2-rack1", "rack-1", "zone-1"), rackNode("node3-rack1", "rack-1", "zone-1"),
						rackNode("node4-rack2", "rack-2", "zone-1"),
					},
					groups: []*v1alpha1.PodGroup{basicIn("pg1", upRack), basicIn("pg2", upRack)},
					pods:   podList(pods("pg1", "1", "p1", "p2"), pods("pg2", "1", "p3", "p4")),
					bound:  names("p1", "p2", "p3", "p4"),
					placed: []upPlaced{
						{names("p1", "p2"), names("node4-rack2")},
						{names("p3", "p4"), names("node1-rack1", "node2-rack1", "node3-rack1")},
					},
				}},
			},
			{
				name: "two basic podgroups schedule consecutively on the only rack",
				steps: []upStep{{
					nodes: []upNode{
						rackNode("node1-rack1", "rack-1", "zone-1"), rackNode("node2-rack1", "rack-1", "zone-1"), rackNode("node3-rack1", "rack-1", "zone-1"),
					},
					groups: []*v1alpha1.PodGroup{basicIn("pg1", upRack), basicIn("pg2", upRack)},
					pods:   podList(pods("pg1", "1", "p1", "p2"), pods("pg2", "1", "p3", "p4", "p5")),
					bound:  names("p1", "p2", "p3", "p4", "p5"),
				}},
			},
			{
				name: "two basic podgroups schedule consecutively, different topology keys",
				steps: []upStep{{
					nodes: []upNode{
						rackNode("node1-rack1", "rack-1", "zone-1"),
						rackNode("node2-zone2", "rack-2", "zone-2"), rackNode("node3-zone2", "rack-2", "zone-2"),
						rackNode("node4-zone2", "rack-3", "zone-2"), rackNode("node5-zone2", "rack-3", "zone-2"),
					},
					groups: []*v1alpha1.PodGroup{basicIn("pg1", upRack), basicIn("pg2", upZone)},
					pods:   podList(pods("pg1", "1", "p1", "p2"), pods("pg2", "2", "p3", "p4", "p5")),
					bound:  names("p1", "p2", "p3", "p4", "p5"),
					placed: []upPlaced{
						{names("p1", "p2"), names("node1-rack1")},
						{names("p3", "p4", "p5"), names("node2-zone2", "node3-zone2", "node4-zone2", "node5-zone2")},
					},
				}},
			},
			{
				// p1 alone takes the tighter rack; of p2 and p3 one fits
				// beside it (upstream names p2 by its queue order), the
				// other waits; pg2 then fills the other rack.
				name: "two basic podgroups schedule consecutively, one does not fit in the assigned rack",
				steps: []upStep{
					{
						nodes: []upNode{
							rackNode("node1-rack1", "rack-1", "zone-1"), rackNode("node2-rack1", "rack-1", "zone-1"), rackNode("node3-rack2", "rack-2", "zone-1"),
						},
						groups: []*v1alpha1.PodGroup{basicIn("pg1", upRack)},
						pods:   pods("pg1", "1", "p1"),
						bound:  names("p1"),
					},
					{
						pods:   pods("pg1", "1", "p2", "p3"),
						some:   &upSome{1, names("p2", "p3")},
						placed: []upPlaced{{names("p1", "p2", "p3"), names("node3-rack2")}},
					},
					{
						groups: []*v1alpha1.PodGroup{basicIn("pg2", upRack)},
						pods:   pods("pg2", "1", "p4", "p5", "p6"),
						bound:  names("p4", "p5", "p6"),
						placed: []upPlaced{{names("p4", "p5", "p6"), names("node1-rack1", "node2-rack1")}},
					},
				},
			},
			{
				name: "basic podgroup continues to schedule pods when more resources become available",
				steps: []upStep{
					{
						nodes: twoRacks,
						pods:  []*corev1.Pod{running("existing1", "node1-rack1", "1")},
						bound: names("existing1"),
					},
					{
						groups: []*v1alpha1.PodGroup{basicIn("pg1", upRack)},
						pods:   pods("pg1", "1", "p1"),
						bound:  names("p1"),
						placed: []upPlaced{{names("p1"), names("node1-rack1")}},
					},
					{
						pods:    pods("pg1", "1", "p2"),
						pending: names("p2"),
					},
					{
						remove: names("existing1"),
						bound:  names("p1", "p2"),
						placed: []upPlaced{{names("p1", "p2"), names("node1-rack1")}},
					},
				},
			},
		}
	})
}

// TestUpstreamCompositePreemption restates the composite-group cases of
// upstream's podgrouppreemption_test.go, and its basic PodGroup with
// disruptionMode all: pods already running (pinned, or scheduled first),
// then the preemptors; which pods are evicted, which stay, which
// preemptors bind and which wait.
func TestUpstreamCompositePreemption(t *testing.T) {
	c := preemptionCluster(t, nil)
	createUpstreamPriorities(t, c)
	never := corev1.PreemptNever
	createPriorityClasses(t, c, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "u-100-never"}, Value: 100, PreemptionPolicy: &never})
	fooBudget := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "pdb"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(2)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "foo"}},
		},
	}
	// preempt is upstream's table shape: nodes, groups and a budget, the
	// initial pods (all bound first), then the preemptors.
	type preempt struct {
		nodes      []upNode
		composites []*v1alpha1.CompositePodGroup
		groups     []*v1alpha1.PodGroup
		pdb        *policyv1.PodDisruptionBudget
		initial    []*corev1.Pod
		// dropComposites are deleted once the initial pods run.
		dropComposites []string
		preemptors     []*corev1.Pod
		bound          []string
		evicted        []string
		oneOf          []string
		pending        []string
		kept           []string
	}
	scenario := func(name string, p preempt) upScenario {
		var initial []string
		for _, q := range p.initial {
			initial = append(initial, q.Name)
		}
		return upScenario{
			name: name,
			steps: []upStep{
				{nodes: p.nodes, composites: p.composites, groups: p.groups, pdb: p.pdb, pods: p.initial, bound: initial},
				{removeComposites: p.dropComposites, pods: p.preemptors, bound: p.bound, gone: p.evicted, oneGone: p.oneOf, pending: p.pending},
			},
			kept: p.kept,
		}
	}
	twoNodes := []upNode{cpuNode("node1", "2"), cpuNode("node2", "2")}
	oneNode := func(cpu string) []upNode { return []upNode{cpuNode("node1", cpu)} }
	neverPolicy := func(pg *v1alpha1.PodGroup) {
		pg.Spec.PriorityClassName = "u-100-never"
		pg.Spec.PreemptionPolicy = ptr.To(v1alpha1.PreemptNever)
	}
	lowerPolicy := func(pg *v1alpha1.PodGroup) {
		pg.Spec.PreemptionPolicy = ptr.To(v1alpha1.PreemptLowerPriority)
	}
	compositeNever := func(cpg *v1alpha1.CompositePodGroup) {
		cpg.Spec.PriorityClassName = "u-100-never"
		cpg.Spec.PreemptionPolicy = ptr.To(v1alpha1.PreemptNever)
	}
	compositeLower := func(cpg *v1alpha1.CompositePodGroup) {
		cpg.Spec.PreemptionPolicy = ptr.To(v1alpha1.PreemptLowerPriority)
	}
	neverPod := withPriority("u-100-never")
	runUpScenarios(t, c, "cpre", "podgrouppreemption: ", func(s string) []upScenario {
		// pinned is a running pod on node, of group (may be empty).
		pinned := func(name, group, node, cpu string, v int32, mutate ...func(*corev1.Pod)) *corev1.Pod {
			return upPod(name, s, group, v, cpu, append(mutate, onNode(node))...)
		}
		lows := func(n int) []*corev1.Pod { return upPods(s, "", 10, "1", "low-1", "low-2", "low-3")[:n] }
		highs := func(group string, cpu string, names ...string) []*corev1.Pod {
			return upPods(s, group, 100, cpu, names...)
		}
		foo := withLabels(map[string]string{"app": "foo"})
		// victimsOnTwoNodes: low-1 (pg1) on node1, low-2 (pg1) and low-3
		// (pg2) on node2; a plain 2-cpu preemptor must have node1.
		victimsOnTwoNodes := func() []*corev1.Pod {
			return []*corev1.Pod{
				pinned("low-1", "pg1", "node1", "1", 10), pinned("low-2", "pg1", "node2", "1", 10), pinned("low-3", "pg2", "node2", "1", 10),
			}
		}
		onNode1 := func() []*corev1.Pod { return []*corev1.Pod{upPod("high-1", s, "", 100, "2", selectHost("node1"))} }
		return []upScenario{
			scenario("CPG Partial Preemption", preempt{
				nodes:      twoNodes,
				composites: []*v1alpha1.CompositePodGroup{upComposite("cpg1", 0, 100, "", "")},
				groups:     []*v1alpha1.PodGroup{upGang("pg1", 3, 100, underParent("cpg1"))},
				initial:    []*corev1.Pod{pinned("low-1", "", "node1", "2", 10), pinned("low-2", "", "node2", "1", 10)},
				preemptors: highs("pg1", "1", "high-1", "high-2", "high-3"),
				bound:      names("high-1", "high-2", "high-3"), evicted: names("low-1"), kept: names("low-2"),
			}),
			scenario("CPG Victim Across Multiple Nodes, CPG DisruptionModeSingle", preempt{
				nodes:      twoNodes,
				composites: []*v1alpha1.CompositePodGroup{upComposite("cpg1", 0, 10, "", "", compositeDisruptSingle)},
				groups:     []*v1alpha1.PodGroup{upGang("pg1", 2, 10, underParent("cpg1"), disruptSingle), upGang("pg2", 1, 10, underParent("cpg1"), disruptSingle)},
				initial:    victimsOnTwoNodes(),
				preemptors: onNode1(),
				bound:      names("high-1"), evicted: names("low-1"), kept: names("low-2", "low-3"),
			}),
			scenario("CPG Preemption aborted if victim yields insufficient resources", preempt{
				nodes:      oneNode("2"),
				composites: []*v1alpha1.CompositePodGroup{upComposite("cpg-victim", 0, 10, "", "")},
				groups:     []*v1alpha1.PodGroup{upGang("pg-victim", 1, 10, underParent("cpg-victim"))},
				initial:    []*corev1.Pod{pinned("low-pod", "pg-victim", "node1", "1", 10)},
				preemptors: []*corev1.Pod{upPod("high-preemptor", s, "", 100, "3")},
				pending:    names("high-preemptor"), kept: names("low-pod"),
			}),
			// A deliberate difference: upstream ranks a standalone
			// PodGroup below a composite's child and evicts low-pg. Phalanx
			// has no rank of group kinds: both victims cost the same (one
			// pod, one unit, priority 10), so the tie goes by age and name.
			// One of them goes, the other stays.
			scenario("CPG Tie-Breaking: PodGroup chosen over CompositePodGroup", preempt{
				nodes:      oneNode("2"),
				composites: []*v1alpha1.CompositePodGroup{upComposite("cpg-victim", 0, 10, "", "", compositeDisruptAll)},
				groups: []*v1alpha1.PodGroup{
					upGang("pg-victim-standalone", 1, 10), upGang("pg-victim-child", 1, 10, underParent("cpg-victim")), upGang("pg-preemptor", 1, 100),
				},
				initial:    []*corev1.Pod{pinned("low-pg", "pg-victim-standalone", "node1", "1", 10), pinned("low-cpg", "pg-victim-child", "node1", "1", 10)},
				preemptors: highs("pg-preemptor", "1", "high-preemptor"),
				bound:      names("high-preemptor"), oneOf: names("low-pg", "low-cpg"),
			}),
			scenario("Scheduler targets lower-priority CPG over higher-priority CPG", preempt{
				nodes:      oneNode("3"),
				composites: []*v1alpha1.CompositePodGroup{upComposite("cpg-lower", 0, 10, "", ""), upComposite("cpg-higher", 0, 20, "", "")},
				groups:     []*v1alpha1.PodGroup{upGang("pg-lower", 1, 10, underParent("cpg-lower")), upGang("pg-higher", 1, 20, underParent("cpg-higher"))},
				initial:    []*corev1.Pod{pinned("lower-pod", "pg-lower", "node1", "1", 10), pinned("higher-pod", "pg-higher", "node1", "1", 20)},
				preemptors: []*corev1.Pod{upPod("high-preemptor", s, "", 100, "2")},
				bound:      names("high-preemptor"), evicted: names("lower-pod"), kept: names("higher-pod"),
			}),
			scenario("PDB Violation reprieves the entire CPG victim (DisruptionModeAll)", preempt{
				nodes: oneNode("3"),
				composites: []*v1alpha1.CompositePodGroup{
					upComposite("cpg-pdb", 0, 10, "", "", compositeDisruptAll), upComposite("cpg-no-pdb", 0, 10, "", "", compositeDisruptAll),
				},
				groups: []*v1alpha1.PodGroup{upGang("pg-pdb", 2, 10, underParent("cpg-pdb")), upGang("pg-no-pdb", 1, 10, underParent("cpg-no-pdb"))},
				pdb:    fooBudget,
				initial: []*corev1.Pod{
					pinned("pod-pdb-1", "pg-pdb", "node1", "1", 10, foo), pinned("pod-pdb-2", "pg-pdb", "node1", "1", 10, foo),
					pinned("pod-no-pdb-1", "pg-no-pdb", "node1", "1", 10),
				},
				preemptors: []*corev1.Pod{upPod("high-preemptor", s, "", 100, "1")},
				bound:      names("high-preemptor"), evicted: names("pod-no-pdb-1"), kept: names("pod-pdb-1", "pod-pdb-2"),
			}),
			scenario("PDB Violation reprieves only the child PG (DisruptionModeSingle)", preempt{
				nodes:      oneNode("3"),
				composites: []*v1alpha1.CompositePodGroup{upComposite("cpg-single", 0, 10, "", "", compositeDisruptSingle)},
				groups: []*v1alpha1.PodGroup{
					upGang("pg-pdb", 2, 10, underParent("cpg-single"), disruptSingle), upGang("pg-no-pdb", 1, 10, underParent("cpg-single"), disruptSingle),
				},
				pdb: fooBudget,
				initial: []*corev1.Pod{
					pinned("pod-pdb-1", "pg-pdb", "node1", "1", 10, foo), pinned("pod-pdb-2", "pg-pdb", "node1", "1", 10, foo),
					pinned("pod-no-pdb-1", "pg-no-pdb", "node1", "1", 10),
				},
				preemptors: []*corev1.Pod{upPod("high-preemptor", s, "", 100, "1")},
				bound:      names("high-preemptor"), evicted: names("pod-no-pdb-1"), kept: names("pod-pdb-1", "pod-pdb-2"),
			}),
			scenario("3-Level Nested CPG resolves DisruptionMode up to the grandparent", preempt{
				nodes: twoNodes,
				composites: []*v1alpha1.CompositePodGroup{
					upComposite("cpg-grandparent", 0, 10, "", "", compositeDisruptAll),
					upComposite("cpg-parent", 0, 10, "cpg-grandparent", "", compositeDisruptSingle),
				},
				groups:     []*v1alpha1.PodGroup{upGang("pg1", 2, 10, underParent("cpg-parent"), disruptSingle), upGang("pg2", 1, 10, underParent("cpg-parent"), disruptSingle)},
				initial:    victimsOnTwoNodes(),
				preemptors: onNode1(),
				bound:      names("high-1"), evicted: names("low-1", "low-2", "low-3"),
			}),
			scenario("Hierarchical DisruptionMode - Grandparent Single, Parent All", preempt{
				nodes: twoNodes,
				composites: []*v1alpha1.CompositePodGroup{
					upComposite("cpg-grandparent", 0, 10, "", "", compositeDisruptSingle),
					upComposite("cpg-parent", 0, 10, "cpg-grandparent", "", compositeDisruptAll),
				},
				groups: []*v1alpha1.PodGroup{
					upGang("pg1", 2, 10, underParent("cpg-parent"), disruptSingle), upGang("pg2", 1, 10, underParent("cpg-grandparent"), disruptSingle),
				},
				initial:    victimsOnTwoNodes(),
				preemptors: onNode1(),
				bound:      names("high-1"), evicted: names("low-1", "low-2"), kept: names("low-3"),
			}),
			scenario("CPG with default preemption policy performs preemption, with PodGroupPreemptionPolicy enabled", preempt{
				nodes:      oneNode("3"),
				composites: []*v1alpha1.CompositePodGroup{upComposite("cpg1", 0, 100, "", "")},
				groups:     []*v1alpha1.PodGroup{upGang("pg1", 3, 100, underParent("cpg1"))},
				initial:    lows(3),
				preemptors: highs("pg1", "1", "high-1", "high-2", "high-3"),
				bound:      names("high-1", "high-2", "high-3"), evicted: names("low-1", "low-2", "low-3"),
			}),
			scenario("CPG with PreemptNever Policy", preempt{
				nodes:      oneNode("3"),
				composites: []*v1alpha1.CompositePodGroup{upComposite("cpg1", 0, 100, "", "", compositeNever)},
				groups:     []*v1alpha1.PodGroup{upGang("pg1", 2, 100, underParent("cpg1"), neverPolicy), upGang("pg2", 1, 100, underParent("cpg1"), neverPolicy)},
				initial:    lows(3),
				preemptors: podList(highs("pg1", "1", "high-1", "high-2"), highs("pg2", "1", "high-3")),
				pending:    names("high-1", "high-2", "high-3"), kept: names("low-1", "low-2", "low-3"),
			}),
			scenario("CPG with PreemptLowerPriority Policy", preempt{
				nodes:      oneNode("3"),
				composites: []*v1alpha1.CompositePodGroup{upComposite("cpg1", 0, 100, "", "", compositeLower)},
				groups:     []*v1alpha1.PodGroup{upGang("pg1", 2, 100, underParent("cpg1"), lowerPolicy), upGang("pg2", 1, 100, underParent("cpg1"), lowerPolicy)},
				initial:    lows(3),
				preemptors: podList(highs("pg1", "1", "high-1", "high-2"), highs("pg2", "1", "high-3")),
				bound:      names("high-1", "high-2", "high-3"), evicted: names("low-1", "low-2", "low-3"),
			}),
			scenario("CPG PreemptionPolicy PreemptNever prevents preemption", preempt{
				nodes:      oneNode("3"),
				composites: []*v1alpha1.CompositePodGroup{upComposite("cpg-preempt-never", 0, 100, "", "", compositeNever)},
				groups:     []*v1alpha1.PodGroup{upGang("pg-preempt-never", 2, 100, underParent("cpg-preempt-never"), neverPolicy)},
				initial: []*corev1.Pod{
					pinned("low-1", "", "node1", "1", 10), pinned("low-2", "", "node1", "1", 10), pinned("low-3", "", "node1", "1", 10),
				},
				preemptors: []*corev1.Pod{
					upPod("high-1", s, "pg-preempt-never", 100, "2", neverPod), upPod("high-2", s, "pg-preempt-never", 100, "1", neverPod),
				},
				pending: names("high-1", "high-2"), kept: names("low-1", "low-2", "low-3"),
			}),
			scenario("CPG PreemptionPolicy PreemptLowerPriority allows preemption", preempt{
				nodes:      oneNode("3"),
				composites: []*v1alpha1.CompositePodGroup{upComposite("cpg-preempt-lower", 0, 100, "", "", compositeLower)},
				groups:     []*v1alpha1.PodGroup{upGang("pg-preempt-lower", 2, 100, underParent("cpg-preempt-lower"), lowerPolicy)},
				initial: []*corev1.Pod{
					pinned("low-1", "", "node1", "1", 10), pinned("low-2", "", "node1", "1", 10), pinned("low-3", "", "node1", "1", 10),
				},
				preemptors: podList(highs("pg-preempt-lower", "2", "high-1"), highs("pg-preempt-lower", "1", "high-2")),
				bound:      names("high-1", "high-2"), evicted: names("low-1", "low-2", "low-3"),
			}),
			scenario("CPG with PreemptNever preemption policy in all pods does not perform preemption, with PodGroupPreemptionPolicy disabled", preempt{
				// Phalanx has no feature gate; the pods' Never comes from
				// their PriorityClass, which the groups name too.
				nodes: oneNode("3"),
				composites: []*v1alpha1.CompositePodGroup{upComposite("cpg1", 0, 100, "", "", func(cpg *v1alpha1.CompositePodGroup) {
					cpg.Spec.PriorityClassName = "u-100-never"
				})},
				groups: []*v1alpha1.PodGroup{upGang("pg1", 3, 100, underParent("cpg1"), func(pg *v1alpha1.PodGroup) {
					pg.Spec.PriorityClassName = "u-100-never"
				})},
				initial: lows(3),
				preemptors: []*corev1.Pod{
					upPod("high-1", s, "pg1", 100, "1", neverPod), upPod("high-2", s, "pg1", 100, "1", neverPod), upPod("high-3", s, "pg1", 100, "1", neverPod),
				},
				pending: names("high-1", "high-2", "high-3"), kept: names("low-1", "low-2", "low-3"),
			}),
			scenario("CPG Gang scheduling: preemption with pod anti-affinity constraints", preempt{
				nodes:      twoNodes,
				composites: []*v1alpha1.CompositePodGroup{upComposite("preemptor-cpg", 0, 100, "", "")},
				groups:     []*v1alpha1.PodGroup{upGang("preemptor-pg", 2, 100, underParent("preemptor-cpg"))},
				initial:    []*corev1.Pod{pinned("initial-pod", "", "node1", "250m", 10, withLabels(map[string]string{"app": "initial"}))},
				preemptors: []*corev1.Pod{
					upPod("preemptor-1", s, "preemptor-pg", 100, "1500m", antiAffinityExists("app", sandbox.HostnameLabel)),
					upPod("preemptor-2", s, "preemptor-pg", 100, "1500m", antiAffinityExists("app", sandbox.HostnameLabel)),
				},
				bound: names("preemptor-1", "preemptor-2"), evicted: names("initial-pod"),
			}),
			scenario("CPG Gang scheduling: preemption with pod node port", preempt{
				nodes:      twoNodes,
				composites: []*v1alpha1.CompositePodGroup{upComposite("preemptor-cpg", 0, 100, "", "")},
				groups:     []*v1alpha1.PodGroup{upGang("preemptor-pg", 2, 100, underParent("preemptor-cpg"))},
				initial:    []*corev1.Pod{pinned("initial-pod", "", "node1", "250m", 10, hostPort(8080))},
				preemptors: []*corev1.Pod{
					upPod("preemptor-1", s, "preemptor-pg", 100, "1500m", hostPort(8080)),
					upPod("preemptor-2", s, "preemptor-pg", 100, "1500m", hostPort(8080)),
				},
				bound: names("preemptor-1", "preemptor-2"), evicted: names("initial-pod"),
			}),
			scenario("Binding first before preemption for gang policy", preempt{
				// A gang root of one child each; the victim gang of 4 has only
				// two members running. Upstream also asserts the order of its
				// injected plugins' calls; the outcome is what is checked.
				nodes: twoNodes,
				composites: []*v1alpha1.CompositePodGroup{
					upComposite("cpg-victim", 1, 10, "", ""), upComposite("cpg-preemptor", 1, 100, "", ""),
				},
				groups: []*v1alpha1.PodGroup{
					upGang("pg-victim", 4, 10, underParent("cpg-victim")), upGang("pg-preemptor", 4, 100, underParent("cpg-preemptor")),
				},
				initial:    []*corev1.Pod{pinned("low-1", "pg-victim", "node1", "1", 10), pinned("low-2", "pg-victim", "node2", "1", 10)},
				preemptors: highs("pg-preemptor", "1", "high-1", "high-2", "high-3", "high-4"),
				bound:      names("high-1", "high-2", "high-3", "high-4"), evicted: names("low-1", "low-2"),
			}),
			scenario("Binding first before preemption for CPG", preempt{
				nodes: twoNodes,
				composites: []*v1alpha1.CompositePodGroup{
					upComposite("cpg-victim", 0, 10, "", ""), upComposite("cpg-preemptor", 0, 100, "", ""),
				},
				groups: []*v1alpha1.PodGroup{
					upGang("pg-victim", 4, 10, underParent("cpg-victim")), upGang("pg-preemptor", 4, 100, underParent("cpg-preemptor")),
				},
				initial:    []*corev1.Pod{pinned("low-1", "pg-victim", "node1", "1", 10), pinned("low-2", "pg-victim", "node2", "1", 10)},
				preemptors: highs("pg-preemptor", "1", "high-1", "high-2", "high-3", "high-4"),
				bound:      names("high-1", "high-2", "high-3", "high-4"), evicted: names("low-1", "low-2"),
			}),
			scenario("CPG Missing Parent Reference Fallback", preempt{
				// The victims' parent is deleted before the preemptors come.
				nodes: oneNode("2"),
				composites: []*v1alpha1.CompositePodGroup{
					upComposite("cpg-victim", 0, 10, "", ""), upComposite("cpg-preemptor", 0, 100, "", ""),
				},
				groups: []*v1alpha1.PodGroup{
					upGang("pg-victim", 2, 10, underParent("cpg-victim")), upGang("pg-preemptor", 2, 100, underParent("cpg-preemptor")),
				},
				initial:        []*corev1.Pod{pinned("low-1", "pg-victim", "node1", "1", 10), pinned("low-2", "pg-victim", "node1", "1", 10)},
				dropComposites: names("cpg-victim"),
				preemptors:     highs("pg-preemptor", "1", "high-1", "high-2"),
				bound:          names("high-1", "high-2"), evicted: names("low-1", "low-2"),
			}),
			scenario("Preempt the whole basic PodGroup with a PodGroup disruption mode", preempt{
				nodes:      oneNode("3"),
				groups:     []*v1alpha1.PodGroup{upGang("pg1", 1, 100), upBasic("pg2", 10, disruptAll)},
				initial:    upPods(s, "pg2", 10, "1", "low-1", "low-2", "low-3"),
				preemptors: highs("pg1", "1", "high-1"),
				bound:      names("high-1"), evicted: names("low-1", "low-2", "low-3"),
			}),
		}
	})
}

// holdFinalizer keeps a deleted pod terminating until the test lets it go,
// as a victim with a long grace period would.
const holdFinalizer = "phalanx.test/hold"

func held(p *corev1.Pod) { p.Finalizers = append(p.Finalizers, holdFinalizer) }

// release lets held pods of ns finish terminating.
func release(t *testing.T, c *sandbox.Cluster, ns string, pods ...string) {
	ctx := context.Background()
	for _, name := range pods {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		p.Finalizers = nil
		_, err = c.Client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{})
		assert.NoError(t, err, "release %s", name)
	}
}

// TestUpstreamPreemptionWhileVictimsTerminate restates upstream's
// TestPodGroupPreemptionStatus and
// TestPodGroupPreemption_NominatedNodeNameRespected: what a preempting
// group says and where its members go while its victims are still
// terminating.
func TestUpstreamPreemptionWhileVictimsTerminate(t *testing.T) {
	c := preemptionCluster(t, nil)
	createUpstreamPriorities(t, c)
	ctx := context.Background()
	terminating := func(ns, name string) func() (bool, error) {
		return func() (bool, error) {
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && p.DeletionTimestamp != nil, err
		}
	}

	t.Run("TestPodGroupPreemptionStatus", func(t *testing.T) {
		ns := namespace(t, c)
		t.Cleanup(func() {
			if t.Failed() {
				dumpOutcome(t, c, ns)
				if pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "pg1", metav1.GetOptions{}); err == nil {
					t.Logf("conditions %+v", pg.Status.Conditions)
				}
			}
		})
		suite := "u-pre-status"
		upstreamNodes(t, c, suite, 1, "1", nil)
		t.Cleanup(func() { release(t, c, ns, "low-1") })
		createAll(t, c, ns, upPod("low-1", suite, "", 10, "1", held))
		waitAllBound(t, c, ns, 1)
		createPodGroup(t, c, ns, upGang("pg1", 1, 100))
		createAll(t, c, ns, upPod("high-1", suite, "pg1", 100, "1"))
		eventually(t, 30*time.Second, "low-1 preempted", terminating(ns, "low-1"))
		// Upstream's condition says its group preemption found a placement
		// and evicts; Phalanx's condition gives the planner's numbers or,
		// once the group preempted, the eviction and then the wait for its
		// victims, and the member's event and nominated node tell of the
		// preemption.
		eventually(t, 30*time.Second, "pg1 says why it waits", func() (bool, error) {
			cond := groupCondition(t, c, ns, "pg1", v1alpha1.PodGroupInitiallyScheduled)
			return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == v1alpha1.ReasonUnschedulable, nil
		})
		cond := groupCondition(t, c, ns, "pg1", v1alpha1.PodGroupSchedulable)
		require.NotNil(t, cond)
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
		assert.Regexp(t, `only 0 of 1 pods fit|preempting 1 pods \(0 units, highest priority 10\) so the whole group fits|waiting for 1 preempted pods to terminate`, cond.Message)
		eventually(t, 30*time.Second, "high-1's event tells of the preemption", func() (bool, error) {
			return podEventContains(ctx, c, ns, "high-1", "preempting 1 pods")
		})
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "high-1", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Equal(t, "u-pre-status-1", p.Status.NominatedNodeName)
		assert.Empty(t, boundPods(t, c, ns)["high-1"], "high-1 waits for the victim")
		release(t, c, ns, "low-1")
		eventually(t, 30*time.Second, "high-1 bound once low-1 is gone", func() (bool, error) {
			return boundPods(t, c, ns)["high-1"] != "", nil
		})
	})

	t.Run("TestPodGroupPreemption_NominatedNodeNameRespected", func(t *testing.T) {
		ns := namespace(t, c)
		t.Cleanup(func() {
			if t.Failed() {
				dumpOutcome(t, c, ns)
			}
		})
		suite := "u-pre-nnn"
		nodes := upstreamNodes(t, c, suite, 3, "1", nil)
		t.Cleanup(func() { release(t, c, ns, "pod2", "pod3") })
		createAll(t, c, ns,
			upPod("pod1", suite, "", 100, "1", onNode(nodes[0])),
			upPod("pod2", suite, "", 10, "1", onNode(nodes[1]), held),
			upPod("pod3", suite, "", 10, "1", onNode(nodes[2]), held))
		waitAllBound(t, c, ns, 3)
		createPodGroup(t, c, ns, upGang("pg1", 2, 50))
		createAll(t, c, ns, upPod("preemptor-1", suite, "pg1", 50, "1"), upPod("preemptor-2", suite, "pg1", 50, "1"))
		eventually(t, 30*time.Second, "pod2 and pod3 preempted", func() (bool, error) {
			a, err := terminating(ns, "pod2")()
			if !a || err != nil {
				return a, err
			}
			return terminating(ns, "pod3")()
		})
		// The member whose cycle preempted is nominated to a victim's
		// node (Phalanx holds the room of the others in the scheduler).
		var first map[string]string
		eventually(t, 30*time.Second, "a preemptor nominated", func() (bool, error) {
			first = map[string]string{}
			for _, name := range []string{"preemptor-1", "preemptor-2"} {
				p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if p.Status.NominatedNodeName != "" {
					first[name] = p.Status.NominatedNodeName
				}
			}
			return len(first) > 0, nil
		})
		for pod, node := range first {
			assert.Contains(t, []string{nodes[1], nodes[2]}, node, "%s nominated to a victim's node", pod)
		}
		// node 1 frees up; the preemptors wait for the room their victims
		// leave, and neither binds to node 1 nor changes its nomination.
		require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(ctx, "pod1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
		waitGone(t, c, ns, "pod1")
		consistently(t, 3*time.Second, "the preemptors keep their nominations", func() bool {
			b := boundPods(t, c, ns)
			if b["preemptor-1"] != "" || b["preemptor-2"] != "" {
				return false
			}
			for pod, node := range first {
				p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
				if err != nil || p.Status.NominatedNodeName != node {
					return false
				}
			}
			return true
		})
		release(t, c, ns, "pod2", "pod3")
		waitAllBound(t, c, ns, 2)
	})
}
