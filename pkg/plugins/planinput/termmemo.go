package planinput

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

// Anti-affinity of running pods: the required anti-affinity terms of pods
// already on nodes, which a member may match and only a probe can place, and
// the memo that keeps formatting them from costing every plan. Apart from the
// members' own constraints because it reads the whole cluster, not the group.

// existingAntiAffinity lists the distinct required anti-affinity terms of
// pods already on nodes. A member that matches one may not join its
// domain; only a probe knows where that is, so such members are probed.
// memo may be nil.
func existingAntiAffinity(infos []fwk.NodeInfo, memo *TermMemo) []term {
	var out []term
	seen := map[string]bool{}
	memo.sweep(func(idsOf func(pod *corev1.Pod, n int) []string) {
		for _, ni := range infos {
			for _, pi := range ni.GetPodsWithRequiredAntiAffinity() {
				pod := pi.GetPod()
				terms := pi.GetRequiredAntiAffinityTerms()
				ids := idsOf(pod, len(terms))
				for i, at := range terms {
					if !seen[ids[i]] {
						seen[ids[i]] = true
						out = append(out, term{id: ids[i], AffinityTerm: at})
					}
				}
			}
		}
	})
	return out
}

// TermMemo remembers the anti-affinity term IDs of running pods by UID. A
// pod's affinity cannot change, and formatting every running pod's terms
// for every plan was an eighth of the scheduler's CPU with 8,000 anti-affine
// pods on 5,000 nodes. Each sweep keeps only the pods it saw, so the memo
// is as large as the anti-affine pods running, never larger. Safe for
// concurrent use; a nil memo formats every time.
type TermMemo struct {
	mu  sync.Mutex
	ids map[types.UID][]string
}

func (m *TermMemo) sweep(visit func(idsOf func(pod *corev1.Pod, n int) []string)) {
	format := func(pod *corev1.Pod, n int) []string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = termID(pod, "anti", i)
		}
		return ids
	}
	if m == nil {
		visit(format)
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	next := make(map[types.UID][]string, len(m.ids))
	visit(func(pod *corev1.Pod, n int) []string {
		ids, ok := m.ids[pod.UID]
		if !ok || len(ids) != n {
			ids = format(pod, n)
		}
		next[pod.UID] = ids
		return ids
	})
	m.ids = next
}
