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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/sandbox"
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

// TestBindFailureRecovers: the API server refuses to bind one member (an
// admission policy stands in for a failing node or webhook). Bound members
// are never unbound by the scheduler; the failed member keeps retrying into
// its gang and completes it once binding works again.
func TestBindFailureRecovers(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	addNodes(t, c, "n", 3, "4", 0)
	ctx := context.Background()
	ns := namespace(t, c)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-g-2"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/binding"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "object.metadata.name != 'g-2'",
				Message:    "binding of g-2 refused by test policy",
			}},
		},
	}
	_, err := c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, policy, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "refuse-g-2"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        "refuse-g-2",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The policy takes effect asynchronously: probe it until a binding of a
	// throwaway pod named g-2 in another namespace is refused.
	probe := namespace(t, c)
	createPods(t, c, probe, member{name: "g-2", cpu: "1", gated: true})
	eventually(t, 30*time.Second, "the binding policy in force", func() (bool, error) {
		err := c.Client.CoreV1().Pods(probe).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: "g-2"}, Target: corev1.ObjectReference{Kind: "Node", Name: "n-0"}}, metav1.CreateOptions{})
		return err != nil && strings.Contains(err.Error(), "refused by test policy"), nil
	})

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

	require.NoError(t, c.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(ctx, "refuse-g-2", metav1.DeleteOptions{}))
	eventually(t, 90*time.Second, "the gang completes once binding works", func() (bool, error) {
		return boundWithPrefix(t, c, ns, "g-") == 3, nil
	})
}

// TestChurn covers group and cluster changes while a gang is scheduling.
func TestChurn(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, NodeAgent: true})
	addNodes(t, c, "n", 4, "4", 0)
	ctx := context.Background()

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
		createPodGroup(t, c, ns, gangPG("grow", 1))
		pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "grow", metav1.GetOptions{})
		require.NoError(t, err)
		pg.Spec.SchedulingPolicy.Gang.MinCount = 3
		_, err = c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Update(ctx, pg, metav1.UpdateOptions{})
		require.NoError(t, err)
		createPods(t, c, ns, member{name: "grow-0", labels: inGroup("grow"), cpu: "1"}, member{name: "grow-1", labels: inGroup("grow"), cpu: "1"})
		waitGroupCondition(t, c, ns, "grow", v1alpha1.PodGroupSchedulable, "waiting for pods: 2/3 present")
		assert.Equal(t, 0, boundWithPrefix(t, c, ns, "grow-"))
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

// TestBadInputIsExplainedAndIsolated: malformed attachments yield events
// naming the problem and never stop other groups.
func TestBadInputIsExplainedAndIsolated(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true})
	addNodes(t, c, "n", 2, "8", 0)
	ctx := context.Background()
	ns := namespace(t, c)
	cases := map[string]map[string]string{
		"abc":  {v1alpha1.LightweightNameLabel: "x", v1alpha1.LightweightMinAvailableLabel: "abc"},
		"zero": {v1alpha1.LightweightNameLabel: "x", v1alpha1.LightweightMinAvailableLabel: "0"},
		// "-1" is not even a valid label value: the API server rejects it.
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
	// A healthy gang beside them schedules.
	createPodGroup(t, c, ns, gangPG("good", 2))
	createPods(t, c, ns, member{name: "good-0", labels: inGroup("good"), cpu: "1"}, member{name: "good-1", labels: inGroup("good"), cpu: "1"})
	eventually(t, 30*time.Second, "the healthy gang bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "good-") == 2, nil })

	want := map[string]string{
		"bad-abc":      `min-available="abc" is invalid`,
		"bad-zero":     `min-available="0" is invalid`,
		"bad-fraction": `min-available="1.5" is invalid`,
		"bad-nomin":    "min-available is missing",
		"bad-crossns":  "PodGroup " + ns + "/elsewhere not found",
	}
	for pod, msg := range want {
		eventually(t, 30*time.Second, "an event on "+pod, func() (bool, error) {
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
}

func priorityClass(name string, value int32) *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
}
