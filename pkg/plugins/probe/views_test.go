package probe_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// countedAffinity is upstream's InterPodAffinity, under its own name, with
// its Filter calls counted per node.
type countedAffinity struct {
	*interpodaffinity.InterPodAffinity
	mu    sync.Mutex
	calls map[string]int
}

func (c *countedAffinity) Filter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	c.mu.Lock()
	c.calls[ni.Node().Name]++
	c.mu.Unlock()
	return c.InterPodAffinity.Filter(ctx, state, pod, ni)
}

func (c *countedAffinity) taken() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = map[string]int{}
	return out
}

// liveWorld is a profile running upstream's InterPodAffinity over the
// scheduler's own cache and snapshot, so binds and node updates move
// generations as they do in a running scheduler.
type liveWorld struct {
	tb       testing.TB
	cache    schedcache.Cache
	snapshot *schedcache.Snapshot
	prober   *probe.Prober
	affinity *countedAffinity
	fw       framework.Framework
}

func newLiveWorld(tb testing.TB, nodes int) *liveWorld {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	w := &liveWorld{tb: tb, cache: schedcache.New(ctx, nil, false, false), snapshot: schedcache.NewEmptySnapshot()}
	for i := range nodes {
		name := fmt.Sprintf("n-%04d", i)
		w.cache.AddNode(klog.Background(), node(name, map[string]string{corev1.LabelHostname: name, corev1.LabelTopologyZone: fmt.Sprintf("z-%d", i%4)}))
	}
	factory := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := interpodaffinity.New(ctx, &config.InterPodAffinityArgs{HardPodAffinityWeight: 1}, h, feature.Features{})
		if err != nil {
			return nil, err
		}
		w.affinity = &countedAffinity{InterPodAffinity: p.(*interpodaffinity.InterPodAffinity), calls: map[string]int{}}
		return w.affinity, nil
	}
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterPluginAsExtensions(names.InterPodAffinity, factory, "PreFilter", "Filter"),
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "phalanx-scheduler",
		frameworkruntime.WithSnapshotSharedLister(w.snapshot),
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(fake.NewClientset(), 0)))
	require.NoError(tb, err)
	w.prober = probe.New(fw)
	// Filter calls are what these tests count.
	w.prober.FilterNodeByNode()
	w.fw = fw
	return w
}

// bind puts pod on a node in the cache, as the scheduler does once it
// assumes a pod.
func (w *liveWorld) bind(pod *corev1.Pod, node string) {
	w.tb.Helper()
	pod = pod.DeepCopy()
	pod.Spec.NodeName = node
	require.NoError(w.tb, w.cache.AddPod(klog.Background(), pod))
}

// infos brings the snapshot up to date with the cache, as each
// scheduling cycle does.
func (w *liveWorld) infos() []fwk.NodeInfo {
	w.tb.Helper()
	require.NoError(w.tb, w.cache.UpdateSnapshot(klog.Background(), w.snapshot))
	infos, err := w.snapshot.NodeInfos().List()
	require.NoError(w.tb, err)
	return infos
}

func (w *liveWorld) probe(key string, pod *corev1.Pod, crossNode bool) probe.Verdicts {
	w.tb.Helper()
	return w.probeOn(w.infos(), key, pod, crossNode)
}

func (w *liveWorld) probeOn(infos []fwk.NodeInfo, key string, pod *corev1.Pod, crossNode bool) probe.Verdicts {
	w.tb.Helper()
	v, err := w.prober.Nodes(context.Background(), key, pod, infos, crossNode)
	require.NoError(w.tb, err)
	return v
}

func labelled(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
}

// shunning is a pod that keeps pods labelled app=app off its domain.
func shunning(name, app, topologyKey string) *corev1.Pod {
	p := labelled(name, map[string]string{"role": "guard"})
	p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}, TopologyKey: topologyKey,
	}}}}
	return p
}

// TestBindsOfPlainPodsKeepVerdicts: a member without affinity terms of its
// own is judged by running pods' anti-affinity alone, so the verdicts of
// its probe hold across binds of pods without such terms, which move every
// node generation they touch: a gang waiting for room replans without
// probing the nodes others filled meanwhile. A bind of a pod with
// anti-affinity, or a change of the node object, does make the node be
// probed again; a member with terms of its own still goes by generation.
func TestBindsOfPlainPodsKeepVerdicts(t *testing.T) {
	const nodes = 100
	w := newLiveWorld(t, nodes)
	w.bind(shunning("guard", "train", corev1.LabelHostname), "n-0007")
	member := labelled("m-0", map[string]string{"app": "train"})
	refused := probe.Verdicts{"n-0007": {Plugin: names.InterPodAffinity, Reasons: interpodaffinity.ErrReasonExistingAntiAffinityRulesNotMatch}}

	assert.Equal(t, refused, w.probe("ns/g#shape", member, false))
	assert.Len(t, w.affinity.taken(), nodes, "the first probe asks every node")

	for i := range 50 {
		w.bind(labelled(fmt.Sprintf("plain-%d", i), map[string]string{"app": "web"}), fmt.Sprintf("n-%04d", i))
	}
	assert.Equal(t, refused, w.probe("ns/g#shape", member, false))
	assert.Empty(t, w.affinity.taken(), "binds of pods without anti-affinity change nothing the member is judged by")

	w.bind(shunning("guard-2", "train", corev1.LabelHostname), "n-0042")
	w.bind(shunning("guard-3", "db", corev1.LabelHostname), "n-0043")
	want := probe.Verdicts{"n-0007": refused["n-0007"], "n-0042": refused["n-0007"]}
	assert.Equal(t, want, w.probe("ns/g#shape", member, false))
	assert.Equal(t, map[string]int{"n-0042": 1, "n-0043": 1}, w.affinity.taken(), "the nodes that took pods with anti-affinity are probed again")

	old := node("n-0099", map[string]string{corev1.LabelHostname: "n-0099", corev1.LabelTopologyZone: "z-3"})
	updated := old.DeepCopy()
	updated.Labels["tier"] = "gold"
	w.cache.UpdateNode(klog.Background(), old, updated)
	assert.Equal(t, want, w.probe("ns/g#shape", member, false))
	assert.Equal(t, map[string]int{"n-0099": 1}, w.affinity.taken(), "an updated node object is probed again")

	t.Run("a member with terms of its own goes by generation", func(t *testing.T) {
		own := shunning("m-1", "web", corev1.LabelHostname)
		own.Labels["app"] = "train"
		w.probe("ns/h#shape", own, false)
		w.affinity.taken()
		for i := range 10 {
			w.bind(labelled(fmt.Sprintf("web-%d", i), map[string]string{"app": "web"}), fmt.Sprintf("n-%04d", 60+i))
		}
		v := w.probe("ns/h#shape", own, false)
		assert.Len(t, w.affinity.taken(), 10, "every node that took a pod is probed again: its term may match the new pod")
		for i := range 10 {
			assert.Contains(t, v, fmt.Sprintf("n-%04d", 60+i), "its own anti-affinity keeps it off the nodes the web pods went to")
		}
	})

	t.Run("a cross-node member keeps its verdicts until a view changes anywhere", func(t *testing.T) {
		w.bind(shunning("zone-guard", "batch", corev1.LabelTopologyZone), "n-0001")
		batch := labelled("m-2", map[string]string{"app": "batch"})
		v := w.probe("ns/z#shape", batch, true)
		assert.Len(t, v, nodes/4, "the guard's zone is closed to the member")
		w.affinity.taken()
		for i := range 20 {
			w.bind(labelled(fmt.Sprintf("more-%d", i), nil), fmt.Sprintf("n-%04d", 70+i))
		}
		assert.Equal(t, v, w.probe("ns/z#shape", batch, true))
		assert.Empty(t, w.affinity.taken(), "plain binds keep a cross-node member's verdicts")
		w.bind(shunning("guard-4", "db", corev1.LabelHostname), "n-0090")
		assert.Equal(t, v, w.probe("ns/z#shape", batch, true))
		assert.Len(t, w.affinity.taken(), nodes, "a pod with anti-affinity anywhere may close any domain: every node is probed again")
	})
}

// BenchmarkReprobeAfterPlainBinds is a gang replanning at 5,000 nodes
// while others bind: 50 plain pods bound between probes, 500 running pods
// with anti-affinity the member matches. filters/op is the nodes probed
// again per replan (0: the verdicts held across the binds).
func BenchmarkReprobeAfterPlainBinds(b *testing.B) {
	const nodes = 5000
	const binds = 1000
	w := newLiveWorld(b, nodes)
	for i := range 500 {
		w.bind(shunning(fmt.Sprintf("guard-%d", i), "train", corev1.LabelHostname), fmt.Sprintf("n-%04d", i*10))
	}
	member := labelled("m-0", map[string]string{"app": "train"})
	w.probe("ns/g#shape", member, false)
	w.affinity.taken()
	filtered := 0
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		for j := range binds {
			w.bind(labelled(fmt.Sprintf("plain-%d-%d", i, j), nil), fmt.Sprintf("n-%04d", (i*50+j)%nodes))
		}
		infos := w.infos()
		b.StartTimer()
		w.probeOn(infos, "ns/g#shape", member, false)
		filtered += len(w.affinity.taken())
	}
	b.ReportMetric(float64(filtered)/float64(b.N), "filters/op")
}
