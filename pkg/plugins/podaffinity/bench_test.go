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

// gangMember is member i of gang g: it keeps apart by hostname from the
// rest of its gang.
func gangMember(g, i int, node string) *corev1.Pod {
	gang := fmt.Sprintf("gang-%d", g)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", gang, i), Namespace: "default", Labels: map[string]string{"gang": gang}},
		Spec: corev1.PodSpec{NodeName: node, Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"gang": gang}},
				TopologyKey:   corev1.LabelHostname,
			}},
		}}},
	}
}

// BenchmarkGangMemberOneNode is one scheduling cycle of a gang member
// that Phalanx's topology plugin has narrowed to one node, in the
// bench's anti-affinity case: 5,000 nodes, 1,000 gangs of 8 running, each
// member keeping apart from its gang by hostname. PreFilter, then Filter
// on that one node, upstream's plugin against this one (and upstream's
// with its alpha InterPodAffinityHostnameFastPath, which the scheduler
// does not turn on: it is not exact, see
// TestUpstreamFastPathAgainstUpstream); the framework
// runs with parallelism 1, so time is CPU time. upstream/phalanx is the
// gain.
func BenchmarkGangMemberOneNode(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
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
			pods = append(pods, gangMember(g, i, nodes[(g*size+i)%nodeCount].Name))
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
	upstream, err := interpodaffinity.New(ctx, args, h, plfeature.Features{})
	if err != nil {
		b.Fatal(err)
	}
	fastPath, err := interpodaffinity.New(ctx, args, h, plfeature.Features{EnableInterPodAffinityHostnameFastPath: true})
	if err != nil {
		b.Fatal(err)
	}
	ours, err := build(ctx, args, h, plfeature.Features{})
	if err != nil {
		b.Fatal(err)
	}
	informerFactory.Start(ctx.Done())
	informerFactory.WaitForCacheSync(ctx.Done())

	pod := gangMember(gangs, 0, "")
	target := infos[nodeCount/2]
	cycle := func(pl interface {
		fwk.PreFilterPlugin
		fwk.FilterPlugin
	}) time.Duration {
		start := time.Now()
		state := framework.NewCycleState()
		if _, st := pl.PreFilter(ctx, state, pod, infos); !st.IsSuccess() {
			b.Fatalf("%s PreFilter: %v", pl.Name(), st)
		}
		if st := pl.Filter(ctx, state, pod, target); !st.IsSuccess() {
			b.Fatalf("%s Filter: %v", pl.Name(), st)
		}
		return time.Since(start)
	}
	up := upstream.(*interpodaffinity.InterPodAffinity)
	cycle(ours) // the index is built once, at the first cycle
	b.ResetTimer()
	var tu, tf, tp time.Duration
	for range b.N {
		tu += cycle(up)
		tf += cycle(fastPath.(*interpodaffinity.InterPodAffinity))
		tp += cycle(ours)
	}
	b.ReportMetric(float64(tu.Nanoseconds())/float64(b.N), "upstream-ns/op")
	b.ReportMetric(float64(tf.Nanoseconds())/float64(b.N), "fastpath-ns/op")
	b.ReportMetric(float64(tp.Nanoseconds())/float64(b.N), "phalanx-ns/op")
	b.ReportMetric(float64(tu)/float64(tp), "upstream/phalanx")
	b.ReportMetric(float64(tu)/float64(tf), "upstream/fastpath")
}
