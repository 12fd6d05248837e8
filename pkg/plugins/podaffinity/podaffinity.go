// Package podaffinity is upstream's InterPodAffinity plugin with a
// PreFilter that does no cluster-wide work for the commonest required
// terms: pod anti-affinity by kubernetes.io/hostname.
//
// Upstream's PreFilter counts, for every pod it schedules, the pods of the
// whole cluster that match the pod's terms and the running pods whose
// anti-affinity matches the pod, domain by domain, so that each Filter is a
// lookup. When Phalanx's topology plugin has already narrowed a planned
// gang member to one node, Filter runs on that node alone and the counts
// for every other node are wasted: a gang of pods that keep apart by
// hostname cost five times the CPU of the same gang without the term.
//
// For a pod whose required terms are all hostname anti-affinity this
// plugin's PreFilter counts nothing; Filter decides a node from the node's
// own pods (the NodeInfo the framework passes, with nominated pods added
// and preemption's victims removed) and, for running pods' anti-affinity
// by a wider key (zone), from an index of such terms that is read again
// only from the nodes that changed. Every other pod goes through
// upstream's code unchanged, as do scoring and queueing hints. Verdicts
// (status code and reason) are upstream's; a test holds them equal on
// random clusters.
package podaffinity

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"
	configv1 "k8s.io/kube-scheduler/config/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/validation"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	plfeature "k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"

	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = pluginrt.InterPodAffinityName

// stateKey holds a lazy cycle's state; upstream's own key holds the
// state of a delegated cycle, so the two never meet.
const stateKey fwk.StateKey = "PreFilter" + Name

// plugin is upstream's plugin under Phalanx's name: the framework keys
// score weights, queueing hints and unschedulable plugins by Name(), which
// must be the name the profile enables. Everything it does not declare is
// upstream's.
type plugin struct {
	*interpodaffinity.InterPodAffinity
	lister   fwk.SharedLister
	nsLister listersv1.NamespaceLister
	index    *index
	// resizeDeferred: upstream skips a pod whose resize is deferred
	// (InPlacePodVerticalScalingSchedulerPreemption); such pods are
	// delegated so that upstream decides.
	resizeDeferred bool
	// nodeLocalHostname: the InterPodAffinityHostnameFastPath gate, under
	// which upstream itself reads hostname terms from the node alone, even
	// if two nodes carry the same hostname label.
	nodeLocalHostname bool
}

var (
	_ fwk.PreFilterPlugin     = &plugin{}
	_ fwk.FilterPlugin        = &plugin{}
	_ fwk.PreFilterExtensions = &plugin{}
	_ fwk.PreScorePlugin      = &plugin{}
	_ fwk.ScorePlugin         = &plugin{}
	_ fwk.EnqueueExtensions   = &plugin{}
	_ fwk.SignPlugin          = &plugin{}
)

func (*plugin) Name() string { return Name }

// New builds the plugin from the profile's args for it, which are
// InterPodAffinity's own (hardPodAffinityWeight,
// ignorePreferredTermsOfExistingPods).
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	return build(ctx, args, h, plfeature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate))
}

func build(ctx context.Context, args *config.InterPodAffinityArgs, h fwk.Handle, fts plfeature.Features) (*plugin, error) {
	p, err := interpodaffinity.New(ctx, args, h, fts)
	if err != nil {
		return nil, err
	}
	up, ok := p.(*interpodaffinity.InterPodAffinity)
	if !ok {
		return nil, fmt.Errorf("%s: upstream's plugin is a %T", Name, p)
	}
	return &plugin{
		InterPodAffinity:  up,
		lister:            h.SnapshotSharedLister(),
		nsLister:          h.SharedInformerFactory().Core().V1().Namespaces().Lister(),
		index:             newIndex(),
		resizeDeferred:    fts.EnableInPlacePodVerticalScalingSchedulerPreemption,
		nodeLocalHostname: fts.EnableInterPodAffinityHostnameFastPath,
	}, nil
}

// decodeArgs reads the profile's args for the plugin as InterPodAffinity's
// args (strictly: a field it does not know is refused), defaulted and
// checked as kube-scheduler defaults and checks them for that plugin.
func decodeArgs(obj runtime.Object) (*config.InterPodAffinityArgs, error) {
	var in configv1.InterPodAffinityArgs
	if obj != nil {
		if err := pluginrt.DecodeArgs(obj, &in); err != nil {
			return nil, fmt.Errorf("decode %s args: %w", Name, err)
		}
	}
	scheme.Scheme.Default(&in)
	var out config.InterPodAffinityArgs
	if err := scheme.Scheme.Convert(&in, &out, nil); err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	if err := validation.ValidateInterPodAffinityArgs(nil, &out); err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	return &out, nil
}

// ValidateArgs checks the args as the plugin's factory reads them.
func ValidateArgs(obj runtime.Object) error {
	_, err := decodeArgs(obj)
	return err
}

// lazyState is a lazy cycle's: the pod, its hostname anti-affinity terms
// with their namespaceSelector resolved as upstream resolves it, its
// namespace's labels for running pods' terms, and the index's view of
// running pods' wider terms. Nothing in it changes after PreFilter but
// refusers, a cache of what follows from the rest.
type lazyState struct {
	pod      *corev1.Pod
	terms    []fwk.AffinityTerm
	nsLabels labels.Set
	view     *view
	// refusers holds, per domain a Filter asked about, the nodes whose
	// pods' terms in that domain match the pod (a map[string]bool). A
	// Filter on every node (a probe, a pod no plan narrowed) so matches
	// each term once, as upstream's PreFilter does, while a Filter on one
	// node matches only the terms of its own domains.
	refusers sync.Map
}

// refusersIn returns the nodes whose pods' terms in d refuse the pod.
func (s *lazyState) refusersIn(d domain) map[string]bool {
	if r, ok := s.refusers.Load(d); ok {
		return r.(map[string]bool)
	}
	r := map[string]bool{}
	for _, h := range s.view.byDomain[d] {
		if !r[h.node] && h.term.Matches(s.pod, s.nsLabels) {
			r[h.node] = true
		}
	}
	actual, _ := s.refusers.LoadOrStore(d, r)
	return actual.(map[string]bool)
}

// Clone shares the state: AddPod and RemovePod do not change it.
func (s *lazyState) Clone() fwk.StateData { return s }

// hostnameAntiOnly says whether pod's required terms are hostname
// anti-affinity terms and nothing else. A required affinity term needs a
// cluster-wide count (the first pod of a group that matches its own term
// may go anywhere only if no other pod matches), as does anti-affinity by
// a wider key; a pod with no terms at all is upstream's too: its PreFilter
// may skip the plugin, and whether it does depends on every running pod.
func hostnameAntiOnly(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) == 0 {
		return false
	}
	if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
		return false
	}
	for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if t.TopologyKey != corev1.LabelHostname {
			return false
		}
	}
	return true
}

// PreFilter takes the lazy path for a pod with only hostname anti-affinity
// and hands every other pod to upstream.
func (pl *plugin) PreFilter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if st, ok := pl.preFilterLazy(ctx, cs, pod); ok {
		return nil, st
	}
	return pl.InterPodAffinity.PreFilter(ctx, cs, pod, nodes)
}

// preFilterLazy writes the lazy state for pod; ok is false when upstream
// must decide instead.
func (pl *plugin) preFilterLazy(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod) (*fwk.Status, bool) {
	if !hostnameAntiOnly(pod) || (pl.resizeDeferred && resource.IsPodResizeDeferred(pod)) {
		return nil, false
	}
	// Upstream's pod-group cycle (which Phalanx profiles run without)
	// assumes pods into the snapshot without bumping the generation the
	// index goes by.
	if cs.IsPodGroupSchedulingCycle() {
		return nil, false
	}
	// Upstream reads running pods' terms from the snapshot, not from the
	// nodes it is handed: so does the index.
	infos, err := pl.lister.NodeInfos().List()
	if err != nil {
		return nil, false
	}
	v := pl.index.update(infos)
	if v.sharedHostname && !pl.nodeLocalHostname {
		// Upstream counts a hostname domain over every node with that
		// label value; with two such nodes the node alone is not enough.
		return nil, false
	}
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		return nil, false
	}
	terms := pi.GetRequiredAntiAffinityTerms()
	for i := range terms {
		if err := pl.resolveNamespaces(&terms[i]); err != nil {
			return fwk.AsStatus(err), true
		}
	}
	cs.Write(stateKey, &lazyState{
		pod:      pod,
		terms:    terms,
		nsLabels: interpodaffinity.GetNamespaceLabelsSnapshot(klog.FromContext(ctx), pod.Namespace, pl.nsLister),
		view:     v,
	})
	return nil, true
}

// resolveNamespaces turns the namespaceSelector of the incoming pod's term
// into namespaces, as upstream's PreFilter does, so that the term matches
// a running pod by its namespace alone. An empty selector (every
// namespace) stays as it is.
func (pl *plugin) resolveNamespaces(t *fwk.AffinityTerm) error {
	if t.NamespaceSelector.Empty() {
		return nil
	}
	nss, err := pl.nsLister.List(t.NamespaceSelector)
	if err != nil {
		return err
	}
	for _, ns := range nss {
		t.Namespaces.Insert(ns.Name)
	}
	t.NamespaceSelector = labels.Nothing()
	return nil
}

// Filter decides a lazy cycle from the node alone plus the index's view;
// a delegated cycle is upstream's.
func (pl *plugin) Filter(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	s, ok := lazyOf(cs)
	if !ok {
		return pl.InterPodAffinity.Filter(ctx, cs, pod, ni)
	}
	return s.filter(ni)
}

// filter applies upstream's two anti-affinity rules in upstream's order,
// with upstream's codes and reasons.
func (s *lazyState) filter(ni fwk.NodeInfo) *fwk.Status {
	n := ni.Node()
	if n == nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node not found")
	}
	// The pod's own terms: a hostname domain is this node, so only its
	// pods can break them.
	if _, ok := n.Labels[corev1.LabelHostname]; ok {
		for _, p := range ni.GetPods() {
			for i := range s.terms {
				if s.terms[i].Matches(p.GetPod(), nil) {
					return fwk.NewStatus(fwk.Unschedulable, interpodaffinity.ErrReasonAntiAffinityRulesNotMatch)
				}
			}
		}
	}
	// Running pods' terms: those of the node's own pods come from the
	// NodeInfo, which holds the pods this cycle added or removed; the node
	// is in its own domain for every key it has a label for.
	for _, p := range ni.GetPodsWithRequiredAntiAffinity() {
		for _, t := range p.GetRequiredAntiAffinityTerms() {
			if _, ok := n.Labels[t.TopologyKey]; ok && t.Matches(s.pod, s.nsLabels) {
				return fwk.NewStatus(fwk.Unschedulable, interpodaffinity.ErrReasonExistingAntiAffinityRulesNotMatch)
			}
		}
	}
	// Wider terms of pods on the other nodes of the node's domains.
	for _, k := range s.view.keys {
		v, ok := n.Labels[k]
		if !ok {
			continue
		}
		for node := range s.refusersIn(domain{key: k, value: v}) {
			if node != n.Name {
				return fwk.NewStatus(fwk.Unschedulable, interpodaffinity.ErrReasonExistingAntiAffinityRulesNotMatch)
			}
		}
	}
	return nil
}

func lazyOf(cs fwk.CycleState) (*lazyState, bool) {
	d, err := cs.Read(stateKey)
	if err != nil {
		return nil, false
	}
	s, ok := d.(*lazyState)
	return s, ok
}

// PreFilterExtensions serves both kinds of cycle.
func (pl *plugin) PreFilterExtensions() fwk.PreFilterExtensions { return pl }

// AddPod changes nothing in a lazy cycle: the framework adds the pod to
// the NodeInfo it then filters (a nominated pod, a victim put back), and
// the lazy Filter reads that node's pods from the NodeInfo, never from
// the index. A delegated cycle updates upstream's counts.
func (pl *plugin) AddPod(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, add fwk.PodInfo, ni fwk.NodeInfo) *fwk.Status {
	if _, ok := lazyOf(cs); ok {
		return nil
	}
	return pl.InterPodAffinity.AddPod(ctx, cs, pod, add, ni)
}

// RemovePod changes nothing in a lazy cycle, for the reason AddPod gives:
// preemption removes its victims from the NodeInfo it filters.
func (pl *plugin) RemovePod(ctx context.Context, cs fwk.CycleState, pod *corev1.Pod, remove fwk.PodInfo, ni fwk.NodeInfo) *fwk.Status {
	if _, ok := lazyOf(cs); ok {
		return nil
	}
	return pl.InterPodAffinity.RemovePod(ctx, cs, pod, remove, ni)
}
