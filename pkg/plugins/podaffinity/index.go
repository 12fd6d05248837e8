package podaffinity

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"
)

// domain is one topology domain: a node label and its value.
type domain struct{ key, value string }

// held is a required anti-affinity term of a running pod whose topology
// key is not kubernetes.io/hostname, with the node the pod runs on: the
// term refuses every pod it matches on every node of the domain.
type held struct {
	node string
	term fwk.AffinityTerm
}

// view is what the index knew at one PreFilter. It is never changed once
// made, so Filters of one cycle read it from any goroutine (the framework
// filters nodes in parallel, and a diagnostics request or Phalanx's probe
// may filter beside the scheduling cycle).
type view struct {
	byDomain map[domain][]held
	// keys are the topology keys byDomain holds, so that Filter looks up
	// each of them once instead of every label of the node.
	keys []string
	// sharedHostname: two nodes carry the same kubernetes.io/hostname
	// value, so a hostname domain is not one node.
	sharedHostname bool
}

// slot is what the index read from one NodeInfo of the snapshot's list.
type slot struct {
	name     string
	hostname string
	hasHost  bool
	domains  []domain // one per entry of terms
	terms    []held
}

// index keeps the anti-affinity terms of running pods by domain, read
// again only from the nodes whose NodeInfo generation changed since the
// last PreFilter. Without it the cross-node part of a Filter would need
// the walk over every pod with anti-affinity that upstream's PreFilter
// makes for every pod it schedules.
type index struct {
	mu sync.Mutex
	// infos and gens are the NodeInfo each slot was read from and its
	// generation then, apart from the slots so that the walk of every
	// PreFilter touches as little memory as it can.
	infos     []fwk.NodeInfo
	gens      []int64
	slots     []slot
	hostnames map[string]int // nodes per kubernetes.io/hostname value
	shared    int            // hostname values more than one node carries
	cur       *view
}

func newIndex() *index {
	return &index{hostnames: map[string]int{}, cur: &view{byDomain: map[domain][]held{}}}
}

// update brings the index to nodes, the snapshot's node list, and returns
// its view. Comparing a slot's NodeInfo and generation costs a few
// nanoseconds a node; only changed nodes are read again. The snapshot
// bumps a NodeInfo's generation for every change of the node or its pods
// (but for upstream's pod-group cycle, which assumes pods without a bump:
// PreFilter does not take the lazy path in that cycle).
func (x *index) update(nodes []fwk.NodeInfo) *view {
	x.mu.Lock()
	defer x.mu.Unlock()
	var changed []int
	var old []slot
	if len(x.slots) != len(nodes) {
		// Nodes came or went: every slot is read again.
		old = x.slots
		x.slots = make([]slot, len(nodes))
		x.infos = make([]fwk.NodeInfo, len(nodes))
		x.gens = make([]int64, len(nodes))
		changed = make([]int, len(nodes))
		for i := range nodes {
			changed[i] = i
		}
	} else {
		for i, ni := range nodes {
			if x.infos[i] != ni || x.gens[i] != ni.GetGeneration() {
				changed = append(changed, i)
				old = append(old, x.slots[i])
			}
		}
		if len(changed) == 0 {
			return x.cur
		}
	}
	added := make([]slot, len(changed))
	for j, i := range changed {
		x.infos[i], x.gens[i] = nodes[i], nodes[i].GetGeneration()
		x.slots[i] = read(nodes[i])
		added[j] = x.slots[i]
	}
	x.replace(old, added)
	return x.cur
}

// replace drops the contributions of the slots in old and adds those of
// the slots in added, publishing a new view if the domains or the hostname
// sharing changed. All old contributions go before any is added: a node
// that moved in the list is dropped under its former position and added
// under its new one.
func (x *index) replace(old, added []slot) {
	touched := map[domain]bool{}
	gone := map[string]bool{}
	for _, s := range old {
		if s.hasHost {
			x.countHostname(s.hostname, -1)
		}
		for _, d := range s.domains {
			touched[d] = true
		}
		gone[s.name] = true
	}
	for _, s := range added {
		if s.hasHost {
			x.countHostname(s.hostname, 1)
		}
		for _, d := range s.domains {
			touched[d] = true
		}
	}
	sharedNow := x.shared > 0
	if len(touched) == 0 && sharedNow == x.cur.sharedHostname {
		return
	}
	next := &view{byDomain: x.cur.byDomain, keys: x.cur.keys, sharedHostname: sharedNow}
	if len(touched) == 0 {
		x.cur = next
		return
	}
	// The old view may still be read by a cycle's Filters: its map and
	// slices are copied, never written. Every slice of a touched domain is
	// made afresh, so appending to it cannot reach an old array.
	next.byDomain = make(map[domain][]held, len(x.cur.byDomain)+len(touched))
	for d, hs := range x.cur.byDomain {
		if !touched[d] {
			next.byDomain[d] = hs
		}
	}
	for d := range touched {
		var kept []held
		for _, h := range x.cur.byDomain[d] {
			if !gone[h.node] {
				kept = append(kept, h)
			}
		}
		if len(kept) > 0 {
			next.byDomain[d] = kept
		}
	}
	for _, s := range added {
		for j, d := range s.domains {
			next.byDomain[d] = append(next.byDomain[d], s.terms[j])
		}
	}
	keys := map[string]bool{}
	for d := range next.byDomain {
		keys[d.key] = true
	}
	next.keys = nil
	for k := range keys {
		next.keys = append(next.keys, k)
	}
	x.cur = next
}

func (x *index) countHostname(v string, delta int) {
	before := x.hostnames[v]
	after := before + delta
	if after == 0 {
		delete(x.hostnames, v)
	} else {
		x.hostnames[v] = after
	}
	switch {
	case before <= 1 && after > 1:
		x.shared++
	case before > 1 && after <= 1:
		x.shared--
	}
}

// read takes what the index keeps of one node: its hostname label and
// the non-hostname anti-affinity terms of its pods, each in the domain
// the node is in for the term's key. A term whose key the node has no
// label for refuses nothing, as upstream counts it for no domain.
func read(ni fwk.NodeInfo) slot {
	var s slot
	n := ni.Node()
	if n == nil {
		return s
	}
	s.name = n.Name
	s.hostname, s.hasHost = n.Labels[corev1.LabelHostname]
	for _, pi := range ni.GetPodsWithRequiredAntiAffinity() {
		for _, t := range pi.GetRequiredAntiAffinityTerms() {
			if t.TopologyKey == corev1.LabelHostname {
				continue
			}
			v, ok := n.Labels[t.TopologyKey]
			if !ok {
				continue
			}
			s.domains = append(s.domains, domain{key: t.TopologyKey, value: v})
			s.terms = append(s.terms, held{node: n.Name, term: t})
		}
	}
	return s
}
