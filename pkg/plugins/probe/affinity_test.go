package probe_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"k8s.io/apimachinery/pkg/runtime"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
	"github.com/phalanx-sched/phalanx/pkg/plugins/podaffinity"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// TestAffinityIndexAnswersAsTheFilter: where the profile's InterPodAffinity
// is the only filter a probe runs, the prober answers from its index of the
// snapshot's pods instead of filtering node by node; the answers must be
// the filter's, node for node and reason for reason. Random clusters (two
// namespaces, one labelled, hostname and zone domains, two nodes sharing a
// hostname label, running pods with anti-affinity of both keys, selectors
// with and without an equality requirement, terms listing namespaces or
// selecting them by label) change pod by pod between probes, so the index
// is also held to the snapshot as it moves.
func TestAffinityIndexAnswersAsTheFilter(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rng := rand.New(rand.NewPCG(11, 17))
	client := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{"team": "ml"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
	)
	factory := informers.NewSharedInformerFactory(client, 0)
	cache := schedcache.New(ctx, nil, false, false)
	snapshot := schedcache.NewEmptySnapshot()
	const nodes = 40
	for i := range nodes {
		name := fmt.Sprintf("n-%02d", i)
		host := name
		if i == nodes-1 {
			host = "n-00" // two nodes, one hostname label
		}
		cache.AddNode(klog.Background(), node(name, map[string]string{corev1.LabelHostname: host, corev1.LabelTopologyZone: fmt.Sprintf("z-%d", i%5)}))
	}
	var calls *countedAffinity
	ipa := func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		p, err := interpodaffinity.New(ctx, &config.InterPodAffinityArgs{HardPodAffinityWeight: 1}, h, feature.Features{})
		if err != nil {
			return nil, err
		}
		calls = &countedAffinity{InterPodAffinity: p.(*interpodaffinity.InterPodAffinity), calls: map[string]int{}}
		return calls, nil
	}
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterPluginAsExtensions(names.InterPodAffinity, ipa, "PreFilter", "Filter"),
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "phalanx-scheduler", frameworkruntime.WithSnapshotSharedLister(snapshot), frameworkruntime.WithInformerFactory(factory))
	require.NoError(t, err)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	indexed, filtered := probe.New(fw), probe.New(fw)
	filtered.FilterNodeByNode()

	apps := []string{"a", "b", "c"}
	term := func() corev1.PodAffinityTerm {
		at := corev1.PodAffinityTerm{TopologyKey: []string{corev1.LabelHostname, corev1.LabelTopologyZone}[rng.IntN(2)]}
		switch rng.IntN(4) {
		case 0:
			at.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": apps[rng.IntN(3)]}}
		case 1:
			at.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{apps[rng.IntN(3)], apps[rng.IntN(3)]}}}}
		case 2:
			at.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{apps[rng.IntN(3)]}}}}
		default:
			at.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}}
		}
		switch rng.IntN(5) {
		case 0:
			at.Namespaces = []string{"ns", "other"}
		case 1:
			at.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ml"}}
		}
		return at
	}
	pod := func(name string, withTerms bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: []string{"ns", "other"}[rng.IntN(2)], Name: name, UID: types.UID(name), Labels: map[string]string{"app": apps[rng.IntN(3)]}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
		if rng.IntN(3) == 0 {
			p.Labels["tier"] = "x"
		}
		if withTerms && rng.IntN(2) == 0 {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}
			for range 1 + rng.IntN(2) {
				p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(p.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, term())
			}
		}
		return p
	}

	var running []*corev1.Pod
	answered, refusals := 0, 0
	for step := range 150 {
		if len(running) > 0 && rng.IntN(4) == 0 {
			i := rng.IntN(len(running))
			require.NoError(t, cache.RemovePod(klog.Background(), running[i]))
			running = append(running[:i], running[i+1:]...)
		} else {
			p := pod(fmt.Sprintf("r-%d", step), true)
			p.Spec.NodeName = fmt.Sprintf("n-%02d", rng.IntN(nodes))
			require.NoError(t, cache.AddPod(klog.Background(), p))
			running = append(running, p)
		}
		require.NoError(t, cache.UpdateSnapshot(klog.Background(), snapshot))
		infos, err := snapshot.NodeInfos().List()
		require.NoError(t, err)
		for j := range 3 {
			member := pod(fmt.Sprintf("m-%d-%d", step, j), true)
			key := fmt.Sprintf("ns/g-%d-%d#shape", step, j)
			want, err := filtered.Nodes(ctx, key, member, infos, true)
			require.NoError(t, err)
			calls.taken()
			got, err := indexed.Nodes(ctx, key, member, infos, true)
			require.NoError(t, err)
			require.Equal(t, want, got, "step %d: verdicts for %s (labels %v, affinity %v)", step, member.Name, member.Labels, member.Spec.Affinity)
			if len(calls.taken()) == 0 {
				answered++
				refusals += len(got)
			}
		}
	}
	// The index must have answered most probes, and refused nodes in them.
	require.Greater(t, answered, 300, "probes the index answered")
	require.Greater(t, refusals, 100, "refusals among them")
}

// BenchmarkAntiAffinityGangProbe is the probe of one gang's member in the
// bench's anti-affinity case as it fills: 5,000 nodes, 8,000 running
// members of 1,000 gangs, each keeping apart from its own gang by
// hostname. The member's term matches no running pod and no running term
// matches it, so nothing is refused; node by node, the filter found that
// out on every node.
func BenchmarkAntiAffinityGangProbe(b *testing.B) {
	const nodes = 5000
	w := newLiveWorld(b, nodes)
	gangMember := func(gang string, i int) *corev1.Pod {
		p := shunning(fmt.Sprintf("%s-%d", gang, i), gang, corev1.LabelHostname)
		p.Labels = map[string]string{"app": gang}
		return p
	}
	for g := range 1000 {
		for i := range 8 {
			w.bind(gangMember(fmt.Sprintf("gang-%d", g), i), fmt.Sprintf("n-%04d", (g*8+i)%nodes))
		}
	}
	infos := w.infos()
	// The shipped profiles run PhalanxInterPodAffinity, whose PreFilter
	// skips upstream's walk over the cluster for such a member.
	phalanxFw, err := tf.NewFramework(context.Background(), []tf.RegisterPluginFunc{
		tf.RegisterPluginAsExtensions(pluginrt.InterPodAffinityName, func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
			return podaffinity.New(ctx, nil, h)
		}, "PreFilter", "Filter"),
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
	}, "phalanx-scheduler", frameworkruntime.WithSnapshotSharedLister(w.snapshot),
		frameworkruntime.WithInformerFactory(informers.NewSharedInformerFactory(fake.NewClientset(), 0)))
	if err != nil {
		b.Fatal(err)
	}
	probers := map[string]*probe.Prober{"index": probe.New(w.fw), "filters": w.prober, "index-phalanx-plugin": probe.New(phalanxFw)}
	filtersPhalanx := probe.New(phalanxFw)
	filtersPhalanx.FilterNodeByNode()
	probers["filters-phalanx-plugin"] = filtersPhalanx
	for _, mode := range []string{"filters", "index", "filters-phalanx-plugin", "index-phalanx-plugin"} {
		b.Run(mode, func(b *testing.B) {
			pr := probers[mode]
			member := gangMember("next", 0)
			i := 0
			for b.Loop() {
				i++
				// Each gang has its own key: no verdict is reused.
				if _, err := pr.Nodes(context.Background(), fmt.Sprintf("ns/g-%d#shape", i), member, infos, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
