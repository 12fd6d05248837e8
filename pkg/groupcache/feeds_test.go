package groupcache

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	xfake "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned/fake"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

const testNS = "ns"

func nativeKey(name string) groups.Key {
	return groups.Key{Dialect: groups.Native, Kind: groups.PodGroupKind, Namespace: testNS, Name: name}
}

func xKey(name string) groups.Key {
	return groups.Key{Dialect: groups.Coscheduling, Kind: groups.PodGroupKind, Namespace: testNS, Name: name}
}

// specPod is a pod in namespace testNS attached to a group by labels or,
// with group set, by spec.schedulingGroup.
func specPod(name string, labels map[string]string, group string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name, UID: types.UID(name), Labels: labels}}
	if group != "" {
		p.Spec.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: &group}
	}
	return p
}

// noWatchList marks scheduler-plugins' fake clientset, generated before
// client-go's streaming list, as not serving it, as client-go's own fakes
// are marked.
type noWatchList struct{ *xfake.Clientset }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

func servedResources(resources ...string) []*metav1.APIResourceList {
	byGV := map[string]*metav1.APIResourceList{}
	var out []*metav1.APIResourceList
	for i := 0; i+1 < len(resources); i += 2 {
		gv, name := resources[i], resources[i+1]
		l := byGV[gv]
		if l == nil {
			l = &metav1.APIResourceList{GroupVersion: gv}
			byGV[gv] = l
			out = append(out, l)
		}
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: name})
	}
	return out
}

// dialectClients are fake API clients holding one group of each optional
// dialect: an upstream PodGroup "up" and a scheduler-plugins one "sp".
func dialectClients() (*kubefake.Clientset, noWatchList, *fakediscovery.FakeDiscovery) {
	kube := kubefake.NewSimpleClientset(&schedv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "up"},
		Spec: schedv1beta1.PodGroupSpec{SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{
			Gang: &schedv1beta1.GangSchedulingPolicy{MinCount: 2}}},
	})
	x := noWatchList{xfake.NewSimpleClientset(&xv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "sp"}, Spec: xv1alpha1.PodGroupSpec{MinMember: 3}})}
	return kube, x, kube.Discovery().(*fakediscovery.FakeDiscovery)
}

// Informers of the optional dialects run while the API server serves their
// resources: absent at start, a group of the dialect is reported as not
// served; when the API appears, its objects arrive; when it goes away,
// its groups are dropped and the scheduler keeps running.
func TestDialectFeedsFollowDiscovery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kube, x, disc := dialectClients()
	f := NewFed()
	fs := newFeeds(f, disc, kube, x)
	f.feeds = fs

	fs.sync(ctx)
	assert.False(t, f.Served(groups.Native))
	assert.False(t, f.Served(groups.Coscheduling))
	pod := specPod("n", nil, "up")
	f.AddOrUpdatePod(pod)
	_, _, err := f.ChainOf(pod)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the API server does not serve scheduling.k8s.io groups")
	xpod := specPod("x", map[string]string{xv1alpha1.PodGroupLabel: "sp"}, "")
	f.AddOrUpdatePod(xpod)
	_, _, err = f.ChainOf(xpod)
	require.Error(t, err)
	assert.Equal(t, "PodGroup.scheduling.x-k8s.io "+testNS+"/sp not found: create it or fix the pod's scheduling.x-k8s.io/pod-group label (the API server does not serve scheduling.x-k8s.io PodGroups: install scheduler-plugins' PodGroup CRD, manifests/components/scheduler-plugins-crd)",
		err.Error(), "the missing CRD is named, with where to find it")

	disc.Resources = servedResources(
		"scheduling.k8s.io/v1beta1", "podgroups",
		"scheduling.k8s.io/v1alpha3", "compositepodgroups",
		"scheduling.x-k8s.io/v1alpha1", "podgroups")
	fs.sync(ctx)
	assert.True(t, f.Served(groups.Native))
	assert.True(t, f.Served(groups.Coscheduling))
	require.NotNil(t, f.NativePodGroups())
	require.NotNil(t, f.XPodGroups())
	info, ok := f.Get(nativeKey("up"))
	require.True(t, ok, "the upstream PodGroup is read once its API is served")
	assert.Equal(t, 2, info.MinCount)
	info, ok = f.Get(xKey("sp"))
	require.True(t, ok, "the scheduler-plugins PodGroup is read once its CRD is served")
	assert.Equal(t, 3, info.MinCount)

	_, err = kube.SchedulingV1beta1().PodGroups(testNS).Create(ctx, &schedv1beta1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "later"},
		Spec:       schedv1beta1.PodGroupSpec{SchedulingPolicy: schedv1beta1.PodGroupSchedulingPolicy{Basic: &schedv1beta1.BasicSchedulingPolicy{}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := f.Get(nativeKey("later")); return ok }, 5*time.Second, 10*time.Millisecond)

	disc.Resources = servedResources("scheduling.x-k8s.io/v1alpha1", "podgroups")
	fs.sync(ctx)
	assert.False(t, f.Served(groups.Native))
	assert.Nil(t, f.NativePodGroups())
	_, ok = f.Get(nativeKey("up"))
	assert.False(t, ok, "groups of a dialect no longer served are dropped")
	_, ok = f.Get(xKey("sp"))
	assert.True(t, ok, "the other dialects keep their groups")
}

// The first sync runs while the scheduler builds its profiles, before its
// own informers start, so what it waits for is paid by every start's first
// gang. The served dialects' informers are waited for together on their
// done channels: in a synctest bubble, where the clock moves only when
// every goroutine sleeps, syncing three feeds takes no time at all, where
// client-go's polling wait slept 100ms per feed.
func TestDialectFeedsSyncWithoutSleeping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		kube, x, disc := dialectClients()
		disc.Resources = servedResources(
			"scheduling.k8s.io/v1beta1", "podgroups",
			"scheduling.k8s.io/v1alpha3", "compositepodgroups",
			"scheduling.x-k8s.io/v1alpha1", "podgroups")
		f := NewFed()
		fs := newFeeds(f, disc, kube, x)
		f.feeds = fs

		start := time.Now()
		fs.sync(ctx)
		took := time.Since(start)

		assert.Zero(t, took, "the feeds' first sync slept")
		assert.True(t, f.Served(groups.Native))
		assert.True(t, f.Served(groups.Coscheduling))
		_, ok := f.Get(nativeKey("up"))
		assert.True(t, ok, "the upstream PodGroup is in the cache when sync returns")
		_, ok = f.Get(xKey("sp"))
		assert.True(t, ok, "the scheduler-plugins PodGroup is in the cache when sync returns")

		// The bubble ends only when the informers' goroutines have.
		fs.stopAll()
		cancel()
		synctest.Wait()
	})
}
