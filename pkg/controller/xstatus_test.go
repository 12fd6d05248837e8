package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	xfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	phfake "github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned/fake"
)

func xPod(name, pg string, phase corev1.PodPhase, owners ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name),
			Labels: map[string]string{xv1alpha1.PodGroupLabel: pg}},
		Status: corev1.PodStatus{Phase: phase},
	}
	for _, o := range owners {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{Name: o})
	}
	return p
}

func xPods(phase corev1.PodPhase, names ...string) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(names))
	for _, n := range names {
		out = append(out, xPod(n, "pg", phase))
	}
	return out
}

func xGroup(minMember int32, phase xv1alpha1.PodGroupPhase) *xv1alpha1.PodGroup {
	return &xv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "pg", Namespace: ns},
		Spec:       xv1alpha1.PodGroupSpec{MinMember: minMember},
		Status:     xv1alpha1.PodGroupStatus{Phase: phase},
	}
}

// The phases scheduler-plugins' PodGroup controller (v0.34.7) enters, for
// the cases of its own unit and integration tests and the transitions its
// source defines.
func TestXPodGroupStatusFollowsSchedulerPlugins(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		group    *xv1alpha1.PodGroup
		pods     []*corev1.Pod
		phase    xv1alpha1.PodGroupPhase
		counts   [3]int32 // running, succeeded, failed
		occupied string
	}{
		{name: "a new group without pods is Pending", group: xGroup(3, ""), phase: xv1alpha1.PodGroupPending},
		{name: "group running", group: xGroup(2, xv1alpha1.PodGroupScheduling), pods: xPods(corev1.PodRunning, "pod1", "pod2"),
			phase: xv1alpha1.PodGroupRunning, counts: [3]int32{2, 0, 0}},
		{name: "group running, more than min member", group: xGroup(2, xv1alpha1.PodGroupScheduling), pods: xPods(corev1.PodRunning, "pod11", "pod21", "pod31", "pod41"),
			phase: xv1alpha1.PodGroupRunning, counts: [3]int32{4, 0, 0}},
		{name: "group failed", group: xGroup(2, xv1alpha1.PodGroupScheduling), pods: xPods(corev1.PodFailed, "pod1", "pod2"),
			phase: xv1alpha1.PodGroupFailed, counts: [3]int32{0, 0, 2}},
		{name: "group finished", group: xGroup(2, xv1alpha1.PodGroupScheduling), pods: xPods(corev1.PodSucceeded, "pod1", "pod2"),
			phase: xv1alpha1.PodGroupFinished, counts: [3]int32{0, 2, 0}},
		{name: "pending to scheduling once minMember pods exist", group: xGroup(2, xv1alpha1.PodGroupPending), pods: xPods(corev1.PodPending, "pod1", "pod2"),
			phase: xv1alpha1.PodGroupScheduling},
		{name: "pending to finished", group: xGroup(2, xv1alpha1.PodGroupPending), pods: xPods(corev1.PodSucceeded, "pod1", "pod2"),
			phase: xv1alpha1.PodGroupFinished, counts: [3]int32{0, 2, 0}},
		{name: "stays pending below minMember", group: xGroup(3, xv1alpha1.PodGroupPending), pods: xPods(corev1.PodRunning, "pod1", "pod2"),
			phase: xv1alpha1.PodGroupPending},
		{name: "running to pending when pods are gone below minMember", group: xGroup(4, xv1alpha1.PodGroupRunning), pods: xPods(corev1.PodPending, "pod101", "pod102"),
			phase: xv1alpha1.PodGroupPending},
		{name: "a new group whose pods exist, bound but not running, is Scheduling with zero counters", group: xGroup(3, ""), pods: xPods(corev1.PodPending, "t1-p1-1", "t1-p1-2", "t1-p1-3"),
			phase: xv1alpha1.PodGroupScheduling},
		{name: "one of three succeeded, two run: Running", group: xGroup(3, xv1alpha1.PodGroupRunning),
			pods:  append(xPods(corev1.PodSucceeded, "a"), xPods(corev1.PodRunning, "b", "c")...),
			phase: xv1alpha1.PodGroupRunning, counts: [3]int32{2, 1, 0}},
		{name: "one of three failed while two run: Failed", group: xGroup(3, xv1alpha1.PodGroupRunning),
			pods:  append(xPods(corev1.PodFailed, "a"), xPods(corev1.PodRunning, "b", "c")...),
			phase: xv1alpha1.PodGroupFailed, counts: [3]int32{2, 0, 1}},
		{name: "Finished is final", group: xGroup(2, xv1alpha1.PodGroupFinished), pods: xPods(corev1.PodRunning, "a", "b"),
			phase: xv1alpha1.PodGroupFinished},
		{name: "Failed is final", group: xGroup(2, xv1alpha1.PodGroupFailed),
			phase: xv1alpha1.PodGroupFailed},
		{name: "occupiedBy names the owners of a pod", group: xGroup(2, xv1alpha1.PodGroupPending),
			pods:  []*corev1.Pod{xPod("pod1", "pg", corev1.PodPending, "new-occupied-2", "new-occupied-1"), xPod("pod2", "pg", corev1.PodPending, "other")},
			phase: xv1alpha1.PodGroupScheduling, occupied: ns + "/new-occupied-1," + ns + "/new-occupied-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := XPodGroupStatus(tc.group, tc.pods, now)
			assert.Equal(t, tc.phase, got.Phase)
			assert.Equal(t, tc.counts, [3]int32{got.Running, got.Succeeded, got.Failed})
			assert.Equal(t, tc.occupied, got.OccupiedBy)
		})
	}

	t.Run("scheduleStartTime is set once, when the group first enters Scheduling", func(t *testing.T) {
		got := XPodGroupStatus(xGroup(2, xv1alpha1.PodGroupPending), xPods(corev1.PodPending, "a", "b"), now)
		assert.True(t, got.ScheduleStartTime.Equal(&metav1.Time{Time: now}))
		g := xGroup(2, xv1alpha1.PodGroupPending)
		g.Status.ScheduleStartTime = metav1.NewTime(now.Add(-time.Hour))
		got = XPodGroupStatus(g, xPods(corev1.PodPending, "a", "b"), now)
		assert.Equal(t, now.Add(-time.Hour), got.ScheduleStartTime.Time, "kept from the first time")
		got = XPodGroupStatus(xGroup(3, ""), nil, now)
		assert.True(t, got.ScheduleStartTime.IsZero(), "not while Pending")
	})
}

// The controller starts when discovery shows the CRD, writes the status
// with a merge patch of the status subresource, and leaves a cluster
// without the CRD alone.
func TestXStatusControllerFollowsDiscovery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	group := xGroup(2, "")
	x := noWatchList{xfake.NewSimpleClientset(group)}
	kube := kubefake.NewClientset(xPod("a", "pg", corev1.PodRunning, "job"), xPod("b", "pg", corev1.PodRunning, "job"))
	c, err := New(kube, phfake.NewSimpleClientset(), Options{StatusDelay: -1, SchedulerPlugins: x})
	require.NoError(t, err)
	disc := &lockedDiscovery{FakeDiscovery: kube.Discovery().(*fakediscovery.FakeDiscovery)}
	c.xstatus.disc = disc
	c.xstatus.every = 50 * time.Millisecond
	require.NoError(t, c.Start(ctx))
	time.Sleep(200 * time.Millisecond)
	assert.Nil(t, c.xstatus.current(), "not served: not running")
	for _, a := range x.Actions() {
		assert.NotEqual(t, "patch", a.GetVerb(), "nothing written while the CRD is not served")
	}

	disc.set([]*metav1.APIResourceList{{GroupVersion: xv1alpha1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: "podgroups", Namespaced: true, Kind: "PodGroup"}}}})
	require.Eventually(t, func() bool {
		pg, err := x.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "pg", metav1.GetOptions{})
		return err == nil && pg.Status.Phase == xv1alpha1.PodGroupRunning
	}, 10*time.Second, 20*time.Millisecond, "the group's status follows its pods once the CRD is served")
	pg, err := x.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "pg", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, int32(2), pg.Status.Running)
	assert.Equal(t, ns+"/job", pg.Status.OccupiedBy)
	assert.False(t, pg.Status.ScheduleStartTime.IsZero())
	patched := false
	for _, a := range x.Actions() {
		if a.GetVerb() == "patch" {
			assert.Equal(t, "status", a.GetSubresource(), "only the status subresource is written")
			patched = true
		}
	}
	assert.True(t, patched)

	disc.set(nil)
	require.Eventually(t, func() bool { return c.xstatus.current() == nil }, 10*time.Second, 20*time.Millisecond,
		"stopped once the CRD is gone")
}

// lockedDiscovery lets a test change what the fake discovery serves while
// the controller asks it from another goroutine.
type lockedDiscovery struct {
	mu sync.Mutex
	*fakediscovery.FakeDiscovery
}

func (d *lockedDiscovery) set(resources []*metav1.APIResourceList) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.Resources = resources
}

func (d *lockedDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.FakeDiscovery.ServerResourcesForGroupVersion(gv)
}

// noWatchList marks scheduler-plugins' fake clientset, generated before
// client-go's streaming list, as not serving it, as client-go's own fakes
// are marked.
type noWatchList struct{ *xfake.Clientset }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }
