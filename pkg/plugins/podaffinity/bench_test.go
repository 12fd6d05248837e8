package podaffinity

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
)

// gangMember is member i of gang g: it keeps apart from the rest of its
// gang by key.
func gangMember(g, i int, node, key string) *corev1.Pod {
	gang := fmt.Sprintf("gang-%d", g)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", gang, i), Namespace: "default", Labels: map[string]string{"gang": gang}},
		Spec: corev1.PodSpec{NodeName: node, Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"gang": gang}},
				TopologyKey:   key,
			}},
		}}},
	}
}

type filterPlugin interface {
	fwk.PreFilterPlugin
	fwk.FilterPlugin
}

// benchCluster is the bench's anti-affinity case: 5,000 nodes in 10
// zones, 1,000 gangs of 8 running, each member keeping apart from its gang
// by runningKey. It returns the nodes and three plugins on one framework
// with parallelism 1, so that time is CPU time: upstream's, upstream's
// with its alpha InterPodAffinityHostnameFastPath (which the scheduler
// does not turn on: it is not exact, see
// TestUpstreamFastPathAgainstUpstream), and this one, its index built.
func benchCluster(b *testing.B, runningKey string) (infos []fwk.NodeInfo, upstream, fastPath, ours filterPlugin) {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	const nodeCount, gangs, size = 5000, 1000, 8
	nodes := make([]*corev1.Node, nodeCount)
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		nodes[i] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			corev1.LabelHostname: name, corev1.LabelTopologyZone: fmt.Sprintf("zone-%d", i%10),
		}}}
	}
	var pods []*corev1.Pod
	for g := range gangs {
		for i := range size {
			pods = append(pods, gangMember(g, i, nodes[(g*size+i)%nodeCount].Name, runningKey))
		}
	}
	snapshot := cache.NewSnapshot(pods, nodes)
	infos, err := snapshot.NodeInfos().List()
	if err != nil {
		b.Fatal(err)
	}
	informerFactory := informers.NewSharedInformerFactory(fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}), 0)
	h, err := frameworkruntime.NewFramework(ctx, nil, nil,
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithInformerFactory(informerFactory),
		frameworkruntime.WithParallelism(1))
	if err != nil {
		b.Fatal(err)
	}
	args := &config.InterPodAffinityArgs{HardPodAffinityWeight: 1}
	up, err := interpodaffinity.New(ctx, args, h, plfeature.Features{})
	if err != nil {
		b.Fatal(err)
	}
	fast, err := interpodaffinity.New(ctx, args, h, plfeature.Features{EnableInterPodAffinityHostnameFastPath: true})
	if err != nil {
		b.Fatal(err)
	}
	p, err := build(ctx, args, h, plfeature.Features{})
	if err != nil {
		b.Fatal(err)
	}
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())
	p.index.update(infos)
	return infos, up.(filterPlugin), fast.(filterPlugin), p
}

// compareCycles times one cycle (PreFilter, then Filter on each of
// filterOn) of each plugin b.N times and reports each one's time per
// cycle and upstream's over the others'.
func compareCycles(b *testing.B, pod *corev1.Pod, infos, filterOn []fwk.NodeInfo, upstream, fastPath, ours filterPlugin) {
	ctx := context.Background()
	cycle := func(pl filterPlugin) time.Duration {
		start := time.Now()
		state := framework.NewCycleState()
		if _, st := pl.PreFilter(ctx, state, pod, infos); !st.IsSuccess() {
			b.Fatalf("%s PreFilter: %v", pl.Name(), st)
		}
		for _, ni := range filterOn {
			pl.Filter(ctx, state, pod, ni)
		}
		return time.Since(start)
	}
	b.ResetTimer()
	var tu, tf, tp time.Duration
	for range b.N {
		tu += cycle(upstream)
		tf += cycle(fastPath)
		tp += cycle(ours)
	}
	b.ReportMetric(float64(tu.Nanoseconds())/float64(b.N), "upstream-ns/op")
	b.ReportMetric(float64(tf.Nanoseconds())/float64(b.N), "fastpath-ns/op")
	b.ReportMetric(float64(tp.Nanoseconds())/float64(b.N), "phalanx-ns/op")
	b.ReportMetric(float64(tu)/float64(tp), "upstream/phalanx")
	b.ReportMetric(float64(tu)/float64(tf), "upstream/fastpath")
}

// BenchmarkGangMemberOneNode is one scheduling cycle of a gang member
// that Phalanx's topology plugin has narrowed to one node, in the bench's
// anti-affinity case (hostname terms everywhere): upstream/phalanx is the
// gain this plugin exists for.
func BenchmarkGangMemberOneNode(b *testing.B) {
	infos, upstream, fastPath, ours := benchCluster(b, corev1.LabelHostname)
	pod := gangMember(1000, 0, "", corev1.LabelHostname)
	target := infos[len(infos)/2]
	for _, pl := range []filterPlugin{upstream, ours} {
		state := framework.NewCycleState()
		pl.PreFilter(context.Background(), state, pod, infos)
		if st := pl.Filter(context.Background(), state, pod, target); !st.IsSuccess() {
			b.Fatalf("%s refuses the member: %v", pl.Name(), st)
		}
	}
	compareCycles(b, pod, infos, []fwk.NodeInfo{target}, upstream, fastPath, ours)
}

// BenchmarkEveryNodeZoneTerms is a cycle that filters every node (a
// probe, a pod no plan narrowed) of a cluster whose running pods keep
// apart by zone: the lazy path matches each running term in other nodes'
// domains once per cycle, as upstream's PreFilter does, not once per node
// of its zone. It matches the terms of each node's own pods again in that
// node's Filter (its NodeInfo may hold nominated pods or lack victims), so
// it costs somewhat more than upstream here; this guards against worse.
func BenchmarkEveryNodeZoneTerms(b *testing.B) {
	infos, upstream, fastPath, ours := benchCluster(b, corev1.LabelTopologyZone)
	compareCycles(b, gangMember(1000, 0, "", corev1.LabelHostname), infos, infos, upstream, fastPath, ours)
}

// BenchmarkEveryNodeHostnameTerms is a probe of the bench's
// anti-affinity case: one member's PreFilter, then Filter on every node,
// where the lazy path does upstream's work in another order.
func BenchmarkEveryNodeHostnameTerms(b *testing.B) {
	infos, upstream, fastPath, ours := benchCluster(b, corev1.LabelHostname)
	compareCycles(b, gangMember(1000, 0, "", corev1.LabelHostname), infos, infos, upstream, fastPath, ours)
}
