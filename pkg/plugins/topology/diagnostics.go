package topology

import (
	"context"
	"maps"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// The diagnostics read the plugin through this interface only.
var _ pluginrt.PlanReader = &Topology{}

// StoredPlan returns the plan held for root, if any.
func (t *Topology) StoredPlan(root groups.Key) (pluginrt.StoredPlan, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.plans[root]
	if p == nil {
		return pluginrt.StoredPlan{}, false
	}
	return pluginrt.StoredPlan{Made: p.created, Infeasible: p.infeasible, Assignments: maps.Clone(p.assignments), Domains: maps.Clone(p.domains)}, true
}

// PlanInput is the input of tree's next plan against v, with the
// profile's planner options and this plugin's memory of refused nodes. The
// profile's filters are probed through v's framework, never the cycle's.
func (t *Topology) PlanInput(ctx context.Context, v pluginrt.View, tree *groups.Tree) (pluginrt.PlanInput, error) {
	cons := t.constraintsFor(ctx, v.Handle, t.viewProber.For(v.Handle), tree.Key, v.Nodes)
	input, members, err := planinput.BuildInput(tree, cons)
	if err != nil {
		return pluginrt.PlanInput{}, err
	}
	opts := t.opts
	opts.Extra = cons.Extra()
	opts.Domains = cons.DeviceDomains(ctx, tree, input)
	return pluginrt.PlanInput{Nodes: planinput.NodesFromSnapshot(v.Nodes, v.Nominated, members), Group: input, Options: opts}, nil
}
