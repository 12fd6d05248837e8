package probe_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/phalanx-sched/phalanx/pkg/plugins/gang"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
	"github.com/phalanx-sched/phalanx/pkg/plugins/topology"
)

// The framework records its metrics on every plugin call.
func init() { metrics.Register() }

// spy is a PreFilter and Filter plugin that refuses a node when refuse
// says why, and records what the framework hands it.
type spy struct {
	name   string
	refuse func(pod *corev1.Pod, ni fwk.NodeInfo) string

	mu       sync.Mutex
	filtered map[string]int // node -> Filter calls
	// inProbe counts the calls whose cycle state a probe marked, of all
	// calls; state is the last state a Filter saw.
	inProbe, calls int
	state          fwk.CycleState
	pods           []*corev1.Pod
}

func newSpy(name string, refuse func(*corev1.Pod, fwk.NodeInfo) string) *spy {
	return &spy{name: name, refuse: refuse, filtered: map[string]int{}}
}

func (s *spy) Name() string { return s.name }

func (s *spy) PreFilter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	s.record(state, pod)
	return nil, nil
}

func (s *spy) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

func (s *spy) Filter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	s.record(state, pod)
	s.mu.Lock()
	s.filtered[ni.Node().Name]++
	s.state = state
	s.mu.Unlock()
	if s.refuse != nil {
		if why := s.refuse(pod, ni); why != "" {
			return fwk.NewStatus(fwk.Unschedulable, why)
		}
	}
	return nil
}

func (s *spy) record(state fwk.CycleState, pod *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if probe.Is(state) {
		s.inProbe++
	}
	s.pods = append(s.pods, pod)
}

// filterCalls returns the Filter calls per node since the last call.
func (s *spy) filterCalls() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.filtered
	s.filtered = map[string]int{}
	return out
}

func (s *spy) factory() frameworkruntime.PluginFactory {
	return func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) { return s, nil }
}

func pluginOf(p fwk.Plugin) frameworkruntime.PluginFactory {
	return func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) { return p, nil }
}

// newFramework builds a profile of the given plugins over a snapshot of
// nodes and the pods running on them.
func newFramework(t testing.TB, nodes []*corev1.Node, running []*corev1.Pod, plugins ...tf.RegisterPluginFunc) (framework.Framework, []fwk.NodeInfo) {
	t.Helper()
	snapshot := schedcache.NewSnapshot(running, nodes)
	// A profile needs a queue sort and a binder; neither takes part.
	plugins = append(plugins,
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New))
	fw, err := tf.NewFramework(context.Background(), plugins, "phalanx-scheduler", frameworkruntime.WithSnapshotSharedLister(snapshot))
	require.NoError(t, err)
	infos, err := snapshot.NodeInfos().List()
	require.NoError(t, err)
	return fw, infos
}

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110"),
	}}}
}

func member(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Labels: map[string]string{"scheduling.phalanx.dev/pod-group": "g"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		}}}},
	}
}

func nodeInfo(t *testing.T, infos []fwk.NodeInfo, name string) *framework.NodeInfo {
	t.Helper()
	for _, ni := range infos {
		if ni.Node().Name == name {
			return ni.(*framework.NodeInfo)
		}
	}
	t.Fatalf("no node %s", name)
	return nil
}

// TestVerdictsAreCachedPerNodeGeneration: a probe's verdicts are reused for
// every node whose NodeInfo generation has not moved, per probe key; a pod
// whose constraints reach across nodes reuses nothing once any node moved.
// Refusals by the plugins the caller models itself are left out.
func TestVerdictsAreCachedPerNodeGeneration(t *testing.T) {
	refuser := newSpy("Refuser", func(_ *corev1.Pod, ni fwk.NodeInfo) string {
		if ni.Node().Labels["refuse"] == "yes" {
			return "label says no"
		}
		return ""
	})
	modelled := newSpy("Modelled", func(_ *corev1.Pod, ni fwk.NodeInfo) string {
		if ni.Node().Name == "n-2" {
			return "no room"
		}
		return ""
	})
	nodes := []*corev1.Node{node("n-0", nil), node("n-1", map[string]string{"refuse": "yes"}), node("n-2", nil), node("n-3", nil)}
	fw, infos := newFramework(t, nodes, nil,
		tf.RegisterPluginAsExtensions(refuser.name, refuser.factory(), "PreFilter", "Filter"),
		tf.RegisterPluginAsExtensions(modelled.name, modelled.factory(), "Filter"))
	pr := probe.New(fw, modelled.name)
	ctx := context.Background()
	pod := member("m-0")
	all := map[string]int{"n-0": 1, "n-1": 1, "n-2": 1, "n-3": 1}

	v, err := pr.Nodes(ctx, "g#shape", pod, infos, false)
	require.NoError(t, err)
	assert.Equal(t, probe.Verdicts{"n-1": {Plugin: "Refuser", Reasons: "label says no"}}, v, "the modelled plugin's refusal of n-2 is the caller's to count")
	assert.Equal(t, all, refuser.filterCalls())

	v, err = pr.Nodes(ctx, "g#shape", pod, infos, false)
	require.NoError(t, err)
	assert.Equal(t, probe.Verdicts{"n-1": {Plugin: "Refuser", Reasons: "label says no"}}, v)
	assert.Empty(t, refuser.filterCalls(), "no node moved: every verdict is reused")

	n3 := nodeInfo(t, infos, "n-3")
	changed := n3.Node().DeepCopy()
	changed.Labels = map[string]string{"refuse": "yes"}
	n3.SetNode(changed)
	v, err = pr.Nodes(ctx, "g#shape", pod, infos, false)
	require.NoError(t, err)
	assert.Equal(t, probe.Verdicts{"n-1": {Plugin: "Refuser", Reasons: "label says no"}, "n-3": {Plugin: "Refuser", Reasons: "label says no"}}, v)
	assert.Equal(t, map[string]int{"n-3": 1}, refuser.filterCalls(), "only the node whose generation moved is probed again")

	_, err = pr.Nodes(ctx, "g#other-shape", pod, infos, false)
	require.NoError(t, err)
	assert.Equal(t, all, refuser.filterCalls(), "verdicts are kept per probe key")

	_, err = pr.Nodes(ctx, "g#shape", pod, infos, true)
	require.NoError(t, err)
	assert.Empty(t, refuser.filterCalls(), "an unchanged snapshot answers a cross-node pod too")
	nodeInfo(t, infos, "n-0").AddPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", UID: "other"}, Spec: corev1.PodSpec{NodeName: "n-0"}})
	_, err = pr.Nodes(ctx, "g#shape", pod, infos, true)
	require.NoError(t, err)
	assert.Equal(t, all, refuser.filterCalls(), "a pod pinned to another node can change a cross-node verdict anywhere")
	_, err = pr.Nodes(ctx, "g#shape", pod, infos, false)
	require.NoError(t, err)
	assert.Empty(t, refuser.filterCalls(), "the cross-node run refreshed every node")

	pr.Forget("g#")
	_, err = pr.Nodes(ctx, "g#shape", pod, infos, false)
	require.NoError(t, err)
	assert.Equal(t, all, refuser.filterCalls(), "a forgotten group starts over")
}

// TestPhalanxPluginsStandAsideInAProbe: the profile's own plugins run in a
// probe cycle, on a copy of the member that asks for no resources, and
// Phalanx's plugins see that the cycle is a probe and do nothing: zero
// values of them, which would fail on any real work, are part of the
// profile here.
func TestPhalanxPluginsStandAsideInAProbe(t *testing.T) {
	watcher := newSpy("Watcher", nil)
	nodes := []*corev1.Node{node("n-0", nil), node("n-1", nil)}
	fw, infos := newFramework(t, nodes, nil,
		tf.RegisterPluginAsExtensions(gang.Name, pluginOf(&gang.Gang{}), "PreFilter"),
		tf.RegisterPluginAsExtensions(topology.Name, pluginOf(&topology.Topology{}), "PreFilter", "Filter"),
		tf.RegisterPluginAsExtensions(watcher.name, watcher.factory(), "PreFilter", "Filter"))
	pr := probe.New(fw)
	pod := member("m-0")

	v, err := pr.Nodes(context.Background(), "g#shape", pod, infos, false)
	require.NoError(t, err)
	assert.Empty(t, v, "no plugin refused a node")
	assert.Equal(t, 3, watcher.calls, "PreFilter once, Filter per node")
	assert.Equal(t, watcher.calls, watcher.inProbe, "every call saw a probe's cycle state")
	for _, seen := range watcher.pods {
		assert.NotEqual(t, pod.UID, seen.UID, "the probe judges a copy, not the member")
		assert.Empty(t, seen.Spec.Containers[0].Resources.Requests, "room is the planner's to count")
	}
	assert.NotEmpty(t, pod.Spec.Containers[0].Resources.Requests, "the member itself is untouched")

	// Skipped in PreFilter, the topology plugin's Filter is not called by
	// the framework; called on a probe's state, it stands aside too.
	assert.Nil(t, (&topology.Topology{}).Filter(context.Background(), watcher.state, pod, infos[0]))
	assert.False(t, probe.Is(framework.NewCycleState()), "a scheduling cycle is not a probe")
}

// TestBlockersFollowThePerNodeReprieveRule: the pods that block a node are
// found as upstream's preemption does per node: every pod the caller may
// evict comes off a copy of the node; if the profile's filters then pass,
// they go back one at a time, highest priority first, and those that make
// the filters fail again are the blockers. Only pods the caller may evict
// (lower priority, not the group's own) are ever taken off; budgets play
// no part here (the victim search weighs them).
func TestBlockersFollowThePerNodeReprieveRule(t *testing.T) {
	// Crowd refuses a node that already holds three pods labelled crowd.
	crowd := newSpy("Crowd", func(_ *corev1.Pod, ni fwk.NodeInfo) string {
		n := 0
		for _, pi := range ni.GetPods() {
			if pi.GetPod().Labels["crowd"] == "yes" {
				n++
			}
		}
		if n >= 3 {
			return fmt.Sprintf("%d crowd pods", n)
		}
		return ""
	})
	running := func(name string, priority int32, isCrowd bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Labels: map[string]string{}},
			Spec: corev1.PodSpec{NodeName: "n-0", Priority: &priority}}
		if isCrowd {
			p.Labels["crowd"] = "yes"
		}
		return p
	}
	pods := []*corev1.Pod{
		running("c1", 1, true), running("c2", 2, true), running("c3", 3, true),
		running("plain", 1, false), running("high", 100, true),
	}
	fw, infos := newFramework(t, []*corev1.Node{node("n-0", nil)}, pods,
		tf.RegisterPluginAsExtensions(crowd.name, crowd.factory(), "PreFilter", "Filter"))
	pr := probe.New(fw)
	ni := infos[0]
	names := func(ps []*corev1.Pod) []string {
		out := make([]string, 0, len(ps))
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	below := func(prio int32) func(*corev1.Pod) bool {
		return func(p *corev1.Pod) bool { return *p.Spec.Priority < prio }
	}
	ctx := context.Background()

	// Off: c1, c2, c3, plain; the node then holds one crowd pod (high).
	// Back, highest first: c3 (two crowd pods, passes), c2 (three,
	// refused: blocker), c1 (refused: blocker), plain (passes).
	blockers, ok, err := pr.Blockers(ctx, member("m-0"), ni, below(50))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, []string{"c2", "c1"}, names(blockers), "the lowest priorities are evicted, the highest reprieved")
	assert.Len(t, ni.GetPods(), 5, "the snapshot's node is left as it was")

	_, ok, err = pr.Blockers(ctx, member("m-0"), ni, below(2))
	require.NoError(t, err)
	assert.False(t, ok, "with only c1 evictable the node stays refused: high and c2, c3 outrank the member")

	blockers, ok, err = pr.Blockers(ctx, member("m-0"), ni, func(p *corev1.Pod) bool { return p.Name != "high" && *p.Spec.Priority < 3 })
	require.NoError(t, err)
	require.True(t, ok, "c1 and c2 off leaves two crowd pods")
	assert.Equal(t, []string{"c2", "c1"}, names(blockers), "c3 may not be evicted, so both others must go")

	_, ok, err = pr.Blockers(ctx, member("m-0"), ni, func(*corev1.Pod) bool { return false })
	require.NoError(t, err)
	assert.False(t, ok, "nothing evictable clears nothing")
}

// skipper is a filter that skips every pod at PreFilter, as upstream's
// NodeDeclaredFeatures does for pods that need no declared node feature,
// and would refuse every node if its Filter ran.
type skipper struct{ spy }

func (s *skipper) PreFilter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	s.record(state, pod)
	return nil, fwk.NewStatus(fwk.Skip)
}

// TestFiltersThatSkipThePodAreNotProbed: a probe wanted only for filters
// the caller does not model runs no Filter when each of them skips the pod
// at PreFilter, since the scheduling cycle would not run them either; a
// filter that does not skip is probed on every node as before.
func TestFiltersThatSkipThePodAreNotProbed(t *testing.T) {
	skip := &skipper{spy: *newSpy("Skipper", func(*corev1.Pod, fwk.NodeInfo) string { return "needs a feature" })}
	refuser := newSpy("Refuser", func(_ *corev1.Pod, ni fwk.NodeInfo) string {
		if ni.Node().Name == "n-1" {
			return "label says no"
		}
		return ""
	})
	nodes := []*corev1.Node{node("n-0", nil), node("n-1", nil), node("n-2", nil)}
	fw, infos := newFramework(t, nodes, nil,
		tf.RegisterPluginAsExtensions(skip.name, pluginOf(skip), "PreFilter", "Filter"),
		tf.RegisterPluginAsExtensions(refuser.name, refuser.factory(), "PreFilter", "Filter"))
	pr := probe.New(fw)
	ctx := context.Background()
	pod := member("m-0")

	v, err := pr.Nodes(ctx, "g#shape", pod, infos, false, "Skipper")
	require.NoError(t, err)
	assert.Empty(t, v, "the only filter asked about skipped the pod")
	assert.Empty(t, refuser.filterCalls(), "no node was probed")
	assert.Empty(t, skip.filterCalls())

	v, err = pr.Nodes(ctx, "g#shape", pod, infos, false, "Skipper", "Refuser")
	require.NoError(t, err)
	assert.Equal(t, probe.Verdicts{"n-1": {Plugin: "Refuser", Reasons: "label says no"}}, v, "Refuser does not skip: every node is probed")
	assert.Equal(t, map[string]int{"n-0": 1, "n-1": 1, "n-2": 1}, refuser.filterCalls())
	assert.Empty(t, skip.filterCalls(), "the framework runs no Filter of a plugin that skipped")
}

// TestModelledFiltersDoNotRun: the framework stops at a node's first
// refusal. A filter whose refusals the caller models (here "Full", in front)
// must not hide one it does not model ("Sibling") behind it: the caller
// drops the modelled verdict and would take the node for usable once room
// is made. So modelled filters are not run at all, in Nodes and Blockers.
func TestModelledFiltersDoNotRun(t *testing.T) {
	full := newSpy("Full", func(*corev1.Pod, fwk.NodeInfo) string { return "Too many pods" })
	sibling := newSpy("Sibling", func(_ *corev1.Pod, ni fwk.NodeInfo) string {
		if ni.Node().Name == "n-0" {
			return "a sibling runs here"
		}
		return ""
	})
	nodes := []*corev1.Node{node("n-0", nil), node("n-1", nil)}
	running := []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "low", UID: "low"}, Spec: corev1.PodSpec{NodeName: "n-0"}}}
	fw, infos := newFramework(t, nodes, running,
		tf.RegisterPluginAsExtensions(full.name, full.factory(), "PreFilter", "Filter"),
		tf.RegisterPluginAsExtensions(sibling.name, sibling.factory(), "PreFilter", "Filter"))
	pr := probe.New(fw, full.name)

	v, err := pr.Nodes(context.Background(), "g#shape", member("m-0"), infos, false)
	require.NoError(t, err)
	require.Contains(t, v, "n-0", "the sibling's refusal is seen behind the modelled one")
	assert.Equal(t, "Sibling", v["n-0"].Plugin)
	assert.NotContains(t, v, "n-1")
	assert.Empty(t, full.filterCalls(), "a modelled filter is not run")

	_, ok, err := pr.Blockers(context.Background(), member("m-0"), nodeInfo(t, infos, "n-0"), func(*corev1.Pod) bool { return true })
	require.NoError(t, err)
	assert.False(t, ok, "evicting the pod beside the sibling clears nothing")
	assert.Empty(t, full.filterCalls())
}
