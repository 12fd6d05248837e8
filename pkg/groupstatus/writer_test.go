package groupstatus

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned/fake"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

const ns = "team"

func phalanxKey(name string) groups.Key {
	return groups.Key{Kind: groups.PodGroupKind, Namespace: ns, Name: name}
}

func nativeKey(name string) groups.Key {
	return groups.Key{Dialect: groups.Native, Kind: groups.PodGroupKind, Namespace: ns, Name: name}
}

func unschedulable(msg string) metav1.Condition {
	return Condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonUnschedulable, msg)
}

// A group that cannot be placed also gets PodGroupInitiallyScheduled=False
// with the same reason and message, as upstream writes before a group's
// first success, in Phalanx's dialect and in upstream's.
func TestUnschedulableGroupGetsInitiallyScheduledFalse(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	px := fake.NewSimpleClientset(&v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "px"}})
	kube := kubefake.NewSimpleClientset(&schedv1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "up", Generation: 3}})
	w := newWriter(ctx, px, kube, groupcache.NewFed())

	const msg = "no topology.phalanx.dev/rack domain fits 3 pods: best r0 fits 2 (short 4 cpu)"
	w.Set(phalanxKey("px"), unschedulable(msg))
	w.Set(nativeKey("up"), unschedulable(msg))

	require.Eventually(t, func() bool {
		pg, err := px.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "px", metav1.GetOptions{})
		return err == nil && meta.FindStatusCondition(pg.Status.Conditions, v1alpha1.PodGroupInitiallyScheduled) != nil
	}, 10*time.Second, 20*time.Millisecond, "the Phalanx PodGroup gets both conditions")
	pg, err := px.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "px", metav1.GetOptions{})
	require.NoError(t, err)
	for _, typ := range []string{v1alpha1.PodGroupSchedulable, v1alpha1.PodGroupInitiallyScheduled} {
		c := meta.FindStatusCondition(pg.Status.Conditions, typ)
		require.NotNil(t, c, typ)
		assert.Equal(t, metav1.ConditionFalse, c.Status, typ)
		assert.Equal(t, v1alpha1.ReasonUnschedulable, c.Reason, typ)
		assert.Equal(t, msg, c.Message, typ)
	}

	require.Eventually(t, func() bool {
		up, err := kube.SchedulingV1beta1().PodGroups(ns).Get(ctx, "up", metav1.GetOptions{})
		return err == nil && meta.FindStatusCondition(up.Status.Conditions, schedv1beta1.PodGroupInitiallyScheduled) != nil
	}, 10*time.Second, 20*time.Millisecond, "the upstream PodGroup gets its own condition type")
	up, err := kube.SchedulingV1beta1().PodGroups(ns).Get(ctx, "up", metav1.GetOptions{})
	require.NoError(t, err)
	c := meta.FindStatusCondition(up.Status.Conditions, schedv1beta1.PodGroupInitiallyScheduled)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, schedv1beta1.PodGroupReasonUnschedulable, c.Reason, "upstream's reason constant")
	assert.Equal(t, msg, c.Message)
	assert.Equal(t, int64(3), c.ObservedGeneration, "observedGeneration is stamped as upstream does")
}

// PodGroupInitiallyScheduled records the first success: a later failure
// changes Schedulable but never turns it back to False.
func TestInitiallyScheduledNeverRegresses(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "done"}}
	done.Status.Conditions = []metav1.Condition{
		Condition(v1alpha1.PodGroupSchedulable, metav1.ConditionTrue, v1alpha1.ReasonScheduled, "4 pods bound"),
		Condition(v1alpha1.PodGroupInitiallyScheduled, metav1.ConditionTrue, v1alpha1.ReasonScheduled, "4 pods bound"),
	}
	px := fake.NewSimpleClientset(done)
	w := newWriter(ctx, px, kubefake.NewSimpleClientset(), groupcache.NewFed())

	w.Set(phalanxKey("done"), unschedulable("member w-4 fits on no node"))
	require.Eventually(t, func() bool {
		pg, err := px.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "done", metav1.GetOptions{})
		c := meta.FindStatusCondition(pg.Status.Conditions, v1alpha1.PodGroupSchedulable)
		return err == nil && c.Status == metav1.ConditionFalse
	}, 10*time.Second, 20*time.Millisecond)
	pg, err := px.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "done", metav1.GetOptions{})
	require.NoError(t, err)
	c := meta.FindStatusCondition(pg.Status.Conditions, v1alpha1.PodGroupInitiallyScheduled)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, "4 pods bound", c.Message)
}

// scheduler-plugins' PodGroups have no conditions: nothing is written to
// them (their phases are phalanx-controller's). What their Schedulable
// condition would say is an event on the PodGroup, once per change.
func TestSchedulerPluginsGroupsGetEventsNotConditions(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	px := fake.NewSimpleClientset()
	kube := kubefake.NewSimpleClientset()
	w := newWriter(ctx, px, kube, groupcache.NewFed())
	events := record.NewFakeRecorder(10)
	events.IncludeObject = true
	w.events = events
	x := groups.Key{Dialect: groups.Coscheduling, Kind: groups.PodGroupKind, Namespace: ns, Name: "x"}

	const wait = "waiting for free capacity: minResources of PodGroup.scheduling.x-k8s.io team/x asks for 8 cpu in total; the cluster has 4 cpu free (short 4 cpu)"
	w.Set(x, unschedulable(wait))
	select {
	case e := <-events.Events:
		assert.Contains(t, e, "Warning Unschedulable "+wait)
		assert.Contains(t, e, "involvedObject{kind=PodGroup,apiVersion=scheduling.x-k8s.io/v1alpha1}", "the event is about the scheduler-plugins PodGroup")
	case <-time.After(10 * time.Second):
		t.Fatal("no event on the scheduler-plugins PodGroup")
	}
	w.Set(x, unschedulable(wait))
	w.Set(x, Condition(v1alpha1.PodGroupSchedulable, metav1.ConditionTrue, v1alpha1.ReasonScheduled, "4 pods bound"))
	select {
	case e := <-events.Events:
		assert.Contains(t, e, "Normal Scheduled 4 pods bound", "an unchanged condition is not told twice")
	case <-time.After(10 * time.Second):
		t.Fatal("no event once the group is bound")
	}
	time.Sleep(2 * settleDelay)
	assert.Empty(t, events.Events)
	assert.Empty(t, writes(px.Actions())+writes(kube.Actions()), "no condition is written")
}

func writes(actions []clienttesting.Action) int {
	n := 0
	for _, a := range actions {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			n++
		}
	}
	return n
}

// The reservation record goes out in the same status update as the
// conditions; a group the scheduler states no record for keeps the one it
// has (a new leader must not erase what it has yet to restore), and an
// unchanged record (times kept by the API to the second) is not written
// again.
func TestReservationRecordIsWrittenWithTheConditions(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	since := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	kept := &v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kept"}}
	kept.Status.Reservation = &v1alpha1.GroupReservation{TopologyKey: "rack", Domain: "r0", Since: metav1.NewTime(since)}
	px := fake.NewSimpleClientset(&v1alpha1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"}}, kept)
	w := newWriter(ctx, px, kubefake.NewSimpleClientset(), groupcache.NewFed())
	get := func(name string) *v1alpha1.PodGroup {
		pg, err := px.SchedulingV1alpha1().PodGroups(ns).Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return pg
	}

	holding := Condition("Reserved", metav1.ConditionTrue, "Holding", "holds rack=r1")
	w.Set(phalanxKey("big"), holding)
	w.SetReservation(phalanxKey("big"), &v1alpha1.GroupReservation{TopologyKey: "rack", Domain: "r1", Since: metav1.NewTime(since.Add(300 * time.Millisecond))})
	w.Set(phalanxKey("kept"), unschedulable("short 4 cpu"))
	require.Eventually(t, func() bool {
		return get("big").Status.Reservation != nil && meta.FindStatusCondition(get("kept").Status.Conditions, v1alpha1.PodGroupSchedulable) != nil
	}, 10*time.Second, 20*time.Millisecond)
	big := get("big")
	assert.Equal(t, "r1", big.Status.Reservation.Domain)
	assert.NotNil(t, meta.FindStatusCondition(big.Status.Conditions, "Reserved"), "the condition came with the record")
	assert.Equal(t, kept.Status.Reservation.Domain, get("kept").Status.Reservation.Domain, "a record the scheduler stated nothing about is kept")
	assert.Equal(t, 2, writes(px.Actions()), "one update per group")

	// The same record, as the API returns it (to the second), is no change.
	w.SetReservation(phalanxKey("big"), &v1alpha1.GroupReservation{TopologyKey: "rack", Domain: "r1", Since: metav1.NewTime(since)})
	time.Sleep(3 * settleDelay)
	assert.Equal(t, 2, writes(px.Actions()), "an unchanged record written again")
	w.Set(phalanxKey("big"), Condition("Reserved", metav1.ConditionFalse, "Bound", "the gang bound"))
	require.Eventually(t, func() bool {
		return meta.IsStatusConditionFalse(get("big").Status.Conditions, "Reserved")
	}, 10*time.Second, 20*time.Millisecond)
	assert.NotNil(t, get("big").Status.Reservation)
	w.SetReservation(phalanxKey("big"), nil)
	require.Eventually(t, func() bool { return get("big").Status.Reservation == nil }, 10*time.Second, 20*time.Millisecond, "a nil record clears it")
}
