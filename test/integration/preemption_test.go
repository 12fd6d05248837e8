package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// preemptionCluster starts a cluster with a node agent (victims really go
// away) and low/high PriorityClasses.
func preemptionCluster(t *testing.T, topology *sandbox.Topology) *sandbox.Cluster {
	c := startCluster(t, sandbox.Options{Scheduler: true, NodeAgent: true, Topology: topology})
	never := corev1.PreemptNever
	createPriorityClasses(t, c,
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "low"}, Value: 10},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000},
		&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high-never"}, Value: 1000, PreemptionPolicy: &never})
	return c
}

// waitPriorityClassAdmitted waits until the API server's Priority
// admission, which reads PriorityClasses from an informer, knows the
// class: a pod created right after its class was refused ("no
// PriorityClass with name low was found") on a loaded machine.
func waitPriorityClassAdmitted(t *testing.T, c *sandbox.Cluster, class string) {
	t.Helper()
	probe := member{name: "priority-probe", cpu: "1", priorityClass: class}.pod()
	eventually(t, 30*time.Second, "PriorityClass "+class+" known to admission", func() (bool, error) {
		_, err := c.Client.CoreV1().Pods(metav1.NamespaceDefault).Create(context.Background(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil, nil
	})
}

// createPriorityClasses creates the classes (one that exists already is
// kept) and returns once pod admission knows each of them: admission reads
// classes from an informer, and on a loaded machine a pod created right
// after its class was refused with "no PriorityClass with name".
func createPriorityClasses(t *testing.T, c *sandbox.Cluster, classes ...*schedulingv1.PriorityClass) {
	t.Helper()
	for _, pc := range classes {
		_, err := c.Client.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{})
		if !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err, "create PriorityClass %s", pc.Name)
		}
	}
	for _, pc := range classes {
		waitPriorityClassAdmitted(t, c, pc.Name)
	}
}

// podNames lists the pods of ns (not terminating) with the given prefix.
func podNames(t *testing.T, c *sandbox.Cluster, ns, prefix string) []string {
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	var out []string
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, prefix) && p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

func highGang(t *testing.T, c *sandbox.Cluster, ns, name string, n int, cpu string, mutate func(*v1alpha1.PodGroup)) {
	pg := gangPG(name, int32(n))
	pg.Spec.PriorityClassName = "high"
	if mutate != nil {
		mutate(pg)
	}
	createPodGroup(t, c, ns, pg)
	for i := 0; i < n; i++ {
		createPods(t, c, ns, member{name: fmt.Sprintf("%s-%d", name, i), labels: inGroup(name), cpu: cpu, priorityClass: pg.Spec.PriorityClassName})
	}
}

func waitBound(t *testing.T, c *sandbox.Cluster, ns, prefix string, n int) {
	eventually(t, 60*time.Second, fmt.Sprintf("%d %s* pods bound", n, prefix), func() (bool, error) {
		return boundWithPrefix(t, c, ns, prefix) == n, nil
	})
}

// TestBalloonPreemption is the balloon case of OpenAI's 7,500-node write-up: a high-priority gang of
// 8 on a cluster filled with 16 low-priority balloons evicts exactly 8.
func TestBalloonPreemption(t *testing.T) {
	c := preemptionCluster(t, &sandbox.Topology{Zones: 1, RacksPerZone: 2, NodesPerRack: 8, CPU: "4", Memory: "32Gi", Pods: 110})
	ns := namespace(t, c)
	for i := 0; i < 16; i++ {
		createPods(t, c, ns, member{name: fmt.Sprintf("balloon-%02d", i), cpu: "4", priorityClass: "low"})
	}
	waitBound(t, c, ns, "balloon-", 16)
	highGang(t, c, ns, "job", 8, "4", nil)
	waitBound(t, c, ns, "job-", 8)
	consistently(t, 2*time.Second, "8 balloons keep running", func() bool {
		return len(podNames(t, c, ns, "balloon-")) == 8 && boundWithPrefix(t, c, ns, "balloon-") == 8
	})
}

// TestAllModeVictimIsOneUnit: the cheaper option by the documented order is
// taken: 2 independent pods rather than a 4-pod disruptionMode-all gang.
func TestAllModeVictimIsOneUnit(t *testing.T) {
	c := preemptionCluster(t, &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 6, CPU: "4", Memory: "32Gi", Pods: 110})
	ns := namespace(t, c)
	pg := gangPG("victim", 4)
	pg.Spec.PriorityClassName = "low"
	pg.Spec.DisruptionMode = &v1alpha1.DisruptionMode{All: &v1alpha1.AllDisruptionMode{}}
	createPodGroup(t, c, ns, pg)
	for i := 0; i < 4; i++ {
		createPods(t, c, ns, member{name: fmt.Sprintf("victim-%d", i), labels: inGroup("victim"), cpu: "4", priorityClass: "low"})
	}
	waitBound(t, c, ns, "victim-", 4)
	createPods(t, c, ns,
		member{name: "single-0", cpu: "4", priorityClass: "low"},
		member{name: "single-1", cpu: "4", priorityClass: "low"})
	waitBound(t, c, ns, "single-", 2)

	highGang(t, c, ns, "job", 2, "4", nil)
	waitBound(t, c, ns, "job-", 2)
	assert.Empty(t, podNames(t, c, ns, "single-"), "the two independent pods were the cheapest victims")
	assert.Len(t, podNames(t, c, ns, "victim-"), 4, "the all-mode gang is untouched")
}

// TestCompositeAllEvictsTheWholeHierarchy: needing one pod's room inside a
// hierarchy rooted at an all-mode composite evicts every pod under it.
func TestCompositeAllEvictsTheWholeHierarchy(t *testing.T) {
	c := preemptionCluster(t, &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 4, CPU: "4", Memory: "32Gi", Pods: 110})
	ctx := context.Background()
	ns := namespace(t, c)
	root := composite("training", 2)
	root.Spec.PriorityClassName = "low"
	root.Spec.DisruptionMode = &v1alpha1.CompositeDisruptionMode{All: &v1alpha1.AllCompositeDisruptionMode{}}
	_, err := c.Phalanx.SchedulingV1alpha1().CompositePodGroups(ns).Create(ctx, root, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, child := range []string{"part-a", "part-b"} {
		pg := gangPG(child, 2)
		pg.Spec.ParentCompositePodGroupName = ptr.To("training")
		createPodGroup(t, c, ns, pg)
		for i := 0; i < 2; i++ {
			createPods(t, c, ns, member{name: fmt.Sprintf("%s-%d", child, i), labels: inGroup(child), cpu: "4", priorityClass: "low"})
		}
	}
	waitBound(t, c, ns, "part-", 4)
	highGang(t, c, ns, "job", 1, "4", nil)
	waitBound(t, c, ns, "job-", 1)
	eventually(t, 30*time.Second, "the whole hierarchy evicted", func() (bool, error) {
		return len(podNames(t, c, ns, "part-")) == 0, nil
	})
}

// TestPreemptionRefusals: Never, equal priority and no partial benefit all
// evict nothing.
func TestPreemptionRefusals(t *testing.T) {
	c := preemptionCluster(t, &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 4, CPU: "4", Memory: "32Gi", Pods: 110})
	ns := namespace(t, c)
	for i := 0; i < 4; i++ {
		createPods(t, c, ns, member{name: fmt.Sprintf("low-%d", i), cpu: "4", priorityClass: "low"})
	}
	waitBound(t, c, ns, "low-", 4)

	t.Run("a gang with preemptionPolicy Never stays pending and says why", func(t *testing.T) {
		gns := namespace(t, c)
		// The class carries the policy, so the pods' own policy matches the group's.
		highGang(t, c, gns, "never", 2, "4", func(pg *v1alpha1.PodGroup) { pg.Spec.PriorityClassName = "high-never" })
		waitGroupCondition(t, c, gns, "never", v1alpha1.PodGroupSchedulable, "preemptionPolicy is Never")
		consistently(t, 3*time.Second, "nothing evicted", func() bool { return len(podNames(t, c, ns, "low-")) == 4 })
		assert.Equal(t, 0, boundWithPrefix(t, c, gns, "never-"))
	})

	t.Run("a gang of equal priority evicts nothing", func(t *testing.T) {
		gns := namespace(t, c)
		pg := gangPG("peer", 2)
		pg.Spec.PriorityClassName = "low"
		createPodGroup(t, c, gns, pg)
		for i := 0; i < 2; i++ {
			createPods(t, c, gns, member{name: fmt.Sprintf("peer-%d", i), labels: inGroup("peer"), cpu: "4", priorityClass: "low"})
		}
		failedSchedulingFor(t, c, gns, "peer-0")
		consistently(t, 3*time.Second, "nothing evicted", func() bool { return len(podNames(t, c, ns, "low-")) == 4 })
	})

	t.Run("a gang that cannot fit even after evicting everything evicts nothing", func(t *testing.T) {
		gns := namespace(t, c)
		highGang(t, c, gns, "huge", 5, "4", nil)
		failedSchedulingFor(t, c, gns, "huge-0")
		consistently(t, 3*time.Second, "nothing evicted", func() bool { return len(podNames(t, c, ns, "low-")) == 4 })
	})
}

// TestPreemptionPicksTheCheapestRack: the rack-constrained gang fits in rack
// A by evicting 3 pods or in rack B by evicting 1; rack B is chosen.
func TestPreemptionPicksTheCheapestRack(t *testing.T) {
	c := preemptionCluster(t, &sandbox.Topology{Zones: 1, RacksPerZone: 2, NodesPerRack: 3, CPU: "4", Memory: "32Gi", Pods: 110})
	ctx := context.Background()
	ns := namespace(t, c)
	// Rack 0: all 3 nodes busy. Rack 1: 1 busy, 2 free.
	busy := []string{"node-z0-r0-n0", "node-z0-r0-n1", "node-z0-r0-n2", "node-z0-r1-n0"}
	for i, node := range busy {
		p := pinnedFiller(fmt.Sprintf("low-%d", i), node, "4")
		p.Spec.PriorityClassName = "low"
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	waitBound(t, c, ns, "low-", 4)
	highGang(t, c, ns, "job", 3, "4", func(pg *v1alpha1.PodGroup) {
		pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(sandbox.RackLabel)}
	})
	waitBound(t, c, ns, "job-", 3)
	assert.Equal(t, []string{"low-0", "low-1", "low-2"}, podNames(t, c, ns, "low-"), "only the rack-1 pod was evicted")
	assert.Equal(t, map[string]int{"zone-0-rack-1": 3}, domainsOf(t, c, ns, "job-", sandbox.RackLabel))
}

// TestWorkloadPreemptionShapes runs upstream scheduler_perf's
// workload_preemption shapes at small scale and reports the victim counts:
// GangPreemptionBasic (plain low-priority pods fill the cluster) and
// GangPreemptionPodGroups (low-priority gangs fill it, evicted pod by pod
// in single mode, as whole gangs in all mode).
func TestWorkloadPreemptionShapes(t *testing.T) {
	cases := []struct {
		name        string
		victimGangs bool
		all         bool
		wantEvicted int
	}{
		{name: "GangPreemptionBasic evicts exactly the 4 pods the gang needs", wantEvicted: 4},
		{name: "GangPreemptionPodGroups in single mode evicts 4 pods", victimGangs: true, wantEvicted: 4},
		{name: "GangPreemptionPodGroups in all mode evicts 2 whole gangs of 2", victimGangs: true, all: true, wantEvicted: 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := preemptionCluster(t, &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 8, CPU: "4", Memory: "32Gi", Pods: 110})
			ns := namespace(t, c)
			for g := 0; g < 4; g++ {
				var labels map[string]string
				if tc.victimGangs {
					pg := gangPG(fmt.Sprintf("low%d", g), 2)
					pg.Spec.PriorityClassName = "low"
					if tc.all {
						pg.Spec.DisruptionMode = &v1alpha1.DisruptionMode{All: &v1alpha1.AllDisruptionMode{}}
					}
					createPodGroup(t, c, ns, pg)
					labels = inGroup(pg.Name)
				}
				for i := 0; i < 2; i++ {
					createPods(t, c, ns, member{name: fmt.Sprintf("victim-%d-%d", g, i), labels: labels, cpu: "4", priorityClass: "low"})
				}
			}
			waitBound(t, c, ns, "victim-", 8)
			highGang(t, c, ns, "job", 4, "4", nil)
			waitBound(t, c, ns, "job-", 4)
			evicted := 8 - len(podNames(t, c, ns, "victim-"))
			t.Logf("%s: %d victims evicted", tc.name, evicted)
			assert.Equal(t, tc.wantEvicted, evicted)
			if tc.all {
				// Whole gangs only: every surviving gang still has both pods.
				per := map[string]int{}
				for _, n := range podNames(t, c, ns, "victim-") {
					per[n[:len("victim-0")]]++
				}
				for g, n := range per {
					assert.Equal(t, 2, n, "gang %s was split", g)
				}
			}
		})
	}
}

// TestLabelsAfterBindingShieldNoPod is a tenant squatting on a node: seven
// priority-0 pods and one of priority 1000 run, and are then labelled into
// a basic PodGroup of priority 1000 with disruptionMode all. Another
// tenant's plain pod of priority 1000 needing 3 cpu must still be placed,
// evicting only the low pods it needs, never the pod of priority 1000.
func TestLabelsAfterBindingShieldNoPod(t *testing.T) {
	c := preemptionCluster(t, &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 1, CPU: "16", Memory: "64Gi", Pods: 110})
	ctx := context.Background()
	tenantA, tenantB := namespace(t, c), namespace(t, c)
	for i := range 7 {
		createPods(t, c, tenantA, member{name: fmt.Sprintf("low-%d", i), cpu: "2"})
	}
	createPods(t, c, tenantA, member{name: "high", cpu: "2", priorityClass: "high"})
	waitBound(t, c, tenantA, "", 8)

	crew := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "crew"}}
	crew.Spec.SchedulingPolicy.Basic = &v1alpha1.BasicSchedulingPolicy{}
	crew.Spec.Priority = ptr.To[int32](1000)
	crew.Spec.DisruptionMode = &v1alpha1.DisruptionMode{All: &v1alpha1.AllDisruptionMode{}}
	createPodGroup(t, c, tenantA, crew)
	patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:"crew"}}}`, v1alpha1.PodGroupLabel))
	for _, name := range podNames(t, c, tenantA, "") {
		_, err := c.Client.CoreV1().Pods(tenantA).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err, "label %s into crew", name)
	}

	createPods(t, c, tenantB, member{name: "b-0", cpu: "3", priorityClass: "high"})
	waitBound(t, c, tenantB, "b-", 1)
	left := podNames(t, c, tenantA, "low-")
	assert.GreaterOrEqual(t, len(left), 5, "at most the two low pods 3 cpu needs are evicted: %v remain", left)
	assert.Equal(t, []string{"high"}, podNames(t, c, tenantA, "high"), "the pod of the group's priority is not evicted")
}

// victimGraceSeconds is the terminationGracePeriodSeconds of the victims
// of TestVictimsThatIgnoreSIGTERMAreEvictedOnce, which they run out in full.
const victimGraceSeconds = 20

// TestVictimsThatIgnoreSIGTERMAreEvictedOnce: a gang's victims ignore
// SIGTERM and stay Terminating for their whole grace period. Meanwhile a
// search would find no candidate in them yet count their room as used, so
// the gang must wait for them rather than evict the other low pods too, and
// must keep the freed room against a low pod replacing a victim. It binds
// once they are gone, and only the first two pods were ever evicted.
func TestVictimsThatIgnoreSIGTERMAreEvictedOnce(t *testing.T) {
	c := preemptionCluster(t, &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 4, CPU: "4", Memory: "32Gi", Pods: 110})
	ctx := context.Background()
	ns := namespace(t, c)
	for i := 0; i < 4; i++ {
		p := member{name: fmt.Sprintf("low-%d", i), cpu: "4", priorityClass: "low"}.pod()
		p.Annotations = map[string]string{sandbox.IgnoreSIGTERMAnnotation: "true"}
		p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](victimGraceSeconds)
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	waitBound(t, c, ns, "low-", 4)
	highGang(t, c, ns, "job", 2, "4", nil)

	// evicted are the low pods seen terminating or gone, and ends when each
	// one's grace period ends by its deletionTimestamp.
	evicted := map[string]bool{}
	ends := map[string]time.Time{}
	replaced := false
	// explained is the gang's Schedulable=False message seen while it
	// waited for its victims.
	explained := ""
	eventually(t, (victimGraceSeconds+90)*time.Second, "the gang bound after its victims are gone", func() (bool, error) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running, present, bound := map[string]bool{}, map[string]bool{}, 0
		for _, p := range pods.Items {
			present[p.Name] = true
			switch {
			case strings.HasPrefix(p.Name, "low-") && p.DeletionTimestamp != nil:
				evicted[p.Name] = true
				ends[p.Name] = p.DeletionTimestamp.Time
			case strings.HasPrefix(p.Name, "low-"):
				running[p.Name] = true
			case strings.HasPrefix(p.Name, "job-") && p.Spec.NodeName != "":
				bound++
			}
		}
		for i := 0; i < 4; i++ {
			name := fmt.Sprintf("low-%d", i)
			if !running[name] && !evicted[name] {
				evicted[name] = true
				require.Contains(t, ends, name, "%s went away without being seen terminating", name)
				assert.False(t, time.Now().Before(ends[name]), "%s went away before its grace period ended", name)
			}
		}
		require.LessOrEqual(t, len(evicted), 2, "only the first two victims are evicted: %v", evicted)
		if len(evicted) == 2 && !replaced {
			// A Job would replace its evicted pod with one of the same
			// priority, which must not take the room freed for the gang.
			createPods(t, c, ns, member{name: "replacement", cpu: "4", priorityClass: "low"})
			replaced = true
		}
		if bound < 2 {
			if cond := groupCondition(t, c, ns, "job", v1alpha1.PodGroupSchedulable); cond != nil && cond.Status == metav1.ConditionFalse &&
				strings.Contains(cond.Message, "preempt") && len(evicted) > 0 {
				explained = cond.Message
			}
			return false, nil
		}
		for name := range evicted {
			assert.False(t, present[name], "the gang bound while victim %s still terminated", name)
		}
		return true, nil
	})
	assert.Len(t, podNames(t, c, ns, "low-"), 2)
	assert.NotEmpty(t, explained, "the gang's PodGroup said it waited for its victims")
	assert.Zero(t, boundWithPrefix(t, c, ns, "replacement"), "the replacement did not take the gang's room")
	events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=Preempted"})
	require.NoError(t, err)
	var preempted []string
	for _, e := range events.Items {
		preempted = append(preempted, e.InvolvedObject.Name)
	}
	assert.LessOrEqual(t, len(preempted), 2, "Preempted events: %v", preempted)
}

// TestNoEvictionForAMemberNoNodeCanTake: a gang whose members each need a
// node of their own (required anti-affinity among them) lost one member
// with its node, and the two nodes left each hold a sibling and are full on
// pod count. Evicting the pod beside a sibling makes room by count, but the
// sibling still refuses the member, so no eviction can make the gang whole:
// the low-priority pods keep running and the member holds no node. The
// probe used to stop at the pod-count refusal, which the planner models,
// and so never saw the anti-affinity behind it.
func TestNoEvictionForAMemberNoNodeCanTake(t *testing.T) {
	c := preemptionCluster(t, &sandbox.Topology{Zones: 1, RacksPerZone: 1, NodesPerRack: 3, CPU: "4", Memory: "32Gi", Pods: 2})
	ctx := context.Background()
	ns := namespace(t, c)
	pg := gangPG("k", 3)
	pg.Spec.PriorityClassName = "high"
	createPodGroup(t, c, ns, pg)
	memberPod := func(i int) *corev1.Pod {
		p := member{name: fmt.Sprintf("k-%d", i), labels: inGroup("k"), cpu: "1", priorityClass: "high"}.pod()
		antiAffinity(sandbox.HostnameLabel, inGroup("k"))(p)
		return p
	}
	for i := 0; i < 3; i++ {
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, memberPod(i), metav1.CreateOptions{})
		require.NoError(t, err)
	}
	waitBound(t, c, ns, "k-", 3)

	lost, err := c.Client.CoreV1().Pods(ns).Get(ctx, "k-2", metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, c.Client.CoreV1().Nodes().Delete(ctx, lost.Spec.NodeName, metav1.DeleteOptions{}))
	require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(ctx, "k-2", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	eventually(t, 30*time.Second, "k-2 gone", func() (bool, error) {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, "k-2", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// One low pod beside each sibling fills its node's pod count.
	lowNS := namespace(t, c)
	createPods(t, c, lowNS, member{name: "low-0", cpu: "1", priorityClass: "low"}, member{name: "low-1", cpu: "1", priorityClass: "low"})
	waitBound(t, c, lowNS, "low-", 2)

	_, err = c.Client.CoreV1().Pods(ns).Create(ctx, memberPod(2), metav1.CreateOptions{})
	require.NoError(t, err)
	msg := failedSchedulingFor(t, c, ns, "k-2")
	assert.Contains(t, msg, "InterPodAffinity", "the member is told the siblings' nodes refuse it")
	consistently(t, 4*time.Second, "both low pods keep running", func() bool {
		return len(podNames(t, c, lowNS, "low-")) == 2 && boundWithPrefix(t, c, lowNS, "low-") == 2
	})
	p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "k-2", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Empty(t, p.Status.NominatedNodeName, "k-2 holds no node")
}
