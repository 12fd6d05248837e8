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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/config"
	"github.com/phalanx-sched/phalanx/pkg/reservation"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// reservationConfig turns reservation on: a gang waiting 1s gets a rack
// held, for at most maxHold seconds.
func reservationConfig(t *testing.T, maxHold int) []byte {
	cfg := strings.Replace(string(config.SecondScheduler), "      planTTLSeconds: 30",
		fmt.Sprintf("      planTTLSeconds: 30\n      reservation:\n        afterSeconds: 1\n        maxHoldSeconds: %d\n        maxSharePercent: 50", maxHold), 1)
	require.Contains(t, cfg, "maxHoldSeconds")
	return []byte(cfg)
}

// filler is a plain 4-cpu pod bound straight to node, with an optional
// runtime bound (the node agent fails it when the bound ends).
func filler(t *testing.T, c *sandbox.Cluster, ns, name, node string, ads int64) {
	t.Helper()
	p := member{name: name, cpu: "4"}.pod()
	p.Spec.NodeName = node
	if ads > 0 {
		p.Spec.ActiveDeadlineSeconds = ptr.To(ads)
	}
	_, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	require.NoError(t, err)
}

// small is a plain 4-cpu pod the scheduler places, limited to nodes.
func small(t *testing.T, c *sandbox.Cluster, ns, name string, ads int64, nodes ...string) {
	t.Helper()
	p := member{name: name, cpu: "4"}.pod()
	p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: sandbox.HostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: nodes}}}}}}}
	if ads > 0 {
		p.Spec.ActiveDeadlineSeconds = ptr.To(ads)
	}
	_, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	require.NoError(t, err)
}

func deletePod(t *testing.T, c *sandbox.Cluster, ns, name string) {
	t.Helper()
	zero := int64(0)
	require.NoError(t, c.Client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
}

// reserved waits for group's Reserved condition with the given status and
// reason, and returns it.
func reserved(t *testing.T, c *sandbox.Cluster, ns, group string, status metav1.ConditionStatus, reason string, timeout time.Duration) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	eventually(t, timeout, fmt.Sprintf("%s Reserved=%s/%s", group, status, reason), func() (bool, error) {
		pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(context.Background(), group, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(pg.Status.Conditions, reservation.ConditionReserved)
		if cond == nil || cond.Status != status || cond.Reason != reason {
			return false, nil
		}
		got = *cond
		return true, nil
	})
	return got
}

// heldRack reads the rack a Holding condition names.
func heldRack(t *testing.T, cond metav1.Condition) string {
	t.Helper()
	prefix := "holds " + sandbox.RackLabel + "="
	require.True(t, strings.HasPrefix(cond.Message, prefix), cond.Message)
	rack, _, _ := strings.Cut(strings.TrimPrefix(cond.Message, prefix), " ")
	return rack
}

func bigGang(t *testing.T, c *sandbox.Cluster, ns string) {
	t.Helper()
	pg := gangPG("big", 2)
	pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(sandbox.RackLabel)}
	createPodGroup(t, c, ns, pg)
	gangMembers(t, c, ns, "big", 2, "4")
}

func deleteNodes(t *testing.T, c *sandbox.Cluster, names ...string) {
	for _, n := range names {
		_ = c.Client.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
	}
}

// TestReservation: 2 racks of 2 nodes of 4 cpu (per case, with their own
// names), every node taken by a 4-cpu filler, and a gang of 2 × 4 cpu
// that needs one rack. After a second the gang holds a rack (50% of the
// nodes may be held).
func TestReservation(t *testing.T) {
	c := startCluster(t, sandbox.Options{Scheduler: true, NodeAgent: true, SchedulerConfig: reservationConfig(t, 25)})
	ctx := context.Background()

	// setup fills every node (fillers with runtime bound ads, 0 for none)
	// and creates the gang; it returns the held rack's nodes and the
	// others. Node names are <prefix>-r<rack>-n<i>, racks <prefix>-rack-<rack>.
	setup := func(t *testing.T, prefix, ns string, ads int64) (held, other []string) {
		nodes := rackNodes(t, c, prefix, 2, 2, "4", nil)
		t.Cleanup(func() { deleteNodes(t, c, nodes...) })
		for i, n := range nodes {
			filler(t, c, ns, fmt.Sprintf("fill-%d", i), n, ads)
		}
		waitBound(t, c, ns, "fill-", 4)
		bigGang(t, c, ns)
		rack := heldRack(t, reserved(t, c, ns, "big", metav1.ConditionTrue, reservation.ReasonHolding, 30*time.Second))
		for _, n := range nodes {
			if strings.HasPrefix(n, fmt.Sprintf("%s-r%s-", prefix, strings.TrimPrefix(rack, prefix+"-rack-"))) {
				held = append(held, n)
			} else {
				other = append(other, n)
			}
		}
		require.Len(t, held, 2, "rack %s", rack)
		return held, other
	}
	fillerOn := func(nodes []string, node string) string {
		for i, n := range nodes {
			if n == node {
				return fmt.Sprintf("fill-%d", i)
			}
		}
		return ""
	}

	t.Run("a reservation holds freed room for the gang, and ends when it binds", func(t *testing.T) {
		ns := namespace(t, c)
		held, _ := setup(t, "h", ns, 0)
		nodes := []string{"h-r0-n0", "h-r0-n1", "h-r1-n0", "h-r1-n1"}
		deletePod(t, c, ns, fillerOn(nodes, held[0]))
		// A plain pod of the gang's priority with no runtime bound could
		// only fit the freed, held node: it waits, and its event says why.
		small(t, c, ns, "late", 0, nodes...)
		note := failedSchedulingFor(t, c, ns, "late")
		assert.Contains(t, note, "reserved for PodGroup "+ns+"/big", note)
		consistently(t, 3*time.Second, "late stays off the held node", func() bool { return boundPods(t, c, ns)["late"] == "" })
		deletePod(t, c, ns, fillerOn(nodes, held[1]))
		waitBound(t, c, ns, "big-", 2)
		assert.ElementsMatch(t, held, []string{boundPods(t, c, ns)["big-0"], boundPods(t, c, ns)["big-1"]})
		cond := reserved(t, c, ns, "big", metav1.ConditionFalse, reservation.ReasonReleasedBound, 30*time.Second)
		t.Log(cond.Message)
		assert.Empty(t, boundPods(t, c, ns)["late"], "late had no room left")
	})

	t.Run("backfill uses held room without delaying the gang", func(t *testing.T) {
		ns := namespace(t, c)
		// Every filler ends after 20s: the gang is expected to fit then.
		held, _ := setup(t, "b", ns, 20)
		nodes := []string{"b-r0-n0", "b-r0-n1", "b-r1-n0", "b-r1-n1"}
		cond := reserved(t, c, ns, "big", metav1.ConditionTrue, reservation.ReasonHolding, 10*time.Second)
		require.NotContains(t, cond.Message, "expected to fit at unknown", cond.Message)
		_, rest, _ := strings.Cut(cond.Message, "expected to fit at ")
		expected, err := time.Parse(time.RFC3339, strings.TrimSuffix(rest, ")"))
		require.NoError(t, err, cond.Message)
		deletePod(t, c, ns, fillerOn(nodes, held[0]))
		// Would outlive the expected start: waits, and says why.
		small(t, c, ns, "long", 3600, held...)
		note := failedSchedulingFor(t, c, ns, "long")
		assert.Contains(t, note, "activeDeadlineSeconds ends after that", note)
		// Ends well before the gang may start: backfills the held node.
		small(t, c, ns, "short", 3, held...)
		eventually(t, 30*time.Second, "short backfilled", func() (bool, error) { return boundPods(t, c, ns)["short"] == held[0], nil })
		// The gang binds when the last filler of its rack ends (20s after
		// it started): the backfill did not delay it. (The other rack's
		// fillers end then too, so it may bind there instead.)
		waitBound(t, c, ns, "big-", 2)
		bound := time.Now()
		t.Logf("the gang bound %s after its expected start", bound.Sub(expected).Round(time.Second))
		assert.WithinDuration(t, expected, bound, 10*time.Second, "the gang started when expected")
		assert.Empty(t, boundPods(t, c, ns)["long"])
	})

	t.Run("a gang whose only victims are protected holds a rack and says until when", func(t *testing.T) {
		ns := namespace(t, c)
		nodes := rackNodes(t, c, "p", 2, 2, "4", nil)
		t.Cleanup(func() { deleteNodes(t, c, nodes...) })
		createPriorityClasses(t, c,
			&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "resv-low"}, Value: 10},
			&schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "resv-high"}, Value: 1000})
		t.Cleanup(func() {
			for _, pc := range []string{"resv-low", "resv-high"} {
				_ = c.Client.SchedulingV1().PriorityClasses().Delete(ctx, pc, metav1.DeleteOptions{})
			}
		})
		// A batch gang protected for 6s fills every node; the urgent gang
		// may preempt it, but not before its minimum runtime has passed.
		const minRuntime = 6 * time.Second
		batch := gangPG("batch", 4)
		batch.Spec.PriorityClassName = "resv-low"
		batch.Spec.MinRuntimeSeconds = ptr.To(int32(minRuntime / time.Second))
		createPodGroup(t, c, ns, batch)
		for i := range 4 {
			createPods(t, c, ns, member{name: fmt.Sprintf("batch-%d", i), labels: inGroup("batch"), cpu: "4", priorityClass: "resv-low"})
		}
		waitBound(t, c, ns, "batch-", 4)
		whole := lastBind(t, c, ns, "batch-")
		urgent := gangPG("urgent", 2)
		urgent.Spec.PriorityClassName = "resv-high"
		urgent.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(sandbox.RackLabel)}
		createPodGroup(t, c, ns, urgent)
		for i := range 2 {
			createPods(t, c, ns, member{name: fmt.Sprintf("urgent-%d", i), labels: inGroup("urgent"), cpu: "4", priorityClass: "resv-high"})
		}

		// The hold names the protection, and expects the gang no earlier
		// than its end (binds are recorded to the second).
		cond := reserved(t, c, ns, "urgent", metav1.ConditionTrue, reservation.ReasonHolding, 10*time.Second)
		t.Log(cond.Message)
		until := whole.Add(minRuntime).UTC().Format(time.RFC3339)
		assert.Contains(t, cond.Message, "protected by their minimum runtime until "+until, cond.Message)
		_, rest, _ := strings.Cut(cond.Message, "expected to fit at ")
		at, _, _ := strings.Cut(rest, ";")
		expected, err := time.Parse(time.RFC3339, at)
		require.NoError(t, err, cond.Message)
		assert.False(t, expected.Before(whole.Add(minRuntime-time.Second)), "expected to fit at %s, before the protection ends at %s", at, until)

		// Once the protection ends, the gang preempts exactly its rack.
		waitBound(t, c, ns, "urgent-", 2)
		assert.Len(t, podNames(t, c, ns, "batch-"), 2)
		reserved(t, c, ns, "urgent", metav1.ConditionFalse, reservation.ReasonReleasedBound, 30*time.Second)
	})

	t.Run("the hold ends when the group is deleted", func(t *testing.T) {
		ns := namespace(t, c)
		held, _ := setup(t, "d", ns, 0)
		nodes := []string{"d-r0-n0", "d-r0-n1", "d-r1-n0", "d-r1-n1"}
		deletePod(t, c, ns, fillerOn(nodes, held[0]))
		small(t, c, ns, "late", 0, held[0])
		failedSchedulingFor(t, c, ns, "late")
		require.NoError(t, c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Delete(ctx, "big", metav1.DeleteOptions{}))
		deletePod(t, c, ns, "big-0")
		deletePod(t, c, ns, "big-1")
		eventually(t, 30*time.Second, "late takes the node once the hold is gone", func() (bool, error) { return boundPods(t, c, ns)["late"] == held[0], nil })
	})

	t.Run("the hold expires after maxHoldSeconds and is not renewed at once", func(t *testing.T) {
		ns := namespace(t, c)
		held, _ := setup(t, "x", ns, 0)
		nodes := []string{"x-r0-n0", "x-r0-n1", "x-r1-n0", "x-r1-n1"}
		deletePod(t, c, ns, fillerOn(nodes, held[0]))
		small(t, c, ns, "late", 0, held[0])
		failedSchedulingFor(t, c, ns, "late")
		cond := reserved(t, c, ns, "big", metav1.ConditionFalse, reservation.ReasonExpired, 60*time.Second)
		t.Log(cond.Message)
		eventually(t, 30*time.Second, "late takes the node once the hold expired", func() (bool, error) { return boundPods(t, c, ns)["late"] == held[0], nil })
		require.NoError(t, c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Delete(ctx, "big", metav1.DeleteOptions{}))
	})

	t.Run("a failover restores the hold, with its start, once", func(t *testing.T) {
		ns := namespace(t, c)
		held, _ := setup(t, "f", ns, 0)
		nodes := []string{"f-r0-n0", "f-r0-n1", "f-r1-n0", "f-r1-n1"}
		before := reserved(t, c, ns, "big", metav1.ConditionTrue, reservation.ReasonHolding, 10*time.Second)
		// The record a new leader restores from is the same hold.
		pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "big", metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, pg.Status.Reservation, "no reservation record next to the Holding condition")
		assert.Equal(t, sandbox.RackLabel, pg.Status.Reservation.TopologyKey)
		assert.Equal(t, heldRack(t, before), pg.Status.Reservation.Domain)
		assert.Equal(t, before.LastTransitionTime.Unix(), pg.Status.Reservation.Since.Unix())
		c.StopScheduler()
		_, err = c.StartScheduler(ctx)
		require.NoError(t, err)
		deletePod(t, c, ns, fillerOn(nodes, held[0]))
		small(t, c, ns, "late", 0, held[0])
		note := failedSchedulingFor(t, c, ns, "late")
		assert.Contains(t, note, "reserved for", note)
		after := reserved(t, c, ns, "big", metav1.ConditionTrue, reservation.ReasonHolding, 10*time.Second)
		assert.Equal(t, heldRack(t, before), heldRack(t, after), "the same rack")
		assert.Equal(t, before.LastTransitionTime.Unix(), after.LastTransitionTime.Unix(), "the hold kept its start")
		deletePod(t, c, ns, fillerOn(nodes, held[1]))
		waitBound(t, c, ns, "big-", 2)
		reserved(t, c, ns, "big", metav1.ConditionFalse, reservation.ReasonReleasedBound, 30*time.Second)
		assert.Empty(t, boundPods(t, c, ns)["late"])
		pg, err = c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "big", metav1.GetOptions{})
		require.NoError(t, err)
		assert.Nil(t, pg.Status.Reservation, "the record outlived the hold")
	})

	t.Run("a record sent with the group itself is dropped: only status writers can claim a hold", func(t *testing.T) {
		ns := namespace(t, c)
		api := c.Phalanx.SchedulingV1alpha1().PodGroups(ns)
		forged := &v1alpha1.GroupReservation{TopologyKey: sandbox.RackLabel, Domain: "x-rack-0", Since: metav1.Now()}
		pg := gangPG("tenant", 2)
		pg.Status.Reservation = forged
		created, err := api.Create(ctx, pg, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Nil(t, created.Status.Reservation, "kept from a create")
		created.Status.Reservation = forged
		updated, err := api.Update(ctx, created, metav1.UpdateOptions{})
		require.NoError(t, err)
		assert.Nil(t, updated.Status.Reservation, "kept from an update of the object")
	})

	t.Run("a higher-priority gang takes the hold over", func(t *testing.T) {
		ns := namespace(t, c)
		setup(t, "o", ns, 0)
		createPriorityClasses(t, c, &schedulingv1.PriorityClass{
			ObjectMeta: metav1.ObjectMeta{Name: "resv-vip"}, Value: 100, PreemptionPolicy: ptr.To(corev1.PreemptNever)})
		t.Cleanup(func() { _ = c.Client.SchedulingV1().PriorityClasses().Delete(ctx, "resv-vip", metav1.DeleteOptions{}) })
		pg := gangPG("vip", 2)
		pg.Spec.PriorityClassName = "resv-vip"
		pg.Spec.SchedulingConstraints = &v1alpha1.PodGroupSchedulingConstraints{Topology: topo(sandbox.RackLabel)}
		createPodGroup(t, c, ns, pg)
		for i := 0; i < 2; i++ {
			createPods(t, c, ns, member{name: fmt.Sprintf("vip-%d", i), labels: inGroup("vip"), cpu: "4", priorityClass: "resv-vip"})
		}
		// Only one rack fits the share (2 of 4 nodes): vip holds, big no
		// longer does (TakenOver, then NotReserved while vip holds).
		vip := reserved(t, c, ns, "vip", metav1.ConditionTrue, reservation.ReasonHolding, 30*time.Second)
		t.Log(vip.Message)
		eventually(t, 30*time.Second, "big no longer holds", func() (bool, error) {
			pg, err := c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "big", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			cond := meta.FindStatusCondition(pg.Status.Conditions, reservation.ConditionReserved)
			return cond != nil && cond.Status == metav1.ConditionFalse, nil
		})
		for _, g := range []string{"vip", "big"} {
			require.NoError(t, c.Phalanx.SchedulingV1alpha1().PodGroups(ns).Delete(ctx, g, metav1.DeleteOptions{}))
		}
	})
}
