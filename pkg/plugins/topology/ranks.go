package topology

import (
	"strconv"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
)

// Ranks: where each rank of a hierarchy was last planned or ran, so that a
// member its controller re-creates (a new pod, a new UID, the same index)
// goes back to its place in the ring when the room is still there. Plans
// are keyed by UID and live seconds; this outlives them, per root, until
// the root is forgotten.

func rankKey(leaf string, rank int64) string {
	return leaf + "#" + strconv.FormatInt(rank, 10)
}

// preferRanks gives every pending ranked pod of input the node its rank
// last had, and reports whether input has a pending ranked pod at all: a
// hierarchy without one has nothing to remember (rememberRanks).
func (t *Topology) preferRanks(root groups.Key, input *placement.Group) (ranked bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	known := t.ranks[root]
	var walk func(g *placement.Group)
	walk = func(g *placement.Group) {
		for i := range g.Pending {
			if p := &g.Pending[i]; p.Ranked {
				ranked = true
				if known != nil {
					p.Prefer = known[rankKey(g.Name, p.Rank)]
				}
			}
		}
		for _, ch := range g.Children {
			walk(ch)
		}
	}
	walk(input)
	return ranked
}

// rememberRanks records the nodes of tree's ranked members: those placed
// already, and those assignments plan. Called only for plans with pending
// ranked members, so an unranked hierarchy costs no pass over its members.
func (t *Topology) rememberRanks(root groups.Key, tree *groups.Tree, assignments map[string]string) {
	var seen map[string]string
	var walk func(tr *groups.Tree)
	walk = func(tr *groups.Tree) {
		leaf := tr.Key.String()
		for _, m := range tr.Members {
			rank, ok := planinput.RankOf(m.Pod)
			if !ok {
				continue
			}
			node := m.Node
			if m.State == groups.Pending {
				node = assignments[planinput.PodKey(m.Pod)]
			} else if m.State != groups.Assumed && m.State != groups.Bound {
				continue
			}
			if node == "" {
				continue
			}
			if seen == nil {
				seen = map[string]string{}
			}
			seen[rankKey(leaf, rank)] = node
		}
		for _, ch := range tr.Children {
			walk(ch)
		}
	}
	walk(tree)
	if len(seen) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ranks == nil {
		t.ranks = map[groups.Key]map[string]string{}
	}
	known := t.ranks[root]
	if known == nil {
		known = map[string]string{}
		t.ranks[root] = known
	}
	for k, node := range seen {
		known[k] = node
	}
}
