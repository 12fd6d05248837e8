package topology

import (
	"maps"
	"time"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// StoredPlan is the plan the plugin holds for a hierarchy, as diagnostics
// report it.
type StoredPlan struct {
	Made time.Time
	// Infeasible is set when the plan found no placement; the plugin
	// answers the hierarchy's members with it while the snapshot stands.
	Infeasible *placement.Infeasible
	// Assignments maps pod UIDs to their planned node; Domains group key
	// strings to their domain value.
	Assignments map[string]string
	Domains     map[string]string
}

// StoredPlan returns the plan held for root, if any.
func (t *Topology) StoredPlan(root groups.Key) (StoredPlan, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.plans[root]
	if p == nil {
		return StoredPlan{}, false
	}
	return StoredPlan{Made: p.created, Infeasible: p.infeasible, Assignments: maps.Clone(p.assignments), Domains: maps.Clone(p.domains)}, true
}

// PlanOptions are the planner options the profile configured.
func (t *Topology) PlanOptions() placement.Options { return t.opts }
