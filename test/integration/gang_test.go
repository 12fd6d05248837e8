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
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/config"
	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// member describes a pod of a test gang.
type member struct {
	name          string
	labels        map[string]string
	cpu           string
	gpus          int
	priorityClass string
	gated         bool
}

func (m member) pod() *corev1.Pod {
	req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(m.cpu)}
	lim := corev1.ResourceList{}
	if m.gpus > 0 {
		q := *resource.NewQuantity(int64(m.gpus), resource.DecimalSI)
		req[sandbox.GPUResource] = q
		lim[sandbox.GPUResource] = q
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: m.name, Labels: m.labels},
		Spec: corev1.PodSpec{
			SchedulerName:     "phalanx-scheduler",
			PriorityClassName: m.priorityClass,
			Containers: []corev1.Container{{
				Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: req, Limits: lim},
			}},
		},
	}
	if m.gated {
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
	}
	return p
}

func inGroup(name string) map[string]string {
	return map[string]string{v1alpha1.PodGroupLabel: name}
}

func createPods(t *testing.T, c *sandbox.Cluster, ns string, members ...member) {
	t.Helper()
	for _, m := range members {
		_, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), m.pod(), metav1.CreateOptions{})
		require.NoError(t, err, "create pod %s", m.name)
	}
}

func createPodGroup(t *testing.T, c *sandbox.Cluster, ns string, pg *v1alpha1.PodGroup) {
	t.Helper()
	_, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Create(context.Background(), pg, metav1.CreateOptions{})
	require.NoError(t, err)
}

func addNodes(t *testing.T, c *sandbox.Cluster, prefix string, n int, cpu string, gpus int) {
	t.Helper()
	var nodes []*corev1.Node
	for i := 0; i < n; i++ {
		capacity := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpu),
			corev1.ResourceMemory: resource.MustParse("64Gi"),
			corev1.ResourcePods:   resource.MustParse("110"),
		}
		if gpus > 0 {
			capacity[sandbox.GPUResource] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
		}
		name := fmt.Sprintf("%s-%d", prefix, i)
		nodes = append(nodes, sandbox.NewNode(name, map[string]string{sandbox.HostnameLabel: name}, capacity))
	}
	require.NoError(t, sandbox.CreateNodes(context.Background(), c.Client, nodes))
}

// boundWithPrefix counts bound pods of ns whose name starts with prefix.
func boundWithPrefix(t *testing.T, c *sandbox.Cluster, ns, prefix string) int {
	n := 0
	for name := range boundPods(t, c, ns) {
		if strings.HasPrefix(name, prefix) {
			n++
		}
	}
	return n
}

// consistently fails the test if cond turns false within d.
func consistently(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		require.True(t, cond(), "expected %s to hold for %v", what, d)
		time.Sleep(100 * time.Millisecond)
	}
}

// failedSchedulingFor waits for a FailedScheduling event on pod and returns its note.
func failedSchedulingFor(t *testing.T, c *sandbox.Cluster, ns, pod string) string {
	t.Helper()
	var note string
	eventually(t, 30*time.Second, "FailedScheduling event for "+pod, func() (bool, error) {
		evs, err := c.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "regarding.name=" + pod})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "FailedScheduling" {
				note = e.Note
				return true, nil
			}
		}
		return false, nil
	})
	return note
}

func groupCondition(t *testing.T, c *sandbox.Cluster, ns, name, typ string) *metav1.Condition {
	pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return meta.FindStatusCondition(pg.Status.Conditions, typ)
}

func waitGroupCondition(t *testing.T, c *sandbox.Cluster, ns, name, typ, substring string) *metav1.Condition {
	t.Helper()
	var got *metav1.Condition
	eventually(t, 30*time.Second, fmt.Sprintf("condition %s of %s containing %q", typ, name, substring), func() (bool, error) {
		got = groupCondition(t, c, ns, name, typ)
		return got != nil && strings.Contains(got.Message, substring), nil
	})
	return got
}

// TestTFJobDemo is the TFJob demo of the coscheduling and gang-scheduling article: a label-pair gang of 1 PS and 4
// two-GPU workers on 2 nodes with 2 GPUs each binds nothing; adding 2 more
// such nodes binds all 5 promptly.
func TestTFJobDemo(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	addNodes(t, c, "gpu", 2, "8", 2)
	ns := namespace(t, c)
	labels := map[string]string{v1alpha1.LightweightNameLabel: "tfjob", v1alpha1.LightweightMinAvailableLabel: "5"}
	members := []member{{name: "tfjob-ps-0", labels: labels, cpu: "1"}}
	for i := 0; i < 4; i++ {
		members = append(members, member{name: fmt.Sprintf("tfjob-worker-%d", i), labels: labels, cpu: "1", gpus: 2})
	}
	createPods(t, c, ns, members...)

	note := ""
	eventually(t, 30*time.Second, "a worker reported why it cannot be placed", func() (bool, error) {
		evs, err := c.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "FailedScheduling" && strings.Contains(e.Note, "nvidia.com/gpu") {
				note = e.Note
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("why the gang waits: %s", note)
	consistently(t, 3*time.Second, "no TFJob pod bound", func() bool { return len(boundPods(t, c, ns)) == 0 })

	start := time.Now()
	addNodes(t, c, "gpu-extra", 2, "8", 2)
	eventually(t, 30*time.Second, "all 5 TFJob pods bound", func() (bool, error) {
		return len(boundPods(t, c, ns)) == 5, nil
	})
	t.Logf("all 5 bound %v after the nodes were added", time.Since(start).Round(time.Millisecond))
}

// TestTwoFullClusterGangsNeverDeadlock is the deadlock of OpenAI's 7,500-node write-up: two gangs
// that each need the whole cluster, created interleaved pod by pod. One is
// fully bound and the other fully pending, in every one of 10 runs; deleting
// the winner lets the other bind.
func TestTwoFullClusterGangsNeverDeadlock(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, NodeAgent: true})
	addNodes(t, c, "n", 4, "4", 0)
	ctx := context.Background()
	for run := 0; run < 10; run++ {
		ns := namespace(t, c)
		createPodGroup(t, c, ns, gangPG("a", 4))
		createPodGroup(t, c, ns, gangPG("b", 4))
		for i := 0; i < 4; i++ {
			createPods(t, c, ns,
				member{name: fmt.Sprintf("a-%d", i), labels: inGroup("a"), cpu: "4"},
				member{name: fmt.Sprintf("b-%d", i), labels: inGroup("b"), cpu: "4"})
		}
		var winner, loser string
		eventually(t, 30*time.Second, "one gang fully bound", func() (bool, error) {
			a, b := boundWithPrefix(t, c, ns, "a-"), boundWithPrefix(t, c, ns, "b-")
			switch {
			case a == 4:
				winner, loser = "a", "b"
			case b == 4:
				winner, loser = "b", "a"
			}
			return winner != "", nil
		})
		consistently(t, 2*time.Second, fmt.Sprintf("run %d: gang %s stays fully pending", run, loser), func() bool {
			return boundWithPrefix(t, c, ns, loser+"-") == 0 && boundWithPrefix(t, c, ns, winner+"-") == 4
		})
		if run == 0 {
			// The winner leaves; the waiting gang takes the cluster.
			for i := 0; i < 4; i++ {
				require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("%s-%d", winner, i), metav1.DeleteOptions{}))
			}
			eventually(t, 30*time.Second, "the second gang fully bound after the first left", func() (bool, error) {
				return boundWithPrefix(t, c, ns, loser+"-") == 4, nil
			})
		}
		require.NoError(t, c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
		require.NoError(t, c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}))
		eventually(t, 30*time.Second, "the cluster is empty again", func() (bool, error) {
			pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(pods.Items) == 0, err
		})
	}
}

func composite(name string, minGroupCount int32) *v1alpha1.CompositePodGroup {
	cpg := &v1alpha1.CompositePodGroup{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if minGroupCount > 0 {
		cpg.Spec.SchedulingPolicy.Gang = &v1alpha1.CompositeGangSchedulingPolicy{MinGroupCount: minGroupCount}
	} else {
		cpg.Spec.SchedulingPolicy.Basic = &v1alpha1.CompositeBasicSchedulingPolicy{}
	}
	return cpg
}

// TestGangOfGangs is the CompositePodGroup of the Kubernetes Workload API documentation: with minGroupCount 2
// over two gangs of 4, room for 4 binds nothing and room for 8 binds all;
// under a basic root each child binds on its own.
func TestGangOfGangs(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	addNodes(t, c, "first", 4, "4", 0)
	ctx := context.Background()

	setup := func(ns string, minGroupCount int32) {
		_, err := c.Phalanx.SchedulingV1alpha1().CompositePodGroups(ns).Create(ctx, composite("experiment", minGroupCount), metav1.CreateOptions{})
		require.NoError(t, err)
		for _, child := range []string{"workers-a", "workers-b"} {
			pg := gangPG(child, 4)
			pg.Spec.ParentCompositePodGroupName = ptr.To("experiment")
			createPodGroup(t, c, ns, pg)
			for i := 0; i < 4; i++ {
				createPods(t, c, ns, member{name: fmt.Sprintf("%s-%d", child, i), labels: inGroup(child), cpu: "4"})
			}
		}
	}

	t.Run("a gang root binds nothing when only one child fits, and all 8 when both do", func(t *testing.T) {
		ns := namespace(t, c)
		setup(ns, 2)
		failedSchedulingFor(t, c, ns, "workers-b-0")
		consistently(t, 3*time.Second, "no member bound", func() bool { return len(boundPods(t, c, ns)) == 0 })
		addNodes(t, c, "second", 4, "4", 0)
		eventually(t, 30*time.Second, "all 8 bound", func() (bool, error) { return len(boundPods(t, c, ns)) == 8, nil })
		require.NoError(t, c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}))
		eventually(t, 30*time.Second, "pods gone", func() (bool, error) {
			pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			return err == nil && len(pods.Items) == 0, err
		})
	})

	t.Run("a basic root lets each child gang bind on its own", func(t *testing.T) {
		// 8 slots in the cluster; fill 4 so only one child of 4 fits.
		filler := namespace(t, c)
		for i := 0; i < 4; i++ {
			createPods(t, c, filler, member{name: fmt.Sprintf("filler-%d", i), cpu: "4"})
		}
		eventually(t, 30*time.Second, "fillers bound", func() (bool, error) { return len(boundPods(t, c, filler)) == 4, nil })
		ns := namespace(t, c)
		setup(ns, 0)
		eventually(t, 30*time.Second, "one child gang of 4 bound", func() (bool, error) {
			a, b := boundWithPrefix(t, c, ns, "workers-a-"), boundWithPrefix(t, c, ns, "workers-b-")
			return (a == 4 && b == 0) || (a == 0 && b == 4), nil
		})
	})
}

// TestBasicCompositeChildThatDoesNotFitDoesNotHoldBackItsSibling: a
// rack-constrained basic composite, created after its children and their
// pods, with child gang "a" (min 1 of 2 pods of 3 cpu and 4Gi, sorting
// first) and child gang "b" (2 of 3 cpu and 1Gi). Rack 0 (two 4-cpu, 2Gi
// nodes) holds b whole; rack 1 (one 4-cpu, 8Gi node) holds one pod. The
// plan takes rack 0 for b, and a has no room there. Each child is its own
// gang, so b binds and a waits. A member of a failing in PostFilter must
// not release b's members waiting in Permit: if it did, b's first waiting
// member would pull a forward again, and the two would go round without
// pause (hundreds of attempts a second, starving every other pod) until b
// bound by chance.
func TestBasicCompositeChildThatDoesNotFitDoesNotHoldBackItsSibling(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	ctx := context.Background()
	var nodes []*corev1.Node
	for i, mem := range []string{"2Gi", "2Gi", "8Gi"} {
		name, rack := fmt.Sprintf("n%d", i), fmt.Sprintf("rack-%d", i/2)
		nodes = append(nodes, sandbox.NewNode(name, map[string]string{sandbox.HostnameLabel: name, sandbox.RackLabel: rack}, corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse("110"),
		}))
	}
	require.NoError(t, sandbox.CreateNodes(ctx, c.Client, nodes))
	ns := namespace(t, c)
	for _, child := range []struct {
		name, mem string
		min       int32
	}{{"a", "4Gi", 1}, {"b", "1Gi", 2}} {
		pg := gangPG(child.name, child.min)
		pg.Spec.ParentCompositePodGroupName = ptr.To("job")
		createPodGroup(t, c, ns, pg)
		for i := 0; i < 2; i++ {
			p := member{name: fmt.Sprintf("%s-%d", child.name, i), labels: inGroup(child.name), cpu: "3"}.pod()
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse(child.mem)
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	before := scheduleAttempts(t)
	root := composite("job", 0)
	root.Spec.SchedulingConstraints = &v1alpha1.CompositePodGroupSchedulingConstraints{Topology: topo(sandbox.RackLabel)}
	_, err := c.Phalanx.SchedulingV1alpha1().CompositePodGroups(ns).Create(ctx, root, metav1.CreateOptions{})
	require.NoError(t, err)

	eventually(t, 30*time.Second, "child b bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "b-") == 2, nil })
	assert.Zero(t, boundWithPrefix(t, c, ns, "a-"), "a has no room in b's rack")
	time.Sleep(2 * time.Second)
	attempts := scheduleAttempts(t) - before
	t.Logf("%v scheduling attempts", attempts)
	assert.Less(t, attempts, 40.0, "the children took turns instead of b binding")
}

// TestMemberLeftOutOfThePlanDoesNotRestartTheGang: a gang composite
// (minGroupCount 2), created after its children and their pods, over gang
// "a" (min 1 of 3 pods) and gang "b" (1 pod), every pod 3 cpu, on two
// 4-cpu nodes. The plan places one member of a and b's member; the other
// members of a have no room and are not needed. Its failure must not release
// the members waiting for the plan's quorum: if it did, the first of them
// would pull it forward again, and the composite would go round without
// pause.
func TestMemberLeftOutOfThePlanDoesNotRestartTheGang(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	addNodes(t, c, "n", 2, "4", 0)
	ctx := context.Background()
	ns := namespace(t, c)
	for _, child := range []struct {
		name string
		size int
	}{{"a", 3}, {"b", 1}} {
		pg := gangPG(child.name, 1)
		pg.Spec.ParentCompositePodGroupName = ptr.To("job")
		createPodGroup(t, c, ns, pg)
		for i := 0; i < child.size; i++ {
			createPods(t, c, ns, member{name: fmt.Sprintf("%s-%d", child.name, i), labels: inGroup(child.name), cpu: "3"})
		}
	}
	before := scheduleAttempts(t)
	_, err := c.Phalanx.SchedulingV1alpha1().CompositePodGroups(ns).Create(ctx, composite("job", 2), metav1.CreateOptions{})
	require.NoError(t, err)

	eventually(t, 30*time.Second, "one member of a and b bound", func() (bool, error) {
		return boundWithPrefix(t, c, ns, "a-") == 1 && boundWithPrefix(t, c, ns, "b-") == 1, nil
	})
	time.Sleep(2 * time.Second)
	attempts := scheduleAttempts(t) - before
	t.Logf("%v scheduling attempts", attempts)
	assert.Less(t, attempts, 40.0, "the left-out member made the gang start over and over")
}

// TestBasicPolicyPlacesWhatFits: a basic group is best effort.
func TestBasicPolicyPlacesWhatFits(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	addNodes(t, c, "n", 4, "4", 0)
	ns := namespace(t, c)
	createPodGroup(t, c, ns, &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "best-effort"},
		Spec: v1alpha1.PodGroupSpec{SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Basic: &v1alpha1.BasicSchedulingPolicy{}}}})
	for i := 0; i < 6; i++ {
		createPods(t, c, ns, member{name: fmt.Sprintf("be-%d", i), labels: inGroup("best-effort"), cpu: "4"})
	}
	eventually(t, 30*time.Second, "4 of 6 bound", func() (bool, error) { return len(boundPods(t, c, ns)) == 4, nil })
	consistently(t, 2*time.Second, "exactly 4 bound", func() bool { return len(boundPods(t, c, ns)) == 4 })
}

// TestPermitTimeoutReleasesEverything: members that wait for a sibling that
// never comes are all released after the Permit timeout, and the capacity
// they held goes to the next pod.
func TestPermitTimeoutReleasesEverything(t *testing.T) {
	// Long enough that the plain pod below is tried while the gang still
	// holds the nodes, even on a loaded machine: the WaitingForGang event
	// comes a tenth of the timeout into the wait.
	cfg := strings.Replace(string(config.SecondScheduler), "permitWaitingTimeSeconds: 60", "permitWaitingTimeSeconds: 6", 1)
	require.Contains(t, cfg, "permitWaitingTimeSeconds: 6")
	c := startCluster(t, sandbox.Options{Scheduler: true, SchedulerConfig: []byte(cfg)})
	addNodes(t, c, "n", 4, "4", 0)
	ns := namespace(t, c)
	createPodGroup(t, c, ns, gangPG("g", 4))
	// The 4th member exists (quorum of pods is present) but is held by a
	// scheduling gate: the planner places all 4 (nominating the 4th's node),
	// the other 3 reserve their nodes and wait for it in Permit. It is
	// created first: the queue files a gated pod with the nomination its
	// status carries (none), so had it arrived after the plan, it would have
	// dropped the plan's nomination and the plain pod below would have
	// taken its node.
	createPods(t, c, ns, member{name: "g-3", labels: inGroup("g"), cpu: "4", gated: true})
	for i := 0; i < 3; i++ {
		createPods(t, c, ns, member{name: fmt.Sprintf("g-%d", i), labels: inGroup("g"), cpu: "4"})
	}

	// While they wait, a plain pod finds no room.
	eventually(t, 30*time.Second, "the gang waiting in Permit", func() (bool, error) {
		evs, err := c.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return hasReason(evs.Items, "WaitingForGang"), nil
	})
	createPods(t, c, ns, member{name: "later", cpu: "4"})
	failedSchedulingFor(t, c, ns, "later")
	// After the timeout the reservations are gone and the plain pod binds.
	eventually(t, 60*time.Second, "the later pod bound after the gang timed out", func() (bool, error) {
		_, ok := boundPods(t, c, ns)["later"]
		return ok, nil
	})
	assert.Equal(t, 0, boundWithPrefix(t, c, ns, "g-"), "no gang member is bound")
	note := failedSchedulingFor(t, c, ns, "g-0")
	t.Logf("gang member event: %s", note)
}

// TestMismatchedMembersAreRejectedAsAGroup checks the exact messages the user guide documents.
func TestMismatchedMembersAreRejectedAsAGroup(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	addNodes(t, c, "n", 4, "8", 0)
	createPriorityClasses(t, c, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "high"}, Value: 1000})

	t.Run("a pod whose priority differs from the group's keeps the whole group pending", func(t *testing.T) {
		ns := namespace(t, c)
		pg := gangPG("prio", 2)
		pg.Spec.PriorityClassName = "high"
		createPodGroup(t, c, ns, pg)
		createPods(t, c, ns,
			member{name: "prio-0", labels: inGroup("prio"), cpu: "1", priorityClass: "high"},
			member{name: "prio-1", labels: inGroup("prio"), cpu: "1"})
		cond := waitGroupCondition(t, c, ns, "prio", v1alpha1.PodGroupSchedulable, gangcore.MsgPriorityMismatch)
		assert.Equal(t, v1alpha1.ReasonInvalid, cond.Reason)
		consistently(t, 2*time.Second, "no member bound", func() bool { return len(boundPods(t, c, ns)) == 0 })
	})

	t.Run("a pod whose preemption policy differs from the group's keeps the whole group pending", func(t *testing.T) {
		ns := namespace(t, c)
		pg := gangPG("policy", 2)
		pg.Spec.PreemptionPolicy = ptr.To(v1alpha1.PreemptNever)
		createPodGroup(t, c, ns, pg)
		createPods(t, c, ns,
			member{name: "policy-0", labels: inGroup("policy"), cpu: "1"},
			member{name: "policy-1", labels: inGroup("policy"), cpu: "1"})
		waitGroupCondition(t, c, ns, "policy", v1alpha1.PodGroupSchedulable, gangcore.MsgPolicyMismatchWithGroup)
		consistently(t, 2*time.Second, "no member bound", func() bool { return len(boundPods(t, c, ns)) == 0 })
	})

	t.Run("a group naming a missing PriorityClass says so", func(t *testing.T) {
		ns := namespace(t, c)
		pg := gangPG("typo", 1)
		pg.Spec.PriorityClassName = "hihg"
		createPodGroup(t, c, ns, pg)
		createPods(t, c, ns, member{name: "typo-0", labels: inGroup("typo"), cpu: "1"})
		waitGroupCondition(t, c, ns, "typo", v1alpha1.PodGroupSchedulable, `PriorityClass "hihg"`)
		assert.Empty(t, boundPods(t, c, ns))
	})
}

// TestMissingGroupHoldsOnlyItsPods: a pod pointing at a PodGroup that does
// not exist waits with a reason, others keep scheduling, and creating the
// group releases it.
func TestMissingGroupHoldsOnlyItsPods(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	addNodes(t, c, "n", 2, "8", 0)
	ctx := context.Background()
	ns := namespace(t, c)
	createPods(t, c, ns, member{name: "orphan", labels: inGroup("not-yet"), cpu: "1"})
	eventually(t, 30*time.Second, "an event explaining the missing group", func() (bool, error) {
		evs, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=orphan"})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Note, "PodGroup "+ns+"/not-yet not found") {
				return true, nil
			}
		}
		return false, nil
	})
	createPods(t, c, ns, member{name: "plain", cpu: "1"})
	eventually(t, 30*time.Second, "the plain pod bound", func() (bool, error) {
		_, ok := boundPods(t, c, ns)["plain"]
		return ok, nil
	})
	assert.NotContains(t, boundPods(t, c, ns), "orphan")

	createPodGroup(t, c, ns, gangPG("not-yet", 1))
	eventually(t, 30*time.Second, "the orphan bound once its group exists", func() (bool, error) {
		_, ok := boundPods(t, c, ns)["orphan"]
		return ok, nil
	})
	waitGroupCondition(t, c, ns, "not-yet", v1alpha1.PodGroupInitiallyScheduled, "bound")
}

// TestBurstOfGangsAtScale: 20 gangs of 50 created in one burst on 500 nodes
// all bind, and no gang is seen partially bound for more than a moment
// (binding after Permit is parallel).
func TestBurstOfGangsAtScale(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, Topology: &sandbox.Topology{
		Zones: 1, RacksPerZone: 5, NodesPerRack: 100, CPU: "4", Memory: "32Gi", Pods: 110}})
	ctx := context.Background()
	ns := namespace(t, c)
	const gangs, size = 20, 50
	for g := 0; g < gangs; g++ {
		createPodGroup(t, c, ns, gangPG(fmt.Sprintf("g%02d", g), size))
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, gangs*size)
	for g := 0; g < gangs; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < size; i++ {
				m := member{name: fmt.Sprintf("g%02d-%02d", g, i), labels: inGroup(fmt.Sprintf("g%02d", g)), cpu: "1"}
				if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, m.pod(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					errs <- err
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	partialSince := map[string]time.Time{}
	longestPartial := time.Duration(0)
	eventually(t, 3*time.Minute, "all 1000 pods bound", func() (bool, error) {
		perGang := map[string]int{}
		for name := range boundPods(t, c, ns) {
			perGang[name[:3]]++
		}
		now := time.Now()
		total := 0
		for g := 0; g < gangs; g++ {
			key := fmt.Sprintf("g%02d", g)
			n := perGang[key]
			total += n
			if n > 0 && n < size {
				if _, ok := partialSince[key]; !ok {
					partialSince[key] = now
				}
				if d := now.Sub(partialSince[key]); d > longestPartial {
					longestPartial = d
				}
			} else {
				delete(partialSince, key)
			}
		}
		return total == gangs*size, nil
	})
	t.Logf("20 gangs × 50 pods bound on 500 nodes in %v; longest partial view of a gang %v",
		time.Since(start).Round(time.Millisecond), longestPartial.Round(time.Millisecond))
	assert.Less(t, longestPartial, 5*time.Second, "a gang looked partially bound for too long")
}
