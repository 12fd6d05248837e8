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
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// nativeGang is an upstream scheduling.k8s.io/v1beta1 gang PodGroup,
// optionally kept in one domain of topologyKey.
func nativeGang(name string, minCount int32, topologyKey string) *schedv1beta1.PodGroup {
	pg := &schedv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: schedv1beta1.PodGroupSpec{SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: minCount}}},
	}
	if topologyKey != "" {
		pg.Spec.SchedulingConstraints = &schedv1beta1.PodGroupSchedulingConstraints{
			Topology: []schedv1beta1.TopologyConstraint{{Key: topologyKey}}}
	}
	return pg
}

// nativeMembers creates n pods that name native PodGroup group through
// spec.schedulingGroup, the only attachment upstream's API has.
func nativeMembers(t *testing.T, c *sandbox.Cluster, ns, group string, n int, cpu string) {
	t.Helper()
	for i := range n {
		p := member{name: fmt.Sprintf("%s-%d", group, i), cpu: cpu}.pod()
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
		got, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
		require.NoError(t, err)
		require.NotNil(t, got.Spec.SchedulingGroup, "the API server keeps spec.schedulingGroup")
	}
}

func nativeCondition(t *testing.T, c *sandbox.Cluster, ns, name string) *metav1.Condition {
	t.Helper()
	pg, err := c.Client.SchedulingV1beta1().PodGroups(ns).Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return meta.FindStatusCondition(pg.Status.Conditions, schedv1beta1.PodGroupInitiallyScheduled)
}

// TestNativeDialect: upstream's own scheduling.k8s.io objects, with no
// Phalanx object or label anywhere, are gang-scheduled by Phalanx's plugins
// (kube-scheduler's own pod-group cycle is off in phalanx-scheduler).
func TestNativeDialect(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, Topology: &sandbox.Topology{
		Zones: 2, RacksPerZone: 2, NodesPerRack: 2, CPU: "8", Memory: "64Gi", Pods: 110}})
	ctx := context.Background()

	t.Run("a native gang binds whole and gets upstream's condition", func(t *testing.T) {
		ns := namespace(t, c)
		_, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, nativeGang("trainer", 3, sandbox.RackLabel), metav1.CreateOptions{})
		require.NoError(t, err)
		nativeMembers(t, c, ns, "trainer", 3, "4")
		eventually(t, 60*time.Second, "3 members bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "trainer-") == 3, nil })
		assert.Len(t, domainsOf(t, c, ns, "trainer-", sandbox.RackLabel), 1, "the rack constraint holds")
		eventually(t, 30*time.Second, "PodGroupInitiallyScheduled=True written by Phalanx", func() (bool, error) {
			cond := nativeCondition(t, c, ns, "trainer")
			return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == "Scheduled", nil
		})
	})

	t.Run("a native composite keeps its zone and each child its rack", func(t *testing.T) {
		ns := namespace(t, c)
		_, err := c.Client.SchedulingV1alpha3().CompositePodGroups(ns).Create(ctx, &schedv1alpha3.CompositePodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "job"},
			Spec: schedv1alpha3.CompositePodGroupSpec{
				WorkloadRef: &schedv1alpha3.WorkloadReference{WorkloadName: "job", TemplateName: "job"},
				SchedulingPolicy: schedv1alpha3.CompositePodGroupSchedulingPolicy{
					Gang: &schedv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: 2}},
				SchedulingConstraints: &schedv1alpha3.CompositePodGroupSchedulingConstraints{
					Topology: []schedv1alpha3.TopologyConstraint{{Key: sandbox.ZoneLabel}}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		for name, n := range map[string]int{"workers": 4, "driver": 1} {
			pg := nativeGang(name, int32(n), sandbox.RackLabel)
			pg.Spec.ParentCompositePodGroupName = ptr.To("job")
			pg.Spec.WorkloadRef = &schedv1beta1.WorkloadReference{WorkloadName: "job", TemplateName: name}
			_, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
			require.NoError(t, err)
			nativeMembers(t, c, ns, name, n, "4")
		}
		eventually(t, 60*time.Second, "all 5 pods bound", func() (bool, error) { return len(boundPods(t, c, ns)) == 5, nil })
		assert.Len(t, domainsOf(t, c, ns, "", sandbox.ZoneLabel), 1, "every pod in one zone")
		assert.Len(t, domainsOf(t, c, ns, "workers-", sandbox.RackLabel), 1, "the workers in one rack")
	})

	t.Run("members of a complete child that wait for a sibling say so in PodScheduled", func(t *testing.T) {
		ns := namespace(t, c)
		_, err := c.Client.SchedulingV1alpha3().CompositePodGroups(ns).Create(ctx, &schedv1alpha3.CompositePodGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "pair"},
			Spec: schedv1alpha3.CompositePodGroupSpec{
				WorkloadRef: &schedv1alpha3.WorkloadReference{WorkloadName: "pair", TemplateName: "pair"},
				SchedulingPolicy: schedv1alpha3.CompositePodGroupSchedulingPolicy{
					Gang: &schedv1alpha3.CompositeGangSchedulingPolicy{MinGroupCount: 2}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		for _, name := range []string{"left", "right"} {
			pg := nativeGang(name, 2, "")
			pg.Spec.ParentCompositePodGroupName = ptr.To("pair")
			pg.Spec.WorkloadRef = &schedv1beta1.WorkloadReference{WorkloadName: "pair", TemplateName: name}
			_, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		nativeMembers(t, c, ns, "left", 2, "1") // complete; right has none yet
		eventually(t, 30*time.Second, "PodScheduled=False on left's members naming the child groups short", func() (bool, error) {
			for _, name := range []string{"left-0", "left-1"} {
				p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				found := false
				for _, cond := range p.Status.Conditions {
					found = found || cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse &&
						cond.Reason == corev1.PodReasonUnschedulable && strings.Contains(cond.Message, "waiting for child groups: 1/2")
				}
				if !found {
					return false, nil
				}
			}
			return true, nil
		})
		nativeMembers(t, c, ns, "right", 2, "1")
		eventually(t, 60*time.Second, "all 4 bound once the sibling is complete", func() (bool, error) { return len(boundPods(t, c, ns)) == 4, nil })
	})

	t.Run("a native gang that cannot fit binds nothing and says why", func(t *testing.T) {
		ns := namespace(t, c)
		_, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, nativeGang("wide", 5, sandbox.RackLabel), metav1.CreateOptions{})
		require.NoError(t, err)
		// 5 × 4 cpu in one rack of 2 × 8 cpu: never.
		nativeMembers(t, c, ns, "wide", 5, "4")
		eventually(t, 60*time.Second, "PodGroupInitiallyScheduled=False Unschedulable with Phalanx's numbers", func() (bool, error) {
			cond := nativeCondition(t, c, ns, "wide")
			return cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == schedv1beta1.PodGroupReasonUnschedulable &&
				strings.Contains(cond.Message, sandbox.RackLabel), nil
		})
		assert.Zero(t, boundWithPrefix(t, c, ns, "wide-"), "nothing of the gang binds")
	})

	t.Run("a Phalanx PodGroup and a native PodGroup of one name are two groups", func(t *testing.T) {
		ns := namespace(t, c)
		createPodGroup(t, c, ns, gangPG("same", 2))
		_, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, nativeGang("same", 2, ""), metav1.CreateOptions{})
		require.NoError(t, err)
		createPods(t, c, ns,
			member{name: "px-0", labels: inGroup("same"), cpu: "1"},
			member{name: "px-1", labels: inGroup("same"), cpu: "1"})
		nativeMembers(t, c, ns, "same", 1, "1") // 1 of the native gang's 2
		eventually(t, 60*time.Second, "the Phalanx gang bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "px-") == 2, nil })
		eventually(t, 30*time.Second, "the lone native member waits for its own group", func() (bool, error) {
			return podEventContains(ctx, c, ns, "same-0", "waiting for pods: 1/2 present")
		})
		assert.Zero(t, boundWithPrefix(t, c, ns, "same-"))
	})

	t.Run("a pod naming a missing native PodGroup waits with an event naming it", func(t *testing.T) {
		ns := namespace(t, c)
		nativeMembers(t, c, ns, "ghost", 1, "1")
		eventually(t, 30*time.Second, "an event naming the missing group", func() (bool, error) {
			return podEventContains(ctx, c, ns, "ghost-0", "PodGroup.scheduling.k8s.io "+ns+"/ghost not found")
		})
		_, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, nativeGang("ghost", 1, ""), metav1.CreateOptions{})
		require.NoError(t, err)
		eventually(t, 60*time.Second, "bound once the group exists", func() (bool, error) { return boundWithPrefix(t, c, ns, "ghost-") == 1, nil })
	})

	t.Run("a native gang whose PriorityClass was deleted is held with the same message as Phalanx's", func(t *testing.T) {
		ns := namespace(t, c)
		// Upstream's admission refuses a PodGroup naming a missing class, so
		// the class goes away after the group was admitted.
		_, err := c.Client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: "hihg"}, Value: 10}, metav1.CreateOptions{})
		require.NoError(t, err)
		pg := nativeGang("typo", 2, "")
		pg.Spec.PriorityClassName = "hihg"
		// Admission reads classes from an informer: the new one may take a
		// moment to be seen there.
		eventually(t, 30*time.Second, "the PodGroup admitted", func() (bool, error) {
			_, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, pg, metav1.CreateOptions{})
			return err == nil, nil
		})
		require.NoError(t, c.Client.SchedulingV1().PriorityClasses().Delete(ctx, "hihg", metav1.DeleteOptions{}))
		nativeMembers(t, c, ns, "typo", 2, "1")
		want := `PriorityClass "hihg" of PodGroup.scheduling.k8s.io ` + ns + `/typo not found: create it or fix priorityClassName`
		eventually(t, 30*time.Second, "Schedulable=False Invalid on the upstream PodGroup", func() (bool, error) {
			got, err := c.Client.SchedulingV1beta1().PodGroups(ns).Get(ctx, "typo", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, "Schedulable")
			return cond != nil && cond.Reason == "Invalid" && cond.Message == want, nil
		})
		assert.Zero(t, boundWithPrefix(t, c, ns, "typo-"))
	})

	t.Run("a pod naming groups in two dialects is refused with an event", func(t *testing.T) {
		ns := namespace(t, c)
		createPodGroup(t, c, ns, gangPG("both", 1))
		_, err := c.Client.SchedulingV1beta1().PodGroups(ns).Create(ctx, nativeGang("both", 1, ""), metav1.CreateOptions{})
		require.NoError(t, err)
		p := member{name: "both-0", labels: inGroup("both"), cpu: "1"}.pod()
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr.To("both")}
		_, err = c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
		eventually(t, 30*time.Second, "an event naming both", func() (bool, error) {
			return podEventContains(ctx, c, ns, "both-0", "a pod belongs to one group in one API")
		})
		assert.Zero(t, boundWithPrefix(t, c, ns, "both-"))
	})
}

// TestNativeDialectWithoutTheAPI: the same scheduler and profile start and
// schedule on an API server that does not serve scheduling.k8s.io
// workload resources.
func TestNativeDialectWithoutTheAPI(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, NoUpstreamWorkloadAPI: true, Topology: &sandbox.Topology{
		Zones: 1, RacksPerZone: 1, NodesPerRack: 2, CPU: "8", Memory: "64Gi", Pods: 110}})
	ctx := context.Background()
	ns := namespace(t, c)
	_, err := c.Client.SchedulingV1beta1().PodGroups(ns).List(ctx, metav1.ListOptions{})
	require.Error(t, err, "the API is not served")
	createPodGroup(t, c, ns, gangPG("g", 2))
	createPods(t, c, ns,
		member{name: "g-0", labels: inGroup("g"), cpu: "1"},
		member{name: "g-1", labels: inGroup("g"), cpu: "1"})
	eventually(t, 60*time.Second, "the Phalanx gang bound", func() (bool, error) { return boundWithPrefix(t, c, ns, "g-") == 2, nil })
}

// podEventContains reports whether an event about pod says msg.
func podEventContains(ctx context.Context, c *sandbox.Cluster, ns, pod, msg string) (bool, error) {
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
}
