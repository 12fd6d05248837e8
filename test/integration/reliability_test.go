package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// TestSchedulerCrashWhileMembersWaitInPermit: reservations live only in the
// scheduler's memory, so a crash while members wait leaves nothing bound,
// and a new scheduler completes the gang.
func TestSchedulerCrashWhileMembersWaitInPermit(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	addNodes(t, c, "n", 4, "4", 0)
	ctx := context.Background()
	ns := namespace(t, c)
	createPodGroup(t, c, ns, gangPG("g", 4))
	for i := 0; i < 3; i++ {
		createPods(t, c, ns, member{name: fmt.Sprintf("g-%d", i), labels: inGroup("g"), cpu: "4"})
	}
	createPods(t, c, ns, member{name: "g-3", labels: inGroup("g"), cpu: "4", gated: true})
	eventually(t, 30*time.Second, "members waiting in Permit", func() (bool, error) {
		evs, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
		return err == nil && hasReason(evs.Items, "WaitingForGang"), err
	})

	c.StopScheduler()
	assert.Empty(t, boundPods(t, c, ns), "nothing is bound after the crash")

	_, err := c.StartScheduler(ctx)
	require.NoError(t, err)
	// Release the last member: the new scheduler places the whole gang.
	_, err = c.Client.CoreV1().Pods(ns).Patch(ctx, "g-3", types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`), metav1.PatchOptions{})
	require.NoError(t, err)
	eventually(t, 60*time.Second, "the gang completes under the new scheduler", func() (bool, error) {
		return boundWithPrefix(t, c, ns, "g-") == 4, nil
	})
}

// TestSchedulerCrashWhileAMemberBinds: the API server refuses to bind one
// member of a rack-constrained gang, so the other members are bound and the
// last one is retrying its bind when the scheduler crashes. Bindings are the
// only state a scheduler leaves behind. The outcome: the bound members stay
// where they are (a scheduler never unbinds), the new scheduler counts them
// toward the gang and keeps the last member pending, with the refusal as
// its reason, while the refusal lasts; once binding works it binds that
// member in the gang's rack, although the planner's BestFit would put a
// lone pod in the other, fuller rack.
func TestSchedulerCrashWhileAMemberBinds(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	ctx := context.Background()
	rackNodes(t, c, "n", 2, 2, "4", nil)
	ns := namespace(t, c)
	// Rack 1 keeps 2 cpu free: too little for the gang (6 cpu), the best fit
	// for one more 2-cpu member.
	createPinned(t, c, ns, "fill-0", "n-r1-n0", "4")
	createPinned(t, c, ns, "fill-1", "n-r1-n1", "2")
	lift := refuseBinding(t, c, "g-2")

	pg := gangPG("g", 3)
	pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(sandbox.RackLabel)}
	createPodGroup(t, c, ns, pg)
	for i := 0; i < 3; i++ {
		createPods(t, c, ns, member{name: fmt.Sprintf("g-%d", i), labels: inGroup("g"), cpu: "2"})
	}
	waitBound(t, c, ns, "g-", 2)
	assert.Contains(t, failedSchedulingFor(t, c, ns, "g-2"), "refused by test policy", "the member's event names the bind failure")
	before := boundPods(t, c, ns)
	require.NotContains(t, before, "g-2")
	require.Equal(t, map[string]int{"n-rack-0": 2}, domainsOf(t, c, ns, "g-", sandbox.RackLabel))

	c.StopScheduler()
	assert.Equal(t, before, boundPods(t, c, ns), "the crash unbinds nothing and binds nothing")

	restarted := time.Now()
	_, err := c.StartScheduler(ctx)
	require.NoError(t, err)
	eventually(t, 60*time.Second, "the new scheduler reports the refused bind of g-2", func() (bool, error) {
		return eventSince(t, c, ns, "g-2", "FailedScheduling", "refused by test policy", restarted), nil
	})
	assert.Equal(t, before, boundPods(t, c, ns), "while binding is refused the bound members stay and nothing else binds")

	lift()
	waitBound(t, c, ns, "g-", 3)
	assert.Equal(t, map[string]int{"n-rack-0": 3}, domainsOf(t, c, ns, "g-", sandbox.RackLabel), "the last member joined the gang's rack")
	for name, node := range before {
		assert.Equal(t, node, boundPods(t, c, ns)[name], "%s stayed on its node", name)
	}
}

// TestRecreatedMemberGoesToTheGangsDomainAfterCrash: a rack-constrained gang
// is bound; the scheduler crashes; while it is down the other rack fills up
// to leave exactly one member's room (the planner's BestFit choice for a
// lone pod) and a member is deleted and re-created, as a controller would.
// The new scheduler, whose state comes only from the API server, puts the
// re-created member back in the gang's rack.
func TestRecreatedMemberGoesToTheGangsDomainAfterCrash(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	ctx := context.Background()
	rackNodes(t, c, "n", 2, 2, "4", nil)
	ns := namespace(t, c)
	pg := gangPG("g", 3)
	pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(sandbox.RackLabel)}
	createPodGroup(t, c, ns, pg)
	for i := 0; i < 3; i++ {
		createPods(t, c, ns, member{name: fmt.Sprintf("g-%d", i), labels: inGroup("g"), cpu: "2"})
	}
	waitBound(t, c, ns, "g-", 3)
	domains := domainsOf(t, c, ns, "g-", sandbox.RackLabel)
	require.Len(t, domains, 1)
	gangRack, otherRack := "n-rack-0", "n-rack-1"
	if domains[gangRack] == 0 {
		gangRack, otherRack = otherRack, gangRack
	}
	other := strings.TrimPrefix(otherRack, "n-rack-")

	c.StopScheduler()
	// Bound directly, as a kubelet-managed pod would be: no scheduler needed.
	for i, cpu := range []string{"4", "2"} {
		p := member{name: fmt.Sprintf("fill-%d", i), cpu: cpu}.pod()
		p.Spec.NodeName = fmt.Sprintf("n-r%s-n%d", other, i)
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(ctx, "g-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	eventually(t, 30*time.Second, "g-1 gone", func() (bool, error) {
		_, err := c.Client.CoreV1().Pods(ns).Get(ctx, "g-1", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	createPods(t, c, ns, member{name: "g-1", labels: inGroup("g"), cpu: "2"})

	_, err := c.StartScheduler(ctx)
	require.NoError(t, err)
	waitBound(t, c, ns, "g-", 3)
	assert.Equal(t, map[string]int{gangRack: 3}, domainsOf(t, c, ns, "g-", sandbox.RackLabel), "the re-created member is in the gang's rack")
}

// rackNodes creates racks × perRack nodes named <prefix>-r<r>-n<n>, with
// the rack label <prefix>-rack-<r> and extra labels.
func rackNodes(t *testing.T, c *sandbox.Cluster, prefix string, racks, perRack int, cpu string, extra map[string]string) []string {
	t.Helper()
	var nodes []*corev1.Node
	var names []string
	for r := 0; r < racks; r++ {
		for n := 0; n < perRack; n++ {
			name := fmt.Sprintf("%s-r%d-n%d", prefix, r, n)
			labels := map[string]string{sandbox.HostnameLabel: name, sandbox.RackLabel: fmt.Sprintf("%s-rack-%d", prefix, r)}
			for k, v := range extra {
				labels[k] = v
			}
			nodes = append(nodes, sandbox.NewNode(name, labels, corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse("64Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			}))
			names = append(names, name)
		}
	}
	require.NoError(t, sandbox.CreateNodes(context.Background(), c.Client, nodes))
	return names
}

// createPinned creates a plain pod that can only go to node, and waits
// until it is bound there.
func createPinned(t *testing.T, c *sandbox.Cluster, ns, name, node, cpu string) {
	t.Helper()
	_, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pinnedFiller(name, node, cpu), metav1.CreateOptions{})
	require.NoError(t, err)
	eventually(t, 30*time.Second, name+" bound to "+node, func() (bool, error) {
		return boundPods(t, c, ns)[name] == node, nil
	})
}

// eventSince reports whether pod has an event of reason, whose note
// contains substring, recorded (or repeated) after since.
func eventSince(t *testing.T, c *sandbox.Cluster, ns, pod, reason, substring string, since time.Time) bool {
	evs, err := c.Client.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "regarding.name=" + pod})
	require.NoError(t, err)
	for _, e := range evs.Items {
		if e.Reason != reason || !strings.Contains(e.Note, substring) {
			continue
		}
		last := e.EventTime.Time
		if e.Series != nil && e.Series.LastObservedTime.After(last) {
			last = e.Series.LastObservedTime.Time
		}
		if last.After(since) {
			return true
		}
	}
	return false
}

// assumedIn returns the pods of ns the running scheduler holds assumed
// (waiting in Permit or binding), by name, with their node.
func assumedIn(c *sandbox.Cluster, ns string) map[string]string {
	out := map[string]string{}
	s := c.Scheduler()
	if s == nil {
		return out
	}
	for key, node := range s.AssumedPods() {
		if podNS, name, ok := strings.Cut(key, "/"); ok && podNS == ns {
			out[name] = node
		}
	}
	return out
}

// TestBindFailureRecovers: the API server refuses to bind one member (an
// admission policy stands in for a failing node or webhook). Within
// permitWaitingTimeSeconds the bound members stay bound; the failed member
// keeps retrying into its gang and completes it once binding works again.
// (Refused for longer, the bound members are evicted:
// TestGangBindRefusedForGoodEvictsItsBoundMembers.)
func TestBindFailureRecovers(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	addNodes(t, c, "n", 3, "4", 0)
	ns := namespace(t, c)
	lift := refuseBinding(t, c, "g-2")

	createPodGroup(t, c, ns, gangPG("g", 3))
	for i := 0; i < 3; i++ {
		createPods(t, c, ns, member{name: fmt.Sprintf("g-%d", i), labels: inGroup("g"), cpu: "4"})
	}
	eventually(t, 30*time.Second, "the other members bound", func() (bool, error) {
		return boundWithPrefix(t, c, ns, "g-") == 2, nil
	})
	note := failedSchedulingFor(t, c, ns, "g-2")
	t.Logf("the failed member reports: %s", note)
	assert.NotContains(t, boundPods(t, c, ns), "g-2")

	lift()
	eventually(t, 90*time.Second, "the gang completes once binding works", func() (bool, error) {
		return boundWithPrefix(t, c, ns, "g-") == 3, nil
	})
}

// refuseBinding makes the API server refuse every binding of a pod named
// pod (an admission policy stands in for a failing node or webhook) and
// waits until the refusal is in force. The returned func lifts it.
func refuseBinding(t *testing.T, c *sandbox.Cluster, pod string) (lift func()) {
	t.Helper()
	ctx := context.Background()
	name := "refuse-" + pod
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/binding"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf("object.metadata.name != '%s'", pod),
				Message:    fmt.Sprintf("binding of %s refused by test policy", pod),
			}},
		},
	}
	_, err := c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The policy takes effect asynchronously: probe it until a binding of a
	// throwaway pod of that name in another namespace is refused.
	probe := namespace(t, c)
	createPods(t, c, probe, member{name: pod, cpu: "1", gated: true})
	eventually(t, 30*time.Second, "the binding policy in force", func() (bool, error) {
		err := c.Client.CoreV1().Pods(probe).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod}, Target: corev1.ObjectReference{Kind: "Node", Name: "no-such-node"}}, metav1.CreateOptions{})
		if err == nil {
			// Not in force yet, and the probe is now bound: start over.
			require.NoError(t, c.Client.CoreV1().Pods(probe).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
			eventually(t, 30*time.Second, "the probe pod gone", func() (bool, error) {
				_, err := c.Client.CoreV1().Pods(probe).Get(ctx, pod, metav1.GetOptions{})
				return apierrors.IsNotFound(err), nil
			})
			createPods(t, c, probe, member{name: pod, cpu: "1", gated: true})
			return false, nil
		}
		return strings.Contains(err.Error(), "refused by test policy"), nil
	})
	return func() {
		require.NoError(t, c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, name, metav1.DeleteOptions{}))
	}
}

// TestChurn covers group and cluster changes while a gang is scheduling.
func TestChurn(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, NodeAgent: true})
	addNodes(t, c, "n", 4, "4", 0)
	ctx := context.Background()

	t.Run("deleting the node of a member waiting in Permit re-plans the gang on the nodes that remain", func(t *testing.T) {
		ns := namespace(t, c)
		pool := map[string]string{"pool": "permit-room"}
		nodes := rackNodes(t, c, "room", 1, 5, "4", pool)
		gone := nodeWithWaitingMember(t, c, ns, "w", pool)
		eventually(t, 60*time.Second, "the gang bound on the 4 nodes that remain", func() (bool, error) {
			return boundWithPrefix(t, c, ns, "w-") == 4, nil
		})
		used := map[string]bool{}
		for name, node := range boundPods(t, c, ns) {
			assert.NotEqual(t, gone, node, "%s is bound to the deleted node", name)
			assert.Contains(t, nodes, node)
			used[node] = true
		}
		assert.Len(t, used, 4, "one 4-cpu member per node")
	})

	t.Run("deleting the node of a member waiting in Permit with no room elsewhere leaves the gang pending with a reason", func(t *testing.T) {
		ns := namespace(t, c)
		pool := map[string]string{"pool": "permit-noroom"}
		rackNodes(t, c, "noroom", 1, 4, "4", pool)
		nodeWithWaitingMember(t, c, ns, "w", pool)
		waitGroupCondition(t, c, ns, "w", v1alpha1.PodGroupSchedulable, "of 4 pods fit")
		consistently(t, 3*time.Second, "no member bound", func() bool { return boundWithPrefix(t, c, ns, "w-") == 0 })
		t.Logf("condition: %s", groupCondition(t, c, ns, "w", v1alpha1.PodGroupSchedulable).Message)
		assert.Empty(t, assumedIn(c, ns), "nothing stays reserved")
	})

	t.Run("lowering minCount of a waiting gang lets the members that exist bind", func(t *testing.T) {
		ns := namespace(t, c)
		createPodGroup(t, c, ns, gangPG("shrink", 5))
		for i := 0; i < 3; i++ {
			createPods(t, c, ns, member{name: fmt.Sprintf("shrink-%d", i), labels: inGroup("shrink"), cpu: "1"})
		}
		waitGroupCondition(t, c, ns, "shrink", v1alpha1.PodGroupSchedulable, "waiting for pods: 3/5 present")
		pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "shrink", metav1.GetOptions{})
		require.NoError(t, err)
		pg.Spec.SchedulingPolicy.Gang.MinCount = 3
		_, err = c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Update(ctx, pg, metav1.UpdateOptions{})
		require.NoError(t, err)
		eventually(t, 30*time.Second, "3 members bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "shrink-") == 3, nil })
	})

	t.Run("raising minCount above the members that exist holds the rest", func(t *testing.T) {
		ns := namespace(t, c)
		createPodGroup(t, c, ns, gangPG("grow", 2))
		createPods(t, c, ns, member{name: "grow-0", labels: inGroup("grow"), cpu: "1"})
		waitGroupCondition(t, c, ns, "grow", v1alpha1.PodGroupSchedulable, "waiting for pods: 1/2 present")
		pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "grow", metav1.GetOptions{})
		require.NoError(t, err)
		pg.Spec.SchedulingPolicy.Gang.MinCount = 3
		_, err = c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Update(ctx, pg, metav1.UpdateOptions{})
		require.NoError(t, err)
		// The scheduler reports the new minimum before the next member
		// arrives: a member it saw under the old minCount of 2 would
		// complete the gang (the informers of pods and groups are not
		// ordered against each other, so the test must not race them).
		waitGroupCondition(t, c, ns, "grow", v1alpha1.PodGroupSchedulable, "waiting for pods: 1/3 present")
		createPods(t, c, ns, member{name: "grow-1", labels: inGroup("grow"), cpu: "1"})
		waitGroupCondition(t, c, ns, "grow", v1alpha1.PodGroupSchedulable, "waiting for pods: 2/3 present")
		consistently(t, 2*time.Second, "no member bound below the raised minCount", func() bool { return boundWithPrefix(t, c, ns, "grow-") == 0 })
	})

	t.Run("deleting the PodGroup of waiting members holds them with a reason", func(t *testing.T) {
		ns := namespace(t, c)
		createPodGroup(t, c, ns, gangPG("gone", 4))
		createPods(t, c, ns, member{name: "gone-0", labels: inGroup("gone"), cpu: "1"})
		waitGroupCondition(t, c, ns, "gone", v1alpha1.PodGroupSchedulable, "waiting for pods")
		require.NoError(t, c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Delete(ctx, "gone", metav1.DeleteOptions{}))
		createPods(t, c, ns, member{name: "gone-1", labels: inGroup("gone"), cpu: "1"})
		eventually(t, 30*time.Second, "an event naming the missing group", func() (bool, error) {
			evs, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=gone-1"})
			if err != nil {
				return false, err
			}
			for _, e := range evs.Items {
				if strings.Contains(e.Note, "PodGroup "+ns+"/gone not found") {
					return true, nil
				}
			}
			return false, nil
		})
		assert.Equal(t, 0, boundWithPrefix(t, c, ns, "gone-"))
	})

	t.Run("deleting a PriorityClass a group names holds the group with a reason", func(t *testing.T) {
		ns := namespace(t, c)
		_, err := c.Client.SchedulingV1().PriorityClasses().Create(ctx, priorityClass("doomed", 100), metav1.CreateOptions{})
		require.NoError(t, err)
		require.NoError(t, c.Client.SchedulingV1().PriorityClasses().Delete(ctx, "doomed", metav1.DeleteOptions{}))
		pg := gangPG("orphaned", 1)
		pg.Spec.PriorityClassName = "doomed"
		createPodGroup(t, c, ns, pg)
		createPods(t, c, ns, member{name: "orphaned-0", labels: inGroup("orphaned"), cpu: "1"})
		waitGroupCondition(t, c, ns, "orphaned", v1alpha1.PodGroupSchedulable, `PriorityClass "doomed"`)
		assert.Equal(t, 0, boundWithPrefix(t, c, ns, "orphaned-"))
	})
}

// nodeWithWaitingMember creates a gang of 4 one-node members (4 cpu) on the
// nodes labelled pool, the last one held by a scheduling gate so that the
// other 3 reserve nodes and wait in Permit. It then deletes the node of one
// waiting member, checks that the scheduler releases that reservation (a
// member allowed later would be bound to a node that no longer exists),
// lifts the gate, and returns the deleted node's name.
func nodeWithWaitingMember(t *testing.T, c *sandbox.Cluster, ns, gang string, pool map[string]string) string {
	t.Helper()
	ctx := context.Background()
	createPodGroup(t, c, ns, gangPG(gang, 4))
	for i := 0; i < 4; i++ {
		p := member{name: fmt.Sprintf("%s-%d", gang, i), labels: inGroup(gang), cpu: "4", gated: i == 3}.pod()
		p.Spec.NodeSelector = pool
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	var waiting map[string]string
	eventually(t, 30*time.Second, "3 members waiting in Permit", func() (bool, error) {
		waiting = assumedIn(c, ns)
		return len(waiting) == 3, nil
	})
	node := waiting[gang+"-0"]
	require.NotEmpty(t, node, "%s-0 is reserved on a node: %v", gang, waiting)
	require.NoError(t, c.Client.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}))
	eventually(t, 30*time.Second, "the member reserved on the deleted node released", func() (bool, error) {
		for _, n := range assumedIn(c, ns) {
			if n == node {
				return false, nil
			}
		}
		return true, nil
	})
	_, err := c.Client.CoreV1().Pods(ns).Patch(ctx, gang+"-3", types.JSONPatchType,
		[]byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`), metav1.PatchOptions{})
	require.NoError(t, err)
	return node
}

// TestBadInputIsExplainedAndIsolated: malformed attachments and broken
// hierarchies yield an API rejection or an event naming the problem, never
// bind the pods concerned, and never stop other groups.
func TestBadInputIsExplainedAndIsolated(t *testing.T) {
	// The scheduler runs with the upstream workload gates off, as
	// phalanx-scheduler does by default, so that pods attached through
	// spec.schedulingGroup reach Phalanx (see the sandbox option).
	c := startCluster(t, sandbox.Options{Scheduler: true})
	addNodes(t, c, "n", 2, "8", 0)
	ctx := context.Background()
	ns := namespace(t, c)

	// "-1" is not even a valid label value (it must start with a letter or
	// digit): the API server rejects the pod and names the label.
	_, err := c.Client.CoreV1().Pods(ns).Create(ctx, member{name: "bad-minus", cpu: "1", labels: map[string]string{
		v1alpha1.LightweightNameLabel: "x", v1alpha1.LightweightMinAvailableLabel: "-1"}}.pod(), metav1.CreateOptions{})
	require.Error(t, err, "a min-available label of -1 is rejected")
	assert.True(t, apierrors.IsInvalid(err), "rejected as invalid: %v", err)
	assert.Contains(t, err.Error(), `metadata.labels: Invalid value: "-1"`)
	assert.Contains(t, err.Error(), "must start and end with an alphanumeric character")

	cases := map[string]map[string]string{
		"abc":      {v1alpha1.LightweightNameLabel: "x", v1alpha1.LightweightMinAvailableLabel: "abc"},
		"zero":     {v1alpha1.LightweightNameLabel: "x", v1alpha1.LightweightMinAvailableLabel: "0"},
		"fraction": {v1alpha1.LightweightNameLabel: "x", v1alpha1.LightweightMinAvailableLabel: "1.5"},
		"nomin":    {v1alpha1.LightweightNameLabel: "x"},
	}
	for name, labels := range cases {
		createPods(t, c, ns, member{name: "bad-" + name, labels: labels, cpu: "1"})
	}
	// A pod that names a group in another namespace finds no such group here.
	other := namespace(t, c)
	createPodGroup(t, c, other, gangPG("elsewhere", 1))
	createPods(t, c, ns, member{name: "bad-crossns", labels: inGroup("elsewhere"), cpu: "1"})

	// Label and spec name two different groups that both exist. Each group
	// has its own healthy members, which the contradictory pod must not
	// disturb.
	for _, g := range []string{"alpha", "beta"} {
		createPodGroup(t, c, ns, gangPG(g, 2))
	}
	conflict := member{name: "bad-conflict", labels: inGroup("alpha"), cpu: "1"}.pod()
	conflict.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("beta")}
	_, err = c.Client.CoreV1().Pods(ns).Create(ctx, conflict, metav1.CreateOptions{})
	require.NoError(t, err, "the API server accepts spec.schedulingGroup")

	// Hierarchies created out of order: the pods and their leaf exist
	// before the parents, and the parents, once they appear, form a cycle,
	// a self-loop, or a chain one level deeper than the limit of 4.
	parented := func(pg *v1alpha1.PodGroup, parent string) *v1alpha1.PodGroup {
		pg.Spec.ParentCompositePodGroupName = ptr.To(parent)
		return pg
	}
	createComposite := func(name, parent string) {
		t.Helper()
		cpg := composite(name, 0)
		if parent != "" {
			cpg.Spec.ParentCompositePodGroupName = ptr.To(parent)
		}
		_, err := c.Phalanx.SchedulingV1alpha1().CompositePodGroups(ns).Create(ctx, cpg, metav1.CreateOptions{})
		require.NoError(t, err, "create CompositePodGroup %s", name)
	}
	createPods(t, c, ns,
		member{name: "bad-cycle", labels: inGroup("cycle-leaf"), cpu: "1"},
		member{name: "bad-self", labels: inGroup("self-leaf"), cpu: "1"},
		member{name: "bad-deep", labels: inGroup("deep-leaf"), cpu: "1"},
		member{name: "ok-deepest", labels: inGroup("four-leaf"), cpu: "1"})
	createPodGroup(t, c, ns, parented(gangPG("cycle-leaf", 1), "cycle-a"))
	createComposite("cycle-a", "cycle-b")
	createComposite("cycle-b", "cycle-a")
	createPodGroup(t, c, ns, parented(gangPG("self-leaf", 1), "self"))
	createComposite("self", "self")
	createPodGroup(t, c, ns, parented(gangPG("deep-leaf", 1), "deep-1"))
	createComposite("deep-1", "deep-2")
	createComposite("deep-2", "deep-3")
	createComposite("deep-3", "deep-4")
	createComposite("deep-4", "")
	// Four levels are allowed: this hierarchy, also built bottom-up, binds.
	createPodGroup(t, c, ns, parented(gangPG("four-leaf", 1), "four-1"))
	createComposite("four-1", "four-2")
	createComposite("four-2", "four-3")
	createComposite("four-3", "")

	// Healthy groups beside all of that schedule.
	createPods(t, c, ns,
		member{name: "alpha-0", labels: inGroup("alpha"), cpu: "1"}, member{name: "alpha-1", labels: inGroup("alpha"), cpu: "1"},
		member{name: "beta-0", labels: inGroup("beta"), cpu: "1"}, member{name: "beta-1", labels: inGroup("beta"), cpu: "1"})
	createPodGroup(t, c, ns, gangPG("good", 2))
	createPods(t, c, ns, member{name: "good-0", labels: inGroup("good"), cpu: "1"}, member{name: "good-1", labels: inGroup("good"), cpu: "1"})
	for _, prefix := range []string{"good-", "alpha-", "beta-"} {
		waitBound(t, c, ns, prefix, 2)
	}
	waitBound(t, c, ns, "ok-deepest", 1)

	tooDeep := fmt.Sprintf("deeper than %d levels or cyclic", v1alpha1.MaxTreeDepth)
	want := map[string]string{
		"bad-abc":      `min-available="abc" is invalid`,
		"bad-zero":     `min-available="0" is invalid`,
		"bad-fraction": `min-available="1.5" is invalid`,
		"bad-nomin":    "min-available is missing",
		"bad-crossns":  "PodGroup " + ns + "/elsewhere not found",
		"bad-conflict": `label scheduling.phalanx.dev/pod-group="alpha" names a PodGroup.scheduling.phalanx.dev and spec.schedulingGroup.podGroupName="beta" a PodGroup.scheduling.k8s.io: a pod belongs to one group in one API`,
	}
	for pod, msg := range want {
		eventually(t, 30*time.Second, fmt.Sprintf("an event on %s saying %q", pod, msg), func() (bool, error) {
			evs, err := c.Client.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + pod})
			if err != nil {
				return false, err
			}
			for _, e := range evs.Items {
				if strings.Contains(e.Note, msg) {
					return true, nil
				}
			}
			return false, nil
		})
		assert.NotContains(t, boundPods(t, c, ns), pod)
	}
	// A broken hierarchy is explained on the leaf PodGroup: its pods first
	// reported the group missing, and events of the same reason fold into
	// that first one.
	for leaf, pod := range map[string]string{"cycle-leaf": "bad-cycle", "self-leaf": "bad-self", "deep-leaf": "bad-deep"} {
		cond := waitGroupCondition(t, c, ns, leaf, v1alpha1.PodGroupSchedulable, tooDeep)
		assert.Equal(t, v1alpha1.ReasonInvalid, cond.Reason)
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
		assert.NotContains(t, boundPods(t, c, ns), pod)
	}
}

func priorityClass(name string, value int32) *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
}

// TestGroupMembersArrivingAfterQuorumAllBind: members of a group that
// already has quorum (every member of a basic group, a gang's members
// beyond minCount) or whose hierarchy already has it (a new child gang of a
// composite whose minGroupCount is met), created one at a time on ample
// room in an otherwise quiet cluster, each bind promptly. The scheduler's queue and Phalanx's
// group cache watch pods through separate handlers, so such a member can
// reach PreEnqueue or the planner before the cache knows it; it must not be
// held for itself, left out of the plan, or parked until some unrelated
// event.
func TestGroupMembersArrivingAfterQuorumAllBind(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	addNodes(t, c, "n", 4, "32", 0)
	ns := namespace(t, c)
	createPodGroup(t, c, ns, &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Name: "basic"},
		Spec: v1alpha1.PodGroupSpec{SchedulingPolicy: v1alpha1.PodGroupSchedulingPolicy{Basic: &v1alpha1.BasicSchedulingPolicy{}}}})
	createPodGroup(t, c, ns, gangPG("gang", 1))
	// A gang composite whose minGroupCount its first child already meets:
	// every later child gang is complete with its first pod.
	_, err := c.Phalanx.SchedulingV1alpha1().CompositePodGroups(ns).Create(context.Background(), composite("tree", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	for i := 0; i < 20; i++ {
		kid := gangPG(fmt.Sprintf("kid%d", i), 1)
		kid.Spec.ParentCompositePodGroupName = ptr.To("tree")
		createPodGroup(t, c, ns, kid)
		for _, g := range []string{"basic", "gang", kid.Name} {
			name := fmt.Sprintf("%s-%d", g, i)
			createPods(t, c, ns, member{name: name, labels: inGroup(g), cpu: "100m"})
			eventually(t, 15*time.Second, name+" bound", func() (bool, error) {
				_, ok := boundPods(t, c, ns)[name]
				return ok, nil
			})
		}
	}
}
