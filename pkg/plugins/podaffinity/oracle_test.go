package podaffinity

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	plugintesting "k8s.io/kubernetes/pkg/scheduler/framework/plugins/testing"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

// The framework's parallelizer, which upstream's PreFilter uses, records
// metrics that must be registered first.
func init() { metrics.Register() }

// swapLister lets a test replace the snapshot both plugins read, as the
// scheduler replaces its snapshot's contents between cycles.
type swapLister struct{ cur fwk.SharedLister }

func (s *swapLister) NodeInfos() fwk.NodeInfoLister           { return s.cur.NodeInfos() }
func (s *swapLister) StorageInfos() fwk.StorageInfoLister     { return s.cur.StorageInfos() }
func (s *swapLister) PodGroupStates() fwk.PodGroupStateLister { return s.cur.PodGroupStates() }
func (s *swapLister) PodGroups() fwk.PodGroupLister           { return s.cur.PodGroups() }
func (s *swapLister) CompositePodGroupStates() fwk.CompositePodGroupStateLister {
	return s.cur.CompositePodGroupStates()
}
func (s *swapLister) CompositePodGroups() fwk.CompositePodGroupLister {
	return s.cur.CompositePodGroups()
}

var namespaces = []runtime.Object{
	&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-a", Labels: map[string]string{"team": "x"}}},
	&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-b", Labels: map[string]string{"team": "y"}}},
	&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-c", Labels: map[string]string{"team": "x"}}},
}

// gen draws random clusters and pods from a small vocabulary, so that
// terms and labels meet often.
type gen struct {
	r   *rand.Rand
	seq int
}

func (g *gen) pick(xs ...string) string { return xs[g.r.Intn(len(xs))] }

func (g *gen) nodes() []*corev1.Node {
	n := 4 + g.r.Intn(6)
	out := make([]*corev1.Node, n)
	for i := range out {
		name := fmt.Sprintf("node-%d", i)
		l := map[string]string{}
		switch p := g.r.Float64(); {
		case p < 0.06 && i > 0:
			// A hostname label another node carries too.
			l[corev1.LabelHostname] = out[i-1].Labels[corev1.LabelHostname]
		case p < 0.12:
		default:
			l[corev1.LabelHostname] = name
		}
		if g.r.Float64() < 0.9 {
			l[corev1.LabelTopologyZone] = g.pick("z0", "z1", "z2")
		}
		if g.r.Float64() < 0.7 {
			l["rack"] = g.pick("r0", "r1", "r2", "r3")
		}
		out[i] = &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
	}
	return out
}

func (g *gen) labels() map[string]string {
	l := map[string]string{}
	if g.r.Float64() < 0.8 {
		l["app"] = g.pick("web", "db", "cache")
	}
	if g.r.Float64() < 0.5 {
		l["tier"] = g.pick("fe", "be")
	}
	return l
}

func (g *gen) term(key string) corev1.PodAffinityTerm {
	t := corev1.PodAffinityTerm{TopologyKey: key}
	switch g.r.Intn(3) {
	case 0:
		t.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": g.pick("web", "db", "cache")}}
	case 1:
		t.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{g.pick("web", "db"), g.pick("cache", "db")}}}}
	default:
		t.LabelSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpExists}}}
	}
	switch p := g.r.Float64(); {
	case p < 0.15:
		t.Namespaces = []string{g.pick("ns-a", "ns-b", "ns-c")}
	case p < 0.3:
		t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}
	case p < 0.4:
		t.NamespaceSelector = &metav1.LabelSelector{}
	}
	return t
}

func (g *gen) terms(keys ...string) []corev1.PodAffinityTerm {
	out := make([]corev1.PodAffinityTerm, 1+g.r.Intn(2))
	for i := range out {
		out[i] = g.term(g.pick(keys...))
	}
	return out
}

func (g *gen) pod(node string) *corev1.Pod {
	g.seq++
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", g.seq), UID: types.UID(fmt.Sprint("uid-", g.seq)), Namespace: g.pick("ns-a", "ns-b", "ns-c"), Labels: g.labels()},
		Spec:       corev1.PodSpec{NodeName: node},
	}
	return p
}

// existing is a running pod: some keep apart by hostname, zone or rack,
// some want company.
func (g *gen) existing(node string) *corev1.Pod {
	p := g.pod(node)
	a := &corev1.Affinity{}
	if g.r.Float64() < 0.45 {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: g.terms(corev1.LabelHostname, corev1.LabelHostname, corev1.LabelTopologyZone, "rack")}
	}
	if g.r.Float64() < 0.15 {
		a.PodAffinity = &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: g.terms(corev1.LabelHostname, corev1.LabelTopologyZone)}
	}
	if a.PodAntiAffinity != nil || a.PodAffinity != nil {
		p.Spec.Affinity = a
	}
	return p
}

// incoming is a pod to schedule: mostly the lazy path's kind, the rest
// upstream's.
func (g *gen) incoming() *corev1.Pod {
	p := g.pod("")
	switch x := g.r.Float64(); {
	case x < 0.6:
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: g.terms(corev1.LabelHostname)}}
	case x < 0.75:
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: g.terms(corev1.LabelHostname, corev1.LabelTopologyZone)}}
	case x < 0.85:
		p.Spec.Affinity = &corev1.Affinity{
			PodAffinity:     &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: g.terms(corev1.LabelHostname, corev1.LabelTopologyZone)},
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: g.terms(corev1.LabelHostname)},
		}
	}
	return p
}

func verdict(st *fwk.Status) string {
	if st.IsSuccess() {
		return "Success"
	}
	return fmt.Sprintf("%v %q", st.Code(), st.Reasons())
}

// TestFilterMatchesUpstream holds the plugin's PreFilter and Filter
// verdicts equal to upstream's, plugin by plugin on the same random
// clusters, for every node: as the snapshot has it, with a nominated pod
// added, and with a pod removed as preemption removes its victims. Each
// cluster is scheduled against several times while it changes, so the
// index is read again from a changed snapshot.
func TestFilterMatchesUpstream(t *testing.T) {
	for _, fastPath := range []bool{false, true} {
		t.Run(fmt.Sprintf("InterPodAffinityHostnameFastPath=%v", fastPath), func(t *testing.T) {
			featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.InterPodAffinityHostnameFastPath, fastPath)
			var cases, lazy, delegated int
			for seed := int64(0); seed < 150; seed++ {
				c, l, d := oracleCluster(t, seed, plfeature.Features{EnableInterPodAffinityHostnameFastPath: fastPath})
				cases, lazy, delegated = cases+c, lazy+l, delegated+d
			}
			t.Logf("%d node verdicts compared; %d pods on the lazy path, %d delegated", cases, lazy, delegated)
			if lazy < 100 || delegated < 50 {
				t.Fatalf("the random pods did not exercise both paths: %d lazy, %d delegated", lazy, delegated)
			}
		})
	}
}

// filterer is what the oracle compares: PreFilter, Filter and the
// PreFilter extensions.
type filterer interface {
	fwk.PreFilterPlugin
	fwk.FilterPlugin
	fwk.PreFilterExtensions
}

// passAll stands for a plugin that skipped the pod at PreFilter.
type passAll struct{ filterer }

func (passAll) Filter(context.Context, fwk.CycleState, *corev1.Pod, fwk.NodeInfo) *fwk.Status {
	return nil
}
func (passAll) AddPod(context.Context, fwk.CycleState, *corev1.Pod, fwk.PodInfo, fwk.NodeInfo) *fwk.Status {
	return nil
}
func (passAll) RemovePod(context.Context, fwk.CycleState, *corev1.Pod, fwk.PodInfo, fwk.NodeInfo) *fwk.Status {
	return nil
}

func oracleCluster(t *testing.T, seed int64, fts plfeature.Features) (cases, lazy, delegated int) {
	return compareWithUpstream(t, seed, fts, nil, func(ctx context.Context, args *config.InterPodAffinityArgs, h fwk.Handle) (filterer, error) {
		return build(ctx, args, h, fts)
	})
}

// compareWithUpstream runs the oracle on one random cluster: upstream's
// plugin built with oracleFts against the plugin newPlugin builds.
func compareWithUpstream(t *testing.T, seed int64, fts plfeature.Features, survey map[string]int, newPlugin func(context.Context, *config.InterPodAffinityArgs, fwk.Handle) (filterer, error)) (cases, lazy, delegated int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := klog.FromContext(ctx)
	g := &gen{r: rand.New(rand.NewSource(seed))}
	nodes := g.nodes()
	var pods []*corev1.Pod
	for range 8 + g.r.Intn(20) {
		pods = append(pods, g.existing(nodes[g.r.Intn(len(nodes))].Name))
	}
	lister := &swapLister{cur: cache.NewSnapshot(pods, nodes)}
	args := &config.InterPodAffinityArgs{HardPodAffinityWeight: 1}
	up := plugintesting.SetupPluginWithInformers(ctx, t, frameworkruntime.FactoryAdapter(fts, interpodaffinity.New), args, lister, namespaces).(*interpodaffinity.InterPodAffinity)
	ours := plugintesting.SetupPluginWithInformers(ctx, t, func(ctx context.Context, _ runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return newPlugin(ctx, args, h)
	}, args, lister, namespaces).(filterer)

	for round := range 3 {
		if round > 0 {
			// The cluster changes between cycles: a pod goes, pods come.
			if len(pods) > 0 {
				i := g.r.Intn(len(pods))
				pods = append(pods[:i:i], pods[i+1:]...)
			}
			for range 1 + g.r.Intn(3) {
				pods = append(pods, g.existing(nodes[g.r.Intn(len(nodes))].Name))
			}
			lister.cur = cache.NewSnapshot(pods, nodes)
		}
		infos, err := lister.cur.NodeInfos().List()
		if err != nil {
			t.Fatal(err)
		}
		// The snapshot lists nodes in map order; sorted, a seed picks the
		// same nodes every run.
		infos = slices.Clone(infos)
		slices.SortFunc(infos, func(a, b fwk.NodeInfo) int { return strings.Compare(a.Node().Name, b.Node().Name) })
		for range 4 {
			pod := g.incoming()
			where := fmt.Sprintf("seed %d round %d pod %s", seed, round, podString(pod))
			su, sp := framework.NewCycleState(), framework.NewCycleState()
			_, stU := up.PreFilter(ctx, su, pod, infos)
			_, stP := ours.PreFilter(ctx, sp, pod, infos)
			// A plugin that skips a pod at PreFilter is not run for it: it
			// passes every node, nominated pods or not.
			upF, ourF := filterer(up), ours
			if survey != nil && verdict(stU) != verdict(stP) && (stU.IsSkip() && stP.IsSuccess() || stP.IsSkip() && stU.IsSuccess()) {
				survey[fmt.Sprintf("PreFilter, %s pod: upstream %s, subject %s", podKind(pod), verdict(stU), verdict(stP))]++
				if stU.IsSkip() {
					upF, stU = passAll{}, nil
				} else {
					ourF, stP = passAll{}, nil
				}
			}
			if verdict(stU) != verdict(stP) {
				t.Fatalf("%s: PreFilter: upstream %s, ours %s", where, verdict(stU), verdict(stP))
			}
			if _, ok := lazyOf(sp); ok {
				lazy++
			} else {
				delegated++
			}
			if !stU.IsSuccess() {
				continue
			}
			up, ours := upF, ourF
			compare := func(what string, su, sp fwk.CycleState, ni fwk.NodeInfo) {
				cases++
				u, p := up.Filter(ctx, su, pod, ni), ours.Filter(ctx, sp, pod, ni)
				if verdict(u) != verdict(p) && survey != nil {
					kind, _, _ := strings.Cut(what, " ")
					if strings.Contains(what, "AddPod") {
						kind = "Filter after AddPod"
					} else if strings.Contains(what, "RemovePod") {
						kind = "Filter after RemovePod"
					}
					survey[fmt.Sprintf("%s, %s pod, %s: upstream %s, subject %s", kind, podKind(pod), dupKind(nodes), verdict(u), verdict(p))]++
					return
				}
				if verdict(u) != verdict(p) {
					t.Fatalf("%s: %s on %s (%v): upstream %s, ours %s", where, what, ni.Node().Name, ni.Node().Labels, verdict(u), verdict(p))
				}
			}
			for _, ni := range infos {
				compare("Filter", su, sp, ni)
			}
			for range 3 {
				// A nominated pod, as the framework adds it: to a copy of
				// the node and to a copy of the cycle state.
				ni := infos[g.r.Intn(len(infos))].Snapshot()
				add := g.existing(ni.Node().Name)
				pi, err := framework.NewPodInfo(add)
				if err != nil {
					t.Fatal(err)
				}
				ni.AddPodInfo(pi)
				cu, cp := su.Clone(), sp.Clone()
				if st := up.AddPod(ctx, cu, pod, pi, ni); !st.IsSuccess() {
					t.Fatalf("%s: upstream AddPod: %v", where, st)
				}
				if st := ours.AddPod(ctx, cp, pod, pi, ni); !st.IsSuccess() {
					t.Fatalf("%s: AddPod: %v", where, st)
				}
				compare("Filter after AddPod "+podString(add), cu, cp, ni)
			}
			for range 3 {
				// A victim, as preemption removes it.
				ni := infos[g.r.Intn(len(infos))].Snapshot()
				if len(ni.GetPods()) == 0 {
					continue
				}
				pi := ni.GetPods()[g.r.Intn(len(ni.GetPods()))]
				if err := ni.RemovePod(logger, pi.GetPod()); err != nil {
					t.Fatal(err)
				}
				cu, cp := su.Clone(), sp.Clone()
				if st := up.RemovePod(ctx, cu, pod, pi, ni); !st.IsSuccess() {
					t.Fatalf("%s: upstream RemovePod: %v", where, st)
				}
				if st := ours.RemovePod(ctx, cp, pod, pi, ni); !st.IsSuccess() {
					t.Fatalf("%s: RemovePod: %v", where, st)
				}
				compare("Filter after RemovePod "+podString(pi.GetPod()), cu, cp, ni)
			}
		}
	}
	return cases, lazy, delegated
}

func podString(p *corev1.Pod) string {
	return fmt.Sprintf("%s/%s labels=%v affinity=%v", p.Namespace, p.Name, p.Labels, p.Spec.Affinity)
}

// TestIndexReadsOnlyChangedNodes: an index brought up to date node by
// node holds what one built from scratch holds, and a view handed out
// before a change still reads as it did.
func TestIndexReadsOnlyChangedNodes(t *testing.T) {
	logger := klog.Background()
	for seed := int64(0); seed < 100; seed++ {
		g := &gen{r: rand.New(rand.NewSource(seed))}
		nodes := g.nodes()
		var pods []*corev1.Pod
		for range 10 + g.r.Intn(20) {
			pods = append(pods, g.existing(nodes[g.r.Intn(len(nodes))].Name))
		}
		infos, err := cache.NewSnapshot(pods, nodes).NodeInfos().List()
		if err != nil {
			t.Fatal(err)
		}
		x := newIndex()
		first := x.update(infos)
		before := describeView(first)
		for step := range 5 {
			ni := infos[g.r.Intn(len(infos))].(*framework.NodeInfo)
			switch pods := ni.GetPods(); {
			case g.r.Intn(5) == 0:
				// The list is rebuilt in another order, as when a node
				// comes or goes.
				infos = slices.Clone(infos)
				i, j := g.r.Intn(len(infos)), g.r.Intn(len(infos))
				infos[i], infos[j] = infos[j], infos[i]
			case g.r.Intn(8) == 0 && len(infos) > 1:
				infos = slices.Delete(slices.Clone(infos), 0, 1)
			case len(pods) > 0 && g.r.Intn(2) == 0:
				if err := ni.RemovePod(logger, pods[g.r.Intn(len(pods))].GetPod()); err != nil {
					t.Fatal(err)
				}
			default:
				ni.AddPod(g.existing(ni.Node().Name))
			}
			got, want := describeView(x.update(infos)), describeView(newIndex().update(infos))
			if got != want {
				t.Fatalf("seed %d step %d: updated index\n%s\nrebuilt index\n%s", seed, step, got, want)
			}
		}
		if after := describeView(first); after != before {
			t.Fatalf("seed %d: a view changed after it was handed out:\n%s\nbecame\n%s", seed, before, after)
		}
	}
}

// describeView writes a view in a canonical order.
func describeView(v *view) string {
	var lines []string
	for d, hs := range v.byDomain {
		for _, h := range hs {
			lines = append(lines, fmt.Sprintf("%s=%s %s %v", d.key, d.value, h.node, h.term.Selector))
		}
	}
	slices.Sort(lines)
	keys := slices.Clone(v.keys)
	slices.Sort(keys)
	return fmt.Sprintf("keys %v shared %v\n%s", keys, v.sharedHostname, strings.Join(lines, "\n"))
}

// TestUpstreamFastPathAgainstUpstream measures how far upstream's own
// InterPodAffinityHostnameFastPath (alpha in v1.37, off by default) is
// from upstream without it, on the oracle's random clusters, and logs
// every kind of difference. It holds that the gate is not exact (a pod
// without terms is no longer skipped at PreFilter, so a nominated pod's
// anti-affinity refuses it where the default passes it), which is why
// phalanx-scheduler leaves the gate off and runs this plugin.
func TestUpstreamFastPathAgainstUpstream(t *testing.T) {
	featuregatetesting.SetFeatureGateDuringTest(t, utilfeature.DefaultFeatureGate, features.InterPodAffinityHostnameFastPath, true)
	survey := map[string]int{}
	defer func() {
		keys := slices.Sorted(maps.Keys(survey))
		termless := false
		for _, k := range keys {
			t.Logf("%5d  %s", survey[k], k)
			termless = termless || strings.Contains(k, "termless pod, unique hostnames")
			if strings.Contains(k, "hostname-anti pod, unique hostnames") {
				t.Errorf("upstream's fast path differs from upstream for a pod with only hostname anti-affinity: %s", k)
			}
		}
		// If this stops failing, upstream's fast path has become exact
		// and the scheduler could turn it on instead of this plugin.
		if !termless {
			t.Errorf("upstream's fast path no longer differs from upstream for pods without terms")
		}
	}()
	for seed := int64(0); seed < 150; seed++ {
		compareWithUpstream(t, seed, plfeature.Features{}, survey, func(ctx context.Context, args *config.InterPodAffinityArgs, h fwk.Handle) (filterer, error) {
			p, err := interpodaffinity.New(ctx, args, h, plfeature.Features{EnableInterPodAffinityHostnameFastPath: true})
			if err != nil {
				return nil, err
			}
			return p.(*interpodaffinity.InterPodAffinity), nil
		})
	}
}

func podKind(p *corev1.Pod) string {
	a := p.Spec.Affinity
	switch {
	case a == nil:
		return "termless"
	case a.PodAffinity != nil:
		return "affinity"
	case hostnameAntiOnly(p):
		return "hostname-anti"
	default:
		return "zone-anti"
	}
}

func dupKind(nodes []*corev1.Node) string {
	seen := map[string]bool{}
	for _, n := range nodes {
		v, ok := n.Labels[corev1.LabelHostname]
		if ok && seen[v] {
			return "shared hostname"
		}
		seen[v] = true
	}
	return "unique hostnames"
}

// TestViewsAreSafeToReadWhileTheIndexMoves: Filters of one cycle read
// their view while another PreFilter (a probe, the next cycle) brings the
// index to another snapshot; run with -race.
func TestViewsAreSafeToReadWhileTheIndexMoves(t *testing.T) {
	g := &gen{r: rand.New(rand.NewSource(1))}
	nodes := g.nodes()
	var lists [2][]fwk.NodeInfo
	for i := range lists {
		var pods []*corev1.Pod
		for range 30 {
			p := g.existing(nodes[g.r.Intn(len(nodes))].Name)
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: g.terms(corev1.LabelTopologyZone, "rack")}}
			pods = append(pods, p)
		}
		var err error
		if lists[i], err = cache.NewSnapshot(pods, nodes).NodeInfos().List(); err != nil {
			t.Fatal(err)
		}
	}
	x := newIndex()
	pod := g.incoming()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			x.update(lists[i%2])
		}
	}()
	for i := 0; ; i++ {
		s := &lazyState{pod: pod, view: x.update(lists[i%2])}
		for _, ni := range lists[i%2] {
			s.filter(ni)
		}
		select {
		case <-done:
			return
		default:
		}
	}
}
