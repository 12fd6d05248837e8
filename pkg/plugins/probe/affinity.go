package probe

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/interpodaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// Inter-pod anti-affinity answered from an index.
//
// When the only filter a probe would run on the nodes is the profile's
// InterPodAffinity, running it node by node matched the probed pod's terms
// against every pod of the cluster and every running pod's terms against
// the pod: with 1,000 gangs of 8 members each keeping apart from its own
// gang, one probe per gang, that was half of the scheduler's CPU and
// refused nothing, since no running pod carries another gang's label. The
// same verdicts come from an index of the snapshot's pods by label and of
// their anti-affinity terms by the label each requires, which finds the
// few pods and terms a probe is about without looking at the others. The
// index is kept across probes and re-reads only the nodes whose
// generation moved.
//
// The verdicts are the filter's own (a test holds them equal to running
// upstream's plugin): a node is refused when it shares a topology domain
// with a pod matching one of the probed pod's required anti-affinity terms
// ("didn't match pod anti-affinity rules"), else when it shares one with a
// running pod whose required anti-affinity term matches the probed pod
// ("didn't satisfy existing pods anti-affinity rules"). A pod with required
// affinity terms, or whose terms select namespaces by label, is probed
// node by node as before.

// affinityFilters are the names the profile's InterPodAffinity runs under:
// upstream's, and Phalanx's (pkg/plugins/podaffinity), whose Filter gives
// upstream's verdicts.
var affinityFilters = map[string]bool{names.InterPodAffinity: true, pluginrt.InterPodAffinityName: true}

type labelPair struct{ key, value string }

// affinityIndex indexes the pods of a snapshot's nodes, by position in the
// node list.
type affinityIndex struct {
	mu    sync.Mutex
	nodes []indexedNode
	// withLabel holds, per label, the positions of the nodes with a pod
	// that carries it; withTerm, per label, those of the nodes with a
	// pod whose required anti-affinity term requires it (an In or equality
	// requirement); anyTerm those with a term that requires none.
	withLabel map[labelPair]map[int32]struct{}
	withTerm  map[labelPair]map[int32]struct{}
	anyTerm   map[int32]struct{}
	// populated are the positions of nodes with any pod.
	populated map[int32]struct{}
}

type indexedNode struct {
	name       string
	gen        int64
	labelPairs []labelPair
	termPairs  []labelPair
	anyTerm    bool
	populated  bool
}

// update brings the index to infos, re-reading the nodes whose name or
// generation at a position changed.
func (x *affinityIndex) update(infos []fwk.NodeInfo) {
	if x.withLabel == nil {
		x.withLabel, x.withTerm = map[labelPair]map[int32]struct{}{}, map[labelPair]map[int32]struct{}{}
		x.anyTerm, x.populated = map[int32]struct{}{}, map[int32]struct{}{}
	}
	for i := len(infos); i < len(x.nodes); i++ {
		x.unindex(int32(i))
	}
	if len(x.nodes) > len(infos) {
		x.nodes = x.nodes[:len(infos)]
	}
	for len(x.nodes) < len(infos) {
		x.nodes = append(x.nodes, indexedNode{gen: -1})
	}
	for i, ni := range infos {
		name := ""
		if n := ni.Node(); n != nil {
			name = n.Name
		}
		if x.nodes[i].name == name && x.nodes[i].gen == ni.GetGeneration() {
			continue
		}
		x.unindex(int32(i))
		x.nodes[i] = readNode(name, ni)
		x.index(int32(i))
	}
}

func readNode(name string, ni fwk.NodeInfo) indexedNode {
	e := indexedNode{name: name, gen: ni.GetGeneration()}
	seen := map[labelPair]bool{}
	for _, pi := range ni.GetPods() {
		e.populated = true
		for k, v := range pi.GetPod().Labels {
			p := labelPair{k, v}
			if !seen[p] {
				seen[p] = true
				e.labelPairs = append(e.labelPairs, p)
			}
		}
	}
	clear(seen)
	for _, pi := range ni.GetPodsWithRequiredAntiAffinity() {
		for _, t := range pi.GetRequiredAntiAffinityTerms() {
			req, ok := IndexableRequirement(t.Selector)
			if !ok {
				e.anyTerm = true
				continue
			}
			for _, v := range req.Values().UnsortedList() {
				p := labelPair{req.Key(), v}
				if !seen[p] {
					seen[p] = true
					e.termPairs = append(e.termPairs, p)
				}
			}
		}
	}
	return e
}

func (x *affinityIndex) index(i int32) {
	e := x.nodes[i]
	for _, p := range e.labelPairs {
		addTo(x.withLabel, p, i)
	}
	for _, p := range e.termPairs {
		addTo(x.withTerm, p, i)
	}
	if e.anyTerm {
		x.anyTerm[i] = struct{}{}
	}
	if e.populated {
		x.populated[i] = struct{}{}
	}
}

func (x *affinityIndex) unindex(i int32) {
	e := x.nodes[i]
	for _, p := range e.labelPairs {
		removeFrom(x.withLabel, p, i)
	}
	for _, p := range e.termPairs {
		removeFrom(x.withTerm, p, i)
	}
	delete(x.anyTerm, i)
	delete(x.populated, i)
	x.nodes[i] = indexedNode{gen: -1}
}

func addTo(m map[labelPair]map[int32]struct{}, p labelPair, i int32) {
	s := m[p]
	if s == nil {
		s = map[int32]struct{}{}
		m[p] = s
	}
	s[i] = struct{}{}
}

func removeFrom(m map[labelPair]map[int32]struct{}, p labelPair, i int32) {
	if s := m[p]; s != nil {
		delete(s, i)
		if len(s) == 0 {
			delete(m, p)
		}
	}
}

// IndexableRequirement returns a requirement of sel that a pod's labels
// must meet with one of a few values (In or equality), by which terms
// with that selector can be indexed: a pod without one of those labels
// cannot match. ok is false when sel has none.
func IndexableRequirement(sel labels.Selector) (req labels.Requirement, ok bool) {
	if sel == nil {
		return labels.Requirement{}, false
	}
	reqs, selectable := sel.Requirements()
	if !selectable {
		return labels.Requirement{}, false
	}
	for _, r := range reqs {
		switch r.Operator() {
		case selection.In, selection.Equals, selection.DoubleEquals:
			return r, true
		}
	}
	return labels.Requirement{}, false
}

// answerable says whether pod's verdicts can come from the index: it has
// no required affinity terms (their "no pod matches anywhere yet" rule
// needs every pod), and no term selecting namespaces by label (the filter
// resolves those through the namespace lister).
func answerable(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return true
	}
	if a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
		return false
	}
	if a.PodAntiAffinity != nil {
		for _, t := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if t.NamespaceSelector != nil {
				return false
			}
		}
	}
	return true
}

// closed are topology domains, by key, refused for one reason.
type closed map[string]map[string]bool

func (c closed) add(key, value string) {
	if c[key] == nil {
		c[key] = map[string]bool{}
	}
	c[key][value] = true
}

func (c closed) has(key, value string) bool { return c[key][value] }

func (c closed) refuses(node *corev1.Node) bool {
	for key, values := range c {
		if v, ok := node.Labels[key]; ok && values[v] {
			return true
		}
	}
	return false
}

// verdicts answers, for every node of infos, what the profile's
// InterPodAffinity filter plugin would for pod in a namespace labelled
// nsLabels; the index must be up to date with infos.
func (x *affinityIndex) verdicts(pod *corev1.Pod, nsLabels labels.Set, infos []fwk.NodeInfo, plugin string) ([]Verdict, error) {
	pi, err := framework.NewPodInfo(pod)
	if err != nil {
		return nil, err
	}
	// The pod's own terms: the domains of the pods they match.
	anti := closed{}
	for _, t := range pi.GetRequiredAntiAffinityTerms() {
		consider := func(i int32) {
			node := infos[i].Node()
			if node == nil {
				return
			}
			v, ok := node.Labels[t.TopologyKey]
			if !ok || anti.has(t.TopologyKey, v) {
				return
			}
			for _, other := range infos[i].GetPods() {
				// As the filter does: the term's namespaces were resolved
				// when it was parsed, no namespace labels are consulted.
				if t.Matches(other.GetPod(), nil) {
					anti.add(t.TopologyKey, v)
					return
				}
			}
		}
		if req, ok := IndexableRequirement(t.Selector); ok {
			for _, v := range req.Values().UnsortedList() {
				for i := range x.withLabel[labelPair{req.Key(), v}] {
					consider(i)
				}
			}
		} else {
			for i := range x.populated {
				consider(i)
			}
		}
	}
	// Running pods' terms: the domains of those the pod matches.
	existing := closed{}
	candidates := map[int32]struct{}{}
	for i := range x.anyTerm {
		candidates[i] = struct{}{}
	}
	for k, v := range pod.Labels {
		for i := range x.withTerm[labelPair{k, v}] {
			candidates[i] = struct{}{}
		}
	}
	for i := range candidates {
		node := infos[i].Node()
		if node == nil {
			continue
		}
		for _, other := range infos[i].GetPodsWithRequiredAntiAffinity() {
			for _, t := range other.GetRequiredAntiAffinityTerms() {
				if v, ok := node.Labels[t.TopologyKey]; ok && t.Matches(pod, nsLabels) {
					existing.add(t.TopologyKey, v)
				}
			}
		}
	}
	out := make([]Verdict, len(infos))
	if len(anti) == 0 && len(existing) == 0 {
		return out, nil
	}
	for i, ni := range infos {
		node := ni.Node()
		if node == nil {
			continue
		}
		switch {
		case anti.refuses(node):
			out[i] = Verdict{Plugin: plugin, Reasons: interpodaffinity.ErrReasonAntiAffinityRulesNotMatch}
		case existing.refuses(node):
			out[i] = Verdict{Plugin: plugin, Reasons: interpodaffinity.ErrReasonExistingAntiAffinityRulesNotMatch}
		}
	}
	return out, nil
}
