// Package probe asks the scheduler profile's own Filter plugins where a pod
// of a group could go, before the group is planned.
//
// The planner models resources, node selection, taints and the constraints
// among a group's own members. Everything else the profile enforces (pod
// anti-affinity of running pods, affinity to running pods, host ports
// already taken, volume topology and attach limits, DRA claims, topology
// spread against running pods, out-of-tree filters) is left to the
// profile: a probe runs its PreFilter and Filter plugins for a copy of one
// member per shape against every node of the snapshot, and the planner
// consumes the verdicts as per-node eligibility. The copy asks for no
// resources, so a node fails only for something the planner does not
// count itself.
//
// Phalanx's own plugins stand aside in a probe cycle (Is), so a probe
// never plans, validates or reserves anything. Verdicts are cached per
// probe key and reused for a node while what the probe's filters read of
// it stays the same: its NodeInfo generation in general, which every bind
// moves, and for a pod the filters judge only by the node object and the
// anti-affinity of the pods there (see views), those alone, so binds of
// other pods keep its verdicts. For pods whose constraints reach across
// nodes (a zone-wide term, a spread), any change of what the filters read
// anywhere discards them. The cache is bounded by the node records it
// holds (maxNodeRecords), least recently used keys first out.
package probe

import (
	"container/list"
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/phalanx-sched/phalanx/pkg/devices"

	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// stateKey marks a probe's CycleState.
const stateKey fwk.StateKey = "phalanx.dev/probe"

type marker struct{}

func (marker) Clone() fwk.StateData { return marker{} }

// Is reports whether state belongs to a probe cycle; Phalanx's plugins
// return Skip from PreFilter then.
func Is(state fwk.CycleState) bool {
	if state == nil {
		return false
	}
	_, err := state.Read(stateKey)
	return err == nil
}

// runner is what a probe needs of the framework: the profile's PreFilter
// and Filter plugins. The framework handle passed to plugins implements it.
type runner interface {
	RunPreFilterPlugins(ctx context.Context, state fwk.CycleState, pod *corev1.Pod) (*fwk.PreFilterResult, *fwk.Status, sets.Set[string])
	RunFilterPlugins(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, info fwk.NodeInfo) *fwk.Status
	RunPreFilterExtensionAddPod(ctx context.Context, state fwk.CycleState, podToSchedule *corev1.Pod, podInfoToAdd fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status
	RunPreFilterExtensionRemovePod(ctx context.Context, state fwk.CycleState, podToSchedule *corev1.Pod, podInfoToRemove fwk.PodInfo, nodeInfo fwk.NodeInfo) *fwk.Status
	Parallelizer() fwk.Parallelizer
}

// Verdicts are the nodes a probed pod may not use, with the refusal of each.
type Verdicts map[string]Verdict

// Verdict is one node's refusal.
type Verdict struct {
	Plugin  string // "" when PreFilter refused the pod everywhere
	Reasons string
}

func (v Verdict) String() string {
	if v.Plugin == "" {
		return v.Reasons
	}
	return v.Plugin + ": " + v.Reasons
}

// Summary words the verdicts for a group condition: how many nodes each
// reason excluded, most frequent first.
func (v Verdicts) Summary() string {
	if len(v) == 0 {
		return ""
	}
	count := map[string]int{}
	for _, r := range v {
		count[r.String()]++
	}
	reasons := slices.Collect(maps.Keys(count))
	sort.Slice(reasons, func(i, j int) bool {
		if count[reasons[i]] != count[reasons[j]] {
			return count[reasons[i]] > count[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	parts := make([]string, 0, len(reasons))
	for _, r := range reasons {
		parts = append(parts, fmt.Sprintf("%d rejected by %s", count[r], r))
	}
	return "nodes excluded by the scheduler's filters: " + strings.Join(parts, "; ")
}

// entry is the verdicts of one probe key, one record per node: the node's
// stamp when it was probed (its generation, or its view for an entry made
// in view mode) and its verdict, as an index into the entry's distinct
// refusals. Records sit in slices aligned to a node
// order, 12 bytes a node, where maps by node name took about 55 and a
// reason string per refused node. An entry is not changed once stored.
type entry struct {
	key     string
	order   *nodeOrder
	gens    []int64
	verdict []int32 // 0: the node passed; i: reasons[i-1]
	reasons []Verdict
	global  int64 // snapshot fingerprint, for cross-node pods
	// crossNode: made for a cross-node pod, so it answers only at global.
	crossNode bool
	// view: gens holds views, not generations (see Prober.views).
	view bool
}

// at returns the record of the node at position i of order, named name.
func (e *entry) at(order *nodeOrder, i int, name string) (gen int64, v Verdict, ok bool) {
	if e.order != order {
		if i, ok = e.order.position(name); !ok {
			return 0, Verdict{}, false
		}
	}
	if k := e.verdict[i]; k > 0 {
		v = e.reasons[k-1]
	}
	return e.gens[i], v, true
}

// nodeOrder is the order of a snapshot's nodes that entries align their
// records to. A snapshot lists its nodes in one order while none is added
// or removed, so the entries of consecutive probes share it and find a
// node by its position; an entry made in another order finds it by name.
type nodeOrder struct {
	names []string
	// infos are the snapshot's entries the names were read from. The
	// scheduler's snapshot keeps one entry per node name for the node's
	// life and updates it in place, so the same entries in the same order
	// list the same nodes: comparing them costs a fraction of comparing
	// 5,000 names, which every probe did (a third of a small gang's
	// probe at 5,000 nodes).
	infos []fwk.NodeInfo
	once  sync.Once
	index map[string]int
}

func newOrder(infos []fwk.NodeInfo) *nodeOrder {
	o := &nodeOrder{names: make([]string, len(infos)), infos: slices.Clone(infos)}
	for i, ni := range infos {
		if n := ni.Node(); n != nil {
			o.names[i] = n.Name
		}
	}
	return o
}

func (o *nodeOrder) lists(infos []fwk.NodeInfo) bool {
	if len(o.names) != len(infos) {
		return false
	}
	if slices.Equal(o.infos, infos) {
		return true
	}
	for i, ni := range infos {
		name := ""
		if n := ni.Node(); n != nil {
			name = n.Name
		}
		if o.names[i] != name {
			return false
		}
	}
	return true
}

func (o *nodeOrder) position(name string) (int, bool) {
	o.once.Do(func() {
		o.index = make(map[string]int, len(o.names))
		for i, n := range o.names {
			if n != "" {
				o.index[n] = i
			}
		}
	})
	i, ok := o.index[name]
	return i, ok
}

// Prober runs and caches probes. It is safe for concurrent use.
type Prober struct {
	handle fwk.Handle
	// modelled are plugins whose refusals the caller computes itself (node
	// selection, taints, room): their verdicts are not reported, so they
	// do not crowd the reasons that matter out of a message.
	modelled sets.Set[string]
	// Devices counts DRA devices for the plans this prober serves: the
	// probe pod carries no claims (see resourceFree), so the answers of
	// the DynamicResources filter come from here, per member and exact.
	Devices *devices.Model

	mu sync.Mutex
	// cache holds the entries by key, in recent holds them most recently
	// used first, and records counts their node records.
	cache   map[string]*list.Element
	recent  *list.List
	records int
	// cross are the keys of the entries made for cross-node pods.
	cross map[string]struct{}
	// order is the node order of the last probe.
	order *nodeOrder

	// filters are the profile's Filter plugins, listed at the first probe
	// (the framework has no plugin list while it builds its plugins);
	// listed is false for a handle that cannot list them.
	filtersOnce sync.Once
	filters     []string
	listed      bool
	// affinity indexes the snapshot's pods for the probes the profile's
	// InterPodAffinity alone answers (affinity.go); noIndex turns that
	// off, for the tests that hold its answers to the filter's.
	affinity affinityIndex
	noIndex  bool
	// nodes numbers the node objects views have seen (see views).
	nodes       map[string]nodeSeen
	nodeVersion int64
}

// nodeSeen is a node object a view saw and the number it was given.
type nodeSeen struct {
	node    *corev1.Node
	version int64
}

// New makes a prober over the profile behind h. Refusals by the modelled
// plugins are left out of the verdicts.
func New(h fwk.Handle, modelled ...string) *Prober {
	return &Prober{handle: h, modelled: sets.New(modelled...), cache: map[string]*list.Element{}, cross: map[string]struct{}{}, recent: list.New(), Devices: devices.NewModel()}
}

// maxNodeRecords bounds the cache by memory: about 12 MiB of records, plus
// the distinct reasons of each entry. That is the verdicts of 200 shapes
// at 5,000 nodes or 2,000 at 500, more than the groups that are being
// planned at any one time; a shape evicted costs one probe of every node
// at its next plan. The topology and preemption plugins of each profile,
// and the diagnostics, each have a prober.
const maxNodeRecords = 1 << 20

// maxEntries bounds the keys, however few nodes they have: a probe key is
// one pod shape of one group, and groups come and go.
const maxEntries = 4096

// Nodes returns the verdicts of the profile's filters for pod on every node
// of infos. key identifies pods that share every field the filters read;
// crossNode says the verdict of one node can change with another node's
// pods (zone-wide terms, spread), so only an unchanged snapshot reuses it.
//
// only, when given, names the filters the caller wants the probe for
// (filters it does not model, run by the profile): if every one of them
// skips the pod at PreFilter, the framework would not run their Filter for
// it either, so no node is refused and no node is probed. Default profiles
// of v1.37 run such a filter (NodeDeclaredFeatures) that skips every pod
// not asking for a declared node feature; probing all nodes for every
// gang on its account was a third of the scheduler's CPU.
func (p *Prober) Nodes(ctx context.Context, key string, pod *corev1.Pod, infos []fwk.NodeInfo, crossNode bool, only ...string) (Verdicts, error) {
	r, ok := p.handle.(runner)
	if !ok {
		return nil, fmt.Errorf("the framework handle cannot run the profile's filters")
	}
	order := p.orderOf(infos)
	probe := resourceFree(pod)
	state := framework.NewCycleState()
	state.Write(stateKey, marker{})
	pre, st, _ := r.RunPreFilterPlugins(ctx, state, probe)
	p.skipModelled(state)
	if !st.IsSuccess() && !st.IsSkip() {
		if st.Code() == fwk.Error {
			return nil, fmt.Errorf("probe PreFilter for %s: %w", pod.Name, st.AsError())
		}
		// The profile rejects the pod before any node is looked at (a
		// missing claim, a PVC that does not exist). No node was probed:
		// nothing is worth keeping for the key.
		reason := verdictOf(st)
		verdicts := Verdicts{}
		for _, ni := range infos {
			if n := ni.Node(); n != nil {
				verdicts[n.Name] = reason
			}
		}
		p.drop(key)
		return verdicts, nil
	}
	if len(only) > 0 && state.GetSkipFilterPlugins().HasAll(only...) {
		return Verdicts{}, nil
	}

	view := p.judgesByView(state, probe)
	var stamps []int64
	if view {
		stamps = p.views(infos)
	} else {
		stamps = make([]int64, len(infos))
		for i, ni := range infos {
			stamps[i] = ni.GetGeneration()
		}
	}
	var global int64
	for _, s := range stamps {
		global += s
	}
	old := p.lookup(key)
	if old != nil && (old.view != view || crossNode && old.global != global) {
		old = nil
	}

	indexed, err := p.fromIndex(ctx, state, probe, infos)
	if err != nil {
		return nil, err
	}

	results := make([]Verdict, len(infos))
	check := func(i int) {
		ni := infos[i]
		n := ni.Node()
		if n == nil {
			return
		}
		if old != nil {
			if g, v, ok := old.at(order, i, n.Name); ok && g == stamps[i] {
				results[i] = v
				return
			}
		}
		if pre != nil && !pre.AllNodes() && !pre.NodeNames.Has(n.Name) {
			results[i] = Verdict{Plugin: "PreFilter", Reasons: "node is not among the nodes the pod may use"}
			return
		}
		if indexed != nil {
			results[i] = indexed[i]
			return
		}
		if st := r.RunFilterPlugins(ctx, state, probe, ni); !st.IsSuccess() && !p.modelled.Has(st.Plugin()) {
			results[i] = verdictOf(st)
		}
	}
	r.Parallelizer().Until(ctx, len(infos), func(i int) { check(i) }, "phalanxProbe")
	out := &entry{key: key, order: order, gens: stamps, verdict: make([]int32, len(infos)), global: global, crossNode: crossNode, view: view}
	verdicts := Verdicts{}
	distinct := map[Verdict]int32{}
	for i, ni := range infos {
		n := ni.Node()
		if n == nil {
			continue
		}
		v := results[i]
		if v == (Verdict{}) {
			continue
		}
		verdicts[n.Name] = v
		k, seen := distinct[v]
		if !seen {
			out.reasons = append(out.reasons, v)
			k = int32(len(out.reasons))
			distinct[v] = k
		}
		out.verdict[i] = k
	}
	// A cancelled probe left nodes unprobed, which would pass if kept.
	if ctx.Err() == nil {
		p.store(out)
	}
	return verdicts, nil
}

// fromIndex answers the probe from the pods' affinity index when the only
// filter left to run for probe, in the state its PreFilter left, is the
// profile's InterPodAffinity (affinity.go); nil when it cannot.
func (p *Prober) fromIndex(ctx context.Context, state fwk.CycleState, probe *corev1.Pod, infos []fwk.NodeInfo) ([]Verdict, error) {
	if p.noIndex || !answerable(probe) {
		return nil, nil
	}
	p.listFilters()
	if !p.listed {
		return nil, nil
	}
	skipped := state.GetSkipFilterPlugins()
	plugin := ""
	for _, f := range p.filters {
		if skipped.Has(f) {
			continue
		}
		if !affinityFilters[f] || plugin != "" {
			return nil, nil
		}
		plugin = f
	}
	if plugin == "" || p.handle.SharedInformerFactory() == nil {
		return nil, nil
	}
	nsLabels := interpodaffinity.GetNamespaceLabelsSnapshot(klog.FromContext(ctx), probe.Namespace, p.handle.SharedInformerFactory().Core().V1().Namespaces().Lister())
	p.affinity.mu.Lock()
	defer p.affinity.mu.Unlock()
	p.affinity.update(infos)
	v, err := p.affinity.verdicts(probe, nsLabels, infos, plugin)
	if err != nil {
		return nil, fmt.Errorf("probe of %s: %w", probe.Name, err)
	}
	return v, nil
}

// listFilters lists the profile's Filter plugins once, at the first probe:
// the framework has no plugin list while it builds its plugins.
func (p *Prober) listFilters() {
	p.filtersOnce.Do(func() {
		lister, ok := p.handle.(interface{ ListPlugins() *config.Plugins })
		if !ok {
			return
		}
		ps := lister.ListPlugins()
		if ps == nil {
			return
		}
		p.listed = true
		for _, f := range ps.Filter.Enabled {
			p.filters = append(p.filters, f.Name)
		}
	})
}

// viewFilters are the filters that judge a pod carrying no pod affinity or
// anti-affinity terms of its own by the node object and the required
// anti-affinity terms of the pods on the node's domains alone: the node's
// view. Every other in-tree filter either skips such a pod at PreFilter
// (ports, volumes, spread, claims of a pod without any) or is one the
// planner models and the probe skips; a filter outside this set may read
// anything, so a profile running one for the pod falls back to
// generations.
var viewFilters = sets.New(names.InterPodAffinity, pluginrt.InterPodAffinityName, names.NodeDeclaredFeatures)

// judgesByView says whether every filter that will run for probe, in the
// cycle state its PreFilter left, judges it by the nodes' views.
func (p *Prober) judgesByView(state fwk.CycleState, probe *corev1.Pod) bool {
	p.listFilters()
	if !p.listed || hasRequiredPodTerms(probe) {
		return false
	}
	skipped := state.GetSkipFilterPlugins()
	for _, f := range p.filters {
		if !skipped.Has(f) && !viewFilters.Has(f) {
			return false
		}
	}
	return true
}

func hasRequiredPodTerms(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return false
	}
	return a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 ||
		a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0
}

// views stamps each node of infos with what viewFilters read of it: the
// node object, numbered the first time a view sees it (any update of the
// node is a new object in the scheduler's cache), and the pods on it with
// required anti-affinity terms, by UID. A bind of a pod without such
// terms moves the node's generation and leaves its view as it was. Pods
// on other nodes of a domain are not in a node's view: a pod whose
// verdicts depend on them is a cross-node pod, whose entry answers only
// while the sum of all views is unchanged.
func (p *Prober) views(infos []fwk.NodeInfo) []int64 {
	out := make([]int64, len(infos))
	p.mu.Lock()
	if p.nodes == nil || len(p.nodes) > 2*len(infos)+64 {
		// Nodes removed from the cluster leave their numbers behind.
		old := p.nodes
		p.nodes = make(map[string]nodeSeen, len(infos))
		for _, ni := range infos {
			if n := ni.Node(); n != nil {
				if s, ok := old[n.Name]; ok {
					p.nodes[n.Name] = s
				}
			}
		}
	}
	for i, ni := range infos {
		n := ni.Node()
		if n == nil {
			continue
		}
		seen, ok := p.nodes[n.Name]
		if !ok || seen.node != n {
			p.nodeVersion++
			seen = nodeSeen{node: n, version: p.nodeVersion}
			p.nodes[n.Name] = seen
		}
		out[i] = seen.version
	}
	p.mu.Unlock()
	for i, ni := range infos {
		anti := ni.GetPodsWithRequiredAntiAffinity()
		if len(anti) == 0 {
			continue
		}
		h := fnv.New64a()
		var version [8]byte
		binary.LittleEndian.PutUint64(version[:], uint64(out[i]))
		h.Write(version[:])
		for _, pi := range anti {
			h.Write([]byte(pi.GetPod().UID))
			h.Write([]byte{0})
		}
		// Bit 62 keeps a hash apart from the plain node numbers, which
		// never reach it.
		out[i] = int64(h.Sum64()&^(1<<63) | 1<<62)
	}
	return out
}

// orderOf returns the node order of infos, the last probe's when it is
// the same.
func (p *Prober) orderOf(infos []fwk.NodeInfo) *nodeOrder {
	p.mu.Lock()
	last := p.order
	p.mu.Unlock()
	if last != nil && last.lists(infos) {
		return last
	}
	o := newOrder(infos)
	p.mu.Lock()
	p.order = o
	p.mu.Unlock()
	return o
}

// lookup returns the entry of key, now the most recently used.
func (p *Prober) lookup(key string) *entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	el, ok := p.cache[key]
	if !ok {
		return nil
	}
	p.recent.MoveToFront(el)
	return el.Value.(*entry)
}

// store keeps e in place of its key's entry, then evicts the least
// recently used entries until the cache is within its bounds. An entry
// larger than the whole budget is not kept.
func (p *Prober) store(e *entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropLocked(e.key)
	if len(e.gens) > maxNodeRecords {
		return
	}
	if e.crossNode {
		p.dropStaleLocked(e)
		p.cross[e.key] = struct{}{}
	}
	p.cache[e.key] = p.recent.PushFront(e)
	p.records += len(e.gens)
	for p.records > maxNodeRecords || p.recent.Len() > maxEntries {
		p.dropLocked(p.recent.Back().Value.(*entry).key)
	}
}

// dropStaleLocked drops the cross-node entries that can no longer answer
// now that e was made: those over the same nodes at another fingerprint.
// A node's generation only grows, so the fingerprint of a node list never
// comes back, and such an entry would only hold its records until the
// least recently used went out: with a probe per anti-affinity gang at
// 5,000 nodes they filled the whole budget, 12 MiB per prober.
func (p *Prober) dropStaleLocked(e *entry) {
	for k := range p.cross {
		if old := p.cache[k].Value.(*entry); old.order == e.order && old.view == e.view && old.global != e.global {
			p.dropLocked(k)
		}
	}
}

func (p *Prober) drop(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropLocked(key)
}

func (p *Prober) dropLocked(key string) {
	el, ok := p.cache[key]
	if !ok {
		return
	}
	p.records -= len(el.Value.(*entry).gens)
	p.recent.Remove(el)
	delete(p.cache, key)
	delete(p.cross, key)
}

// Forget drops the cached verdicts of keys with the given prefix, e.g. a
// group that is gone.
func (p *Prober) Forget(prefix string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.cache {
		if strings.HasPrefix(k, prefix) {
			p.dropLocked(k)
		}
	}
}

func verdictOf(st *fwk.Status) Verdict {
	return Verdict{Plugin: st.Plugin(), Reasons: strings.Join(st.Reasons(), ", ")}
}

// skipModelled keeps the filters whose refusals the caller models from
// running at all. The framework stops at a node's first refusal, so a
// modelled one (a node full by pod count) would hide a refusal the caller
// does not model behind it (a sibling's anti-affinity); the caller drops
// the modelled verdict and would take the node for usable once room is
// made there, and preemption would evict for nothing. Not running them
// also spares their cost on every node.
func (p *Prober) skipModelled(state fwk.CycleState) {
	if p.modelled.Len() == 0 {
		return
	}
	state.SetSkipFilterPlugins(state.GetSkipFilterPlugins().Union(p.modelled))
}

// resourceFree is a copy of pod that asks for no resources and has a UID of
// its own, so the profile judges everything but room: room is the
// planner's, counted with what the rest of the group takes. Devices are
// room too: the copy carries no ResourceClaims, which the planner counts
// per member (pkg/devices). The DynamicResources filter would judge one
// member alone, and could not judge the copy at all: a claim made from a
// template belongs to the pod's UID.
func resourceFree(pod *corev1.Pod) *corev1.Pod {
	c := pod.DeepCopy()
	c.UID = types.UID(string(pod.UID) + "-probe")
	c.Spec.NodeName = ""
	c.Spec.Overhead = nil
	c.Spec.Resources = nil
	c.Spec.ResourceClaims = nil
	c.Status.ResourceClaimStatuses = nil
	c.Status.ExtendedResourceClaimStatus = nil
	strip := func(cs []corev1.Container) {
		for i := range cs {
			cs[i].Resources.Requests = nil
			cs[i].Resources.Limits = nil
		}
	}
	strip(c.Spec.Containers)
	strip(c.Spec.InitContainers)
	return c
}

// Blockers answers, for a node the profile refuses pod on, which of the
// pods there removable allows to evict would clear the refusal: the
// preemption rule upstream applies per node, minus resources. All
// removable pods are taken off a copy of the node; if the filters then
// pass, each is put back, highest priority first, and stays back unless it
// makes them fail again. ok is false when removing all of them does not
// help, e.g. a taint or a volume refuses the pod.
func (p *Prober) Blockers(ctx context.Context, pod *corev1.Pod, ni fwk.NodeInfo, removable func(*corev1.Pod) bool) (blockers []*corev1.Pod, ok bool, err error) {
	r, isRunner := p.handle.(runner)
	if !isRunner {
		return nil, false, fmt.Errorf("the framework handle cannot run the profile's filters")
	}
	probe := resourceFree(pod)
	state := framework.NewCycleState()
	state.Write(stateKey, marker{})
	if _, st, _ := r.RunPreFilterPlugins(ctx, state, probe); !st.IsSuccess() && !st.IsSkip() {
		return nil, false, nil
	}
	p.skipModelled(state)
	node := ni.Snapshot()
	logger := klog.FromContext(ctx)
	var removed []fwk.PodInfo
	for _, pi := range ni.GetPods() {
		if !removable(pi.GetPod()) {
			continue
		}
		if err := node.RemovePod(logger, pi.GetPod()); err != nil {
			return nil, false, err
		}
		if st := r.RunPreFilterExtensionRemovePod(ctx, state, probe, pi, node); !st.IsSuccess() {
			return nil, false, st.AsError()
		}
		removed = append(removed, pi)
	}
	if len(removed) == 0 {
		return nil, false, nil
	}
	if st := r.RunFilterPlugins(ctx, state, probe, node); !st.IsSuccess() {
		return nil, false, nil
	}
	sort.SliceStable(removed, func(i, j int) bool { return priority(removed[i].GetPod()) > priority(removed[j].GetPod()) })
	for _, pi := range removed {
		node.AddPodInfo(pi)
		if st := r.RunPreFilterExtensionAddPod(ctx, state, probe, pi, node); !st.IsSuccess() {
			return nil, false, st.AsError()
		}
		if st := r.RunFilterPlugins(ctx, state, probe, node); st.IsSuccess() {
			continue
		}
		if err := node.RemovePod(logger, pi.GetPod()); err != nil {
			return nil, false, err
		}
		if st := r.RunPreFilterExtensionRemovePod(ctx, state, probe, pi, node); !st.IsSuccess() {
			return nil, false, st.AsError()
		}
		blockers = append(blockers, pi.GetPod())
	}
	return blockers, true, nil
}

func priority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}
