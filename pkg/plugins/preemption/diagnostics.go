package preemption

import (
	"context"
	"sort"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// The diagnostics read the plugin through this interface only.
var _ pluginrt.VictimReader = &Preemption{}

// LastEviction returns root's remembered preemption, false when there is
// none or the wait for every victim has ended. It only reads: the memory is
// cleared by the group's next PostFilter.
func (p *Preemption) LastEviction(root groups.Key) (pluginrt.Eviction, bool) {
	pe, victims := p.pendingVictims(root)
	if pe == nil {
		return pluginrt.Eviction{}, false
	}
	now := p.now()
	e := pluginrt.Eviction{At: pe.at}
	waiting := false
	for uid, v := range victims {
		e.Victims = append(e.Victims, v.name)
		pod := p.victimPod(uid, v)
		if pod != nil {
			e.Left = append(e.Left, v.name)
		}
		waiting = waiting || !now.After(waitEnd(pe.at, v, pod))
	}
	if !waiting {
		return pluginrt.Eviction{}, false
	}
	sort.Strings(e.Victims)
	sort.Strings(e.Left)
	return e, true
}

// SearchVictims is PostFilter's victim search against v: the same search,
// with the profile's filters probed through v's framework rather than the
// cycle's, and never shared with the cycle's answers (answers.go).
func (p *Preemption) SearchVictims(ctx context.Context, v pluginrt.View, tree *groups.Tree, prio int32, explainDomains int) (*pluginrt.VictimSearch, error) {
	s, _, err := p.search(ctx, v.Handle, p.viewProber.For(v.Handle), tree, prio, v.Nodes, v.Nominated, placement.Options{ExplainDomains: explainDomains})
	return s, err
}
