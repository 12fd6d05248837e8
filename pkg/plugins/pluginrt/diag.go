package pluginrt

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// The diagnostics (pkg/inspect) read the plugins through the interfaces
// below and nothing else, so that they link no plugin package and a
// plugin's internals can change without them. Every method only reads:
// none changes what the plugin holds or what its next cycle does.

// Diagnostics is what the diagnostics read of one profile's plugins. A nil
// field is a plugin the profile does not run.
type Diagnostics struct {
	Plans   PlanReader   // PhalanxTopology
	Victims VictimReader // PhalanxPreemption
	Permits PermitWaits  // PhalanxGang
}

// Diagnostics returns what the diagnostics may read of the Phalanx plugins
// the profile behind h runs.
func (r *Runtime) Diagnostics(h fwk.Handle) Diagnostics {
	var d Diagnostics
	if p, ok := r.Plugin(h, TopologyName); ok {
		d.Plans, _ = p.(PlanReader)
	}
	if p, ok := r.Plugin(h, PreemptionName); ok {
		d.Victims, _ = p.(VictimReader)
	}
	if p, ok := r.Plugin(h, GangName); ok {
		d.Permits, _ = p.(PermitWaits)
	}
	return d
}

// View is the state a diagnostic question is answered against, which is
// never the scheduling cycle's: the loop rewrites its snapshot without a
// lock. Handle is a framework of the same profile (its PreFilter and
// Filter plugins, configured alike) over the diagnostics' own snapshot,
// whose nodes Nodes lists; Nominated is the room nominated to pending
// pods, from the scheduler's nominator. A plugin probes the profile's
// filters through Handle with a prober of its own, as it does in a cycle.
type View struct {
	Handle    fwk.Handle
	Nodes     []fwk.NodeInfo
	Nominated func(node string) []fwk.PodInfo
}

// PlanReader is what the diagnostics read of PhalanxTopology.
type PlanReader interface {
	// StoredPlan returns the plan the plugin holds for the hierarchy
	// rooted at root, if any.
	StoredPlan(root groups.Key) (StoredPlan, bool)
	// PlanInput is the planner input the plugin's next plan of tree would
	// be made from against v: the nodes, the group with the constraints of
	// the profile's filters and the nodes earlier plans were refused on,
	// and the profile's planner options. Plans key pods by UID.
	PlanInput(ctx context.Context, v View, tree *groups.Tree) (PlanInput, error)
}

// PlanInput is placement.PlanGroup's input.
type PlanInput struct {
	Nodes   []placement.Node
	Group   *placement.Group
	Options placement.Options
}

// StoredPlan is a plan PhalanxTopology holds for a hierarchy.
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

// VictimReader is what the diagnostics read of PhalanxPreemption.
type VictimReader interface {
	// LastEviction returns root's last preemption while the group waits
	// for its victims to go, false when there is none or every victim's
	// wait has ended.
	LastEviction(root groups.Key) (Eviction, bool)
	// SearchVictims is PostFilter's victim search for tree at priority
	// prio against v, listing up to explainDomains of the closest domains
	// when no set of victims is enough. The error is ErrNoCandidates, a
	// *placement.Infeasible when no set of victims makes the group fit, or
	// a failure.
	SearchVictims(ctx context.Context, v View, tree *groups.Tree, prio int32, explainDomains int) (*VictimSearch, error)
}

// ErrNoCandidates says no running pod has a priority below the group's.
var ErrNoCandidates = errors.New("no lower-priority pods to preempt")

// ProtectedVictims says that a group's search found room only by evicting pods
// still within their minimum runtime: the group waits until Until, when
// the last of the victims it needs may go.
type ProtectedVictims struct {
	Until time.Time
	// MinRuntime is the minimum runtime of the victim protected longest.
	MinRuntime time.Duration
	// Victims counts the protected pods the search would need.
	Victims int
}

func (e *ProtectedVictims) Error() string {
	return fmt.Sprintf("%d of the pods it would preempt are protected by their minimum runtime until %s (minimum runtime %s)", e.Victims, e.Until.UTC().Format(time.RFC3339), e.MinRuntime)
}

// VictimSearch is the outcome of a victim search.
type VictimSearch struct {
	Result *placement.Preemption
	// Pods are the candidate victims by placement key (their UIDs), and
	// Candidates the search's view of them (priority, unit, PDB).
	Pods       map[string]*corev1.Pod
	Candidates map[string]placement.Victim
}

// Eviction is PhalanxPreemption's last preemption for a hierarchy while
// its victims may still be terminating: the group does not preempt again
// until they are gone or their wait has ended.
type Eviction struct {
	At time.Time
	// Victims are namespace/name, sorted.
	Victims []string
	// Left are the victims the API server still has.
	Left []string
}

// PermitWaits is what the diagnostics read of PhalanxGang: when the
// current round of a hierarchy (by its root) started waiting in Permit,
// false when none waits.
type PermitWaits interface {
	PermitSince(root groups.Key) (time.Time, bool)
}
