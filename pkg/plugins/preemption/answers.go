package preemption

import (
	"errors"
	"hash/fnv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// One victim search per group per change of the cluster.
//
// Every pod deletion anywhere requeues every member of a gang that cannot
// fit, and each member's PostFilter would search victims over every pod of
// the cluster: a gang of 1,000 members runs 1,000 identical searches per
// deletion. The search depends on the group, not on the member asking: on
// its hierarchy and priority, the snapshot, the room nominated to pods
// outside the hierarchy, and the groups the candidates belong to. An
// answer that evicts nobody is therefore kept per hierarchy root with a
// fingerprint of those inputs (searchKey), and a member asking in the same
// state gets it without searching. An answer that evicts is acted on at
// once, and the group's members then wait for its victims (victimsLeft).

// searchReuse bounds how long an answer is shared, for inputs the
// fingerprint does not follow (a PriorityClass's value, a namespace's
// labels, what the profile's filters read besides the nodes).
const searchReuse = 10 * time.Second

// searchKey is what a group's victim search read, as far as it can change
// between two members' cycles.
type searchKey struct {
	prio int32
	// nodes and gens are the snapshot: node generations only grow, so
	// their sum moves with every change of any node's pods or the node.
	nodes int
	gens  int64
	// hierarchy is the group's HierarchyRevision: its objects, members
	// and their priorities.
	hierarchy uint64
	// groups moves with every group object of the cluster (groupChanged):
	// a candidate's priority and eviction unit come from its groups, which
	// no node generation follows.
	groups uint64
	// nominated sums a hash of each nomination of a pod outside the
	// hierarchy, whose room the search counts as used.
	nominated uint64
}

// searchAnswer is a search's outcome: searched, or the error search
// returned.
type searchAnswer struct {
	search *searched
	err    error
	// expires is when the first protection the search honoured ends,
	// zero when none: the candidates change then, with no event.
	expires time.Time
}

// sharedAnswer is an answer kept for root's members.
type sharedAnswer struct {
	key    searchKey
	at     time.Time
	answer searchAnswer
}

// groupChanged moves the group epoch with every change of a group object.
func (p *Preemption) groupChanged(_ groups.Key, object bool) {
	if object {
		p.groupEpoch.Add(1)
	}
}

// searchKeyOf is the fingerprint of root's search at prio over infos; false
// when the group is unknown. It is read before searching, so that a change
// made while the search runs leaves the answer stale rather than seen.
func (p *Preemption) searchKeyOf(root groups.Key, prio int32, infos []fwk.NodeInfo) (searchKey, bool) {
	rev, ok := p.groups.HierarchyRevision(root)
	if !ok {
		return searchKey{}, false
	}
	k := searchKey{prio: prio, nodes: len(infos), hierarchy: rev, groups: p.groupEpoch.Load()}
	for _, ni := range infos {
		k.gens += ni.GetGeneration()
		if ni.Node() == nil {
			continue
		}
		node := ni.Node().Name
		for _, pi := range p.handle.NominatedPodsForNode(node) {
			if pod := pi.GetPod(); !p.inHierarchy(pod.UID, root) {
				k.nominated += nominationHash(node, pod.UID)
			}
		}
	}
	return k, true
}

// inHierarchy reports whether the pod uid is a member of the hierarchy
// under root, whose nominations the search does not count as used.
func (p *Preemption) inHierarchy(uid types.UID, root groups.Key) bool {
	leaf, ok := p.groups.GroupOf(uid)
	if !ok {
		return false
	}
	r, ok := p.groups.RootOf(leaf)
	return ok && r == root
}

func nominationHash(node string, uid types.UID) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(node))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(uid))
	return h.Sum64()
}

// sharedSearch returns the answer kept for root at key, nil when there is
// none that may answer.
func (p *Preemption) sharedSearch(root groups.Key, key searchKey) *searchAnswer {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.answers[root]
	now := p.now()
	if s == nil || s.key != key || now.Sub(s.at) >= searchReuse || !s.answer.expires.IsZero() && !now.Before(s.answer.expires) {
		return nil
	}
	return &s.answer
}

// keepSearch keeps a for root's other members when it evicts nobody. A
// hierarchy whose members use ResourceClaims is never answered for: which
// devices are free moves with claims and slices, which no part of the key
// follows.
func (p *Preemption) keepSearch(root groups.Key, key searchKey, tree *groups.Tree, a searchAnswer) {
	var inf *placement.Infeasible
	var prot *pluginrt.ProtectedVictims
	switch {
	case errors.Is(a.err, errNoCandidates), errors.As(a.err, &inf), errors.As(a.err, &prot):
	case a.err == nil && len(a.search.Result.Victims) == 0:
		// Only the verdict is read again; the candidates may be many.
		a.search = &searched{Result: a.search.Result}
	default:
		return
	}
	if usesClaims(tree) {
		return
	}
	p.mu.Lock()
	if p.answers == nil {
		p.answers = map[groups.Key]*sharedAnswer{}
	}
	p.answers[root] = &sharedAnswer{key: key, at: p.now(), answer: a}
	p.mu.Unlock()
}

// usesClaims reports whether a member of the hierarchy has ResourceClaims.
func usesClaims(t *groups.Tree) bool {
	for _, m := range t.Members {
		if len(m.Pod.Spec.ResourceClaims) > 0 {
			return true
		}
	}
	for _, ch := range t.Children {
		if usesClaims(ch) {
			return true
		}
	}
	return false
}
