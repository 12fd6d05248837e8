package probe_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// tenth is a PreFilter and Filter plugin that refuses one node in ten and
// only counts its Filter calls, so the heap holds the cache and little
// else.
type tenth struct{ calls atomic.Int64 }

func (*tenth) Name() string { return "Tenth" }
func (*tenth) PreFilter(context.Context, fwk.CycleState, *corev1.Pod, []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	return nil, nil
}
func (*tenth) PreFilterExtensions() fwk.PreFilterExtensions { return nil }
func (f *tenth) Filter(_ context.Context, _ fwk.CycleState, _ *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	f.calls.Add(1)
	if name := ni.Node().Name; name[len(name)-1] == '7' {
		return fwk.NewStatus(fwk.Unschedulable, "node(s) didn't match pod anti-affinity rules")
	}
	return nil
}

// cacheWorld is a profile over many nodes whose filter refuses one node in
// ten, so verdicts are kept for refusals and passes alike.
func cacheWorld(tb testing.TB, nodes int) (*probe.Prober, []fwk.NodeInfo, *tenth) {
	tb.Helper()
	list := make([]*corev1.Node, nodes)
	for i := range list {
		list[i] = node(fmt.Sprintf("node-%05d", i), nil)
	}
	filter := &tenth{}
	fw, infos := newFramework(tb, list, nil, tf.RegisterPluginAsExtensions("Tenth", pluginOf(filter), "PreFilter", "Filter"))
	return probe.New(fw), infos, filter
}

// fill probes shapes distinct shapes, as as many groups would.
func fill(tb testing.TB, pr *probe.Prober, infos []fwk.NodeInfo, shapes int) {
	tb.Helper()
	for i := range shapes {
		probeShape(tb, pr, infos, fmt.Sprintf("ns/g-%d#shape", i))
	}
}

func probeShape(tb testing.TB, pr *probe.Prober, infos []fwk.NodeInfo, key string) probe.Verdicts {
	tb.Helper()
	v, err := pr.Nodes(context.Background(), key, member("m-0"), infos, false)
	require.NoError(tb, err)
	return v
}

// TestVerdictCacheStaysWithinItsBudget: the verdict cache is bounded by
// the node records it holds, not by its keys alone, and what it drops
// first is what was used least recently.
func TestVerdictCacheStaysWithinItsBudget(t *testing.T) {
	const nodes = 5000
	t.Run("the cache holds no more node records than its budget, however many shapes are probed", func(t *testing.T) {
		pr, infos, _ := cacheWorld(t, nodes)
		shapes := probe.NodeRecordBudget/nodes + 50
		fill(t, pr, infos, shapes)
		assert.LessOrEqual(t, pr.NodeRecords(), probe.NodeRecordBudget, "%d shapes over %d nodes", shapes, nodes)
		assert.Greater(t, pr.NodeRecords(), probe.NodeRecordBudget-nodes, "the cache is full, not emptied")
	})
	t.Run("a shape in use outlives the idle ones", func(t *testing.T) {
		pr, infos, filter := cacheWorld(t, nodes)
		hot := "ns/hot#shape"
		want := probeShape(t, pr, infos, hot)
		for i := range 2 * probe.NodeRecordBudget / nodes {
			probeShape(t, pr, infos, fmt.Sprintf("ns/g-%d#shape", i))
			if i%50 == 0 {
				probeShape(t, pr, infos, hot)
			}
		}
		filter.calls.Store(0)
		assert.Equal(t, want, probeShape(t, pr, infos, hot))
		assert.Zero(t, filter.calls.Load(), "the hot shape's verdicts are still cached")
		probeShape(t, pr, infos, "ns/g-0#shape")
		assert.EqualValues(t, nodes, filter.calls.Load(), "the first idle shape was evicted")
	})
	t.Run("verdicts kept in one node order are found in another", func(t *testing.T) {
		pr, infos, filter := cacheWorld(t, 50)
		want := probeShape(t, pr, infos, "ns/g#shape")
		require.Len(t, want, 5)
		reordered := slices.Clone(infos)
		slices.Reverse(reordered)
		filter.calls.Store(0)
		assert.Equal(t, want, probeShape(t, pr, reordered, "ns/g#shape"))
		assert.Zero(t, filter.calls.Load(), "every node is found by name")
		fewer := reordered[:40]
		wantFewer := probe.Verdicts{}
		for _, ni := range fewer {
			if v, ok := want[ni.Node().Name]; ok {
				wantFewer[ni.Node().Name] = v
			}
		}
		assert.Equal(t, wantFewer, probeShape(t, pr, fewer, "ns/g#shape"), "a snapshot without some nodes")
		assert.Zero(t, filter.calls.Load())
	})
}

// TestCrossNodeVerdictsOfAnOldSnapshotAreDropped: verdicts made for a
// cross-node pod answer only while no node changes, and each gang's bind
// changes some. Probing gang after gang as the cluster fills, the cache
// keeps the cross-node verdicts of the current snapshot, not one stale
// set per gang; per-node verdicts (reused node by node) stay.
func TestCrossNodeVerdictsOfAnOldSnapshotAreDropped(t *testing.T) {
	const nodes = 1000
	pr, infos, filter := cacheWorld(t, nodes)
	ctx := context.Background()
	cross := func(key string) {
		_, err := pr.Nodes(ctx, key, member("m-0"), infos, true)
		require.NoError(t, err)
	}
	probeShape(t, pr, infos, "ns/plain#shape")
	for i := range 20 {
		// A gang binds: one node's generation moves.
		ni := infos[i].(*framework.NodeInfo)
		ni.SetNode(ni.Node().DeepCopy())
		cross(fmt.Sprintf("ns/g-%d#shape", i))
		cross(fmt.Sprintf("ns/h-%d#shape", i))
	}
	assert.Equal(t, 3*nodes, pr.NodeRecords(), "the per-node entry and the two cross-node ones of the current snapshot")

	filter.calls.Store(0)
	cross("ns/g-19#shape")
	cross("ns/h-19#shape")
	assert.Zero(t, filter.calls.Load(), "cross-node verdicts of an unchanged snapshot answer")
	probeShape(t, pr, infos, "ns/plain#shape")
	assert.EqualValues(t, 20, filter.calls.Load(), "the per-node entry answers for every node that did not move")
}

func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkVerdictCacheMemory fills a prober's cache with the verdicts of
// many shapes over 5,000 nodes and reports the heap the cache holds.
func BenchmarkVerdictCacheMemory(b *testing.B) {
	for _, shapes := range []int{200, 1000, 4096} {
		b.Run(fmt.Sprintf("%d shapes", shapes), func(b *testing.B) {
			for range b.N {
				pr, infos, _ := cacheWorld(b, 5000)
				before := heapInUse()
				fill(b, pr, infos, shapes)
				after := heapInUse()
				b.ReportMetric(float64(after-before)/(1<<20), "MiB-heap")
				b.ReportMetric(float64(pr.NodeRecords()), "records")
				runtime.KeepAlive(pr)
			}
		})
	}
}

// BenchmarkProbeNothingToAsk is what a gang whose every unmodelled filter
// skips it pays for its probe at 5,000 nodes: no node is probed, so the
// cost is the probe's fixed work over the node list (recognising the node
// order, the snapshot's generation, the profile's PreFilters). In the
// scheduler the node order took 130 us of each such probe while it read
// every node's name, scattered over the heap; it now compares the
// snapshot's entries, two contiguous arrays.
func BenchmarkProbeNothingToAsk(b *testing.B) {
	list := make([]*corev1.Node, 5000)
	for i := range list {
		list[i] = node(fmt.Sprintf("node-%05d", i), nil)
	}
	skip := &skipper{spy: *newSpy("Skipper", func(*corev1.Pod, fwk.NodeInfo) string { return "needs a feature" })}
	fw, infos := newFramework(b, list, nil, tf.RegisterPluginAsExtensions(skip.name, pluginOf(skip), "PreFilter", "Filter"))
	pr := probe.New(fw)
	for b.Loop() {
		v, err := pr.Nodes(context.Background(), "ns/g#shape", member("m-0"), infos, false, "Skipper")
		if err != nil || len(v) != 0 {
			b.Fatalf("verdicts %v, err %v", v, err)
		}
	}
}
