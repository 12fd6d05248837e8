package planinput

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// Anti-affinity of running pods: the required anti-affinity terms of pods
// already on nodes, which a member may match and only a probe can place, and
// the memo that keeps them between plans. Apart from the members' own
// constraints because it reads the whole cluster, not the group.

// existingTerms are the distinct required anti-affinity terms of running
// pods, in the order they were first seen, with an index by label that
// finds the few a pod can match without trying every one: with 1,000 gangs
// each repelling its own label, every member was matched against every
// gang's term, twice per plan.
type existingTerms struct {
	list []term
	// byLabel holds, per label a term requires (one In or equality
	// requirement of its selector, each of its values), the positions in
	// list of the terms that require it; unindexed those whose selector
	// has no such requirement, which any pod may match.
	byLabel   map[labelPair][]int32
	unindexed []int32
}

type labelPair struct{ key, value string }

func newExistingTerms(list []term) *existingTerms {
	e := &existingTerms{list: list, byLabel: map[labelPair][]int32{}}
	for i, t := range list {
		req, ok := probe.IndexableRequirement(t.Selector)
		if !ok {
			e.unindexed = append(e.unindexed, int32(i))
			continue
		}
		for _, v := range req.Values().UnsortedList() {
			p := labelPair{req.Key(), v}
			e.byLabel[p] = append(e.byLabel[p], int32(i))
		}
	}
	return e
}

func (e *existingTerms) len() int {
	if e == nil {
		return 0
	}
	return len(e.list)
}

// matching returns the positions, ascending, of the terms pod matches in
// a namespace labelled ns.
func (e *existingTerms) matching(pod *corev1.Pod, ns labels.Set) []int {
	if e.len() == 0 {
		return nil
	}
	candidates := slices.Clone(e.unindexed)
	for k, v := range pod.Labels {
		candidates = append(candidates, e.byLabel[labelPair{k, v}]...)
	}
	slices.Sort(candidates)
	candidates = slices.Compact(candidates)
	var out []int
	for _, i := range candidates {
		if e.list[i].Matches(pod, ns) {
			out = append(out, int(i))
		}
	}
	return out
}

// existingAntiAffinity returns the distinct required anti-affinity terms
// of pods running on infos. A member that matches one may not join its
// domain; only a probe knows where that is, so such members are probed.
// memo may be nil.
func existingAntiAffinity(infos []fwk.NodeInfo, memo *TermMemo) *existingTerms {
	if memo == nil {
		memo = &TermMemo{}
	}
	return memo.terms(infos)
}

// TermMemo keeps the running pods' anti-affinity terms between plans,
// node by node: a node's are read again only when its NodeInfo generation
// moved, and a pod's term IDs (formatted from the whole term) are
// formatted once. Listing and formatting every running pod's terms for
// every plan was an eighth of the scheduler's CPU with 8,000 anti-affine
// pods on 5,000 nodes, and the sweep over them that replaced it a fifth.
// The memo holds the terms of the pods running, no more. Safe for
// concurrent use; a nil memo reads everything every time.
type TermMemo struct {
	mu sync.Mutex
	// names, gens and pods are per position of the snapshot's node list,
	// which keeps its order while no node is added or removed.
	names []string
	gens  []int64
	pods  [][]memoPod
	// count is how many running pods' terms have each ID; order the IDs
	// in the order they were first seen, with those no longer counted
	// among them until the next compaction; first a term of each ID.
	count map[string]int
	order []string
	first map[string]term
	// current is what the last call returned, while no ID came or went.
	current *existingTerms
}

type memoPod struct {
	uid   types.UID
	terms []term
}

func (m *TermMemo) terms(infos []fwk.NodeInfo) *existingTerms {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.count == nil {
		m.count, m.first = map[string]int{}, map[string]term{}
	}
	changed := false
	for i := len(infos); i < len(m.names); i++ {
		changed = m.remove(m.pods[i]) || changed
	}
	if len(m.names) > len(infos) {
		m.names, m.gens, m.pods = m.names[:len(infos)], m.gens[:len(infos)], m.pods[:len(infos)]
	}
	for len(m.names) < len(infos) {
		m.names, m.gens, m.pods = append(m.names, ""), append(m.gens, -1), append(m.pods, nil)
	}
	for i, ni := range infos {
		name := ""
		if n := ni.Node(); n != nil {
			name = n.Name
		}
		if m.names[i] == name && m.gens[i] == ni.GetGeneration() {
			continue
		}
		var before []memoPod
		if m.names[i] == name {
			before = m.pods[i]
		}
		next := read(ni, before)
		changed = m.remove(m.pods[i]) || changed
		changed = m.add(next) || changed
		m.names[i], m.gens[i], m.pods[i] = name, ni.GetGeneration(), next
	}
	if changed || m.current == nil {
		m.current = newExistingTerms(m.distinct())
	}
	return m.current
}

// read lists the anti-affine pods of ni with their terms, reusing the IDs
// of the pods before held for the same node.
func read(ni fwk.NodeInfo, before []memoPod) []memoPod {
	anti := ni.GetPodsWithRequiredAntiAffinity()
	if len(anti) == 0 {
		return nil
	}
	out := make([]memoPod, 0, len(anti))
	for _, pi := range anti {
		pod := pi.GetPod()
		terms := pi.GetRequiredAntiAffinityTerms()
		if i := slices.IndexFunc(before, func(p memoPod) bool { return p.uid == pod.UID }); i >= 0 && len(before[i].terms) == len(terms) {
			out = append(out, before[i])
			continue
		}
		mp := memoPod{uid: pod.UID, terms: make([]term, len(terms))}
		for j, at := range terms {
			mp.terms[j] = term{id: termID(pod, "anti", j), AffinityTerm: at}
		}
		out = append(out, mp)
	}
	return out
}

// add counts pods' terms; it reports whether an ID appeared.
func (m *TermMemo) add(pods []memoPod) bool {
	appeared := false
	for _, p := range pods {
		for _, t := range p.terms {
			m.count[t.id]++
			if m.count[t.id] == 1 {
				appeared = true
				if _, known := m.first[t.id]; !known {
					m.order = append(m.order, t.id)
				}
				m.first[t.id] = t
			}
		}
	}
	return appeared
}

// remove uncounts pods' terms; it reports whether an ID went.
func (m *TermMemo) remove(pods []memoPod) bool {
	gone := false
	for _, p := range pods {
		for _, t := range p.terms {
			m.count[t.id]--
			if m.count[t.id] == 0 {
				gone = true
			}
		}
	}
	return gone
}

// distinct lists the counted terms in first-seen order, so a term keeps
// its position (and the shape keys that name it) from plan to plan. IDs
// no longer counted are dropped once they are half of order.
func (m *TermMemo) distinct() []term {
	out := make([]term, 0, len(m.order))
	for _, id := range m.order {
		if m.count[id] > 0 {
			out = append(out, m.first[id])
		}
	}
	if 2*len(out) < len(m.order) {
		live := make([]string, 0, len(out))
		for _, id := range m.order {
			if m.count[id] > 0 {
				live = append(live, id)
			} else {
				delete(m.count, id)
				delete(m.first, id)
			}
		}
		m.order = live
	}
	return out
}
