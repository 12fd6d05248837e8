package topology

import (
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// domainStateKey holds, in a member's CycleState, the topology domains
// PreFilter found its groups confined to. Filter reads them from there, not
// from the stored plan: PostFilter drops the plan of a member that failed,
// and pod-level preemption (PhalanxPreemption's pod path, which serves
// basic groups) runs Filter after that, in its dry runs. Without the domains it would
// evict victims on nodes outside the group's domain, where the member can
// never go, and the member's nomination there would hold that room from
// every lower-priority pod for good.
const domainStateKey fwk.StateKey = Name + "/domains"

// domainState maps group key strings to the domain value of their
// topology key, and, for device attribute keys, nodes to their domain of
// the key (plan.levels). It is never modified after it is written.
type domainState struct {
	domains map[string]string
	levels  map[string]map[string]string
}

// Clone shares the map: it is read-only.
func (d *domainState) Clone() fwk.StateData { return d }

func writeDomains(state fwk.CycleState, domains map[string]string, levels map[string]map[string]string) {
	if state != nil && len(domains) > 0 {
		state.Write(domainStateKey, &domainState{domains: domains, levels: levels})
	}
}

func readDomains(state fwk.CycleState) (map[string]string, map[string]map[string]string) {
	if state == nil {
		return nil, nil
	}
	d, err := state.Read(domainStateKey)
	if err != nil {
		return nil, nil
	}
	ds := d.(*domainState)
	return ds.domains, ds.levels
}

// pinnedDomains returns, for every group of the hierarchy tree that has a
// topology key, the domain its assumed or bound members already occupy.
// It walks the hierarchy, so it runs once per infeasible plan, and the
// plan's members read the result (plan.pinned).
func (t *Topology) pinnedDomains(tree *groups.Tree) map[string]string {
	nodes := t.handle.SnapshotSharedLister().NodeInfos()
	out := map[string]string{}
	// walk returns the node of some placed member under tr, "" if none.
	var walk func(tr *groups.Tree) string
	walk = func(tr *groups.Tree) string {
		placed := ""
		for _, m := range tr.Members {
			if placed != "" || (m.State != groups.Assumed && m.State != groups.Bound) {
				continue
			}
			placed = m.Node
			if placed == "" {
				placed = m.Pod.Spec.NodeName
			}
		}
		for _, ch := range tr.Children {
			if n := walk(ch); placed == "" {
				placed = n
			}
		}
		if tr.TopologyKey != "" && placed != "" {
			if ni, err := nodes.Get(placed); err == nil && ni.Node() != nil {
				if v, ok := ni.Node().Labels[tr.TopologyKey]; ok {
					out[tr.Key.String()] = v
				}
			}
		}
		return placed
	}
	walk(tree)
	return out
}
