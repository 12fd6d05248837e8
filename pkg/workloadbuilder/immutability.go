package workloadbuilder

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// facets are the parts of a template that are frozen once its groups exist:
// the scheduler has already admitted and placed pods under them. A leaf
// gang's minCount is deliberately absent: it may change.
type facets struct {
	composite bool
	// policySet is false when the policy is unknown (a malformed block), in
	// which case the structural union error is the useful one.
	policySet     bool
	policy        PolicyKind
	minGroupCount *int32
	topology      []string
	// disruptionSet is false for a malformed disruption block.
	disruptionSet bool
	disruption    DisruptionModeKind
}

// oldState holds the stored configuration, keyed by template name, and says
// which side of the new tree to compare it with.
type oldState struct {
	byName map[string]facets
	// againstResolved compares with the new resolved configuration (the old
	// side is a compiled Workload) instead of the new user blocks (the old
	// side is an item tree).
	againstResolved bool
}

func oldStateFor(in ValidationInput) *oldState {
	switch {
	case in.OldRoot != nil:
		s := &oldState{byName: map[string]facets{}}
		var walk func(it *WorkloadItem)
		walk = func(it *WorkloadItem) {
			if it == nil {
				return
			}
			if _, dup := s.byName[it.Name]; !dup {
				s.byName[it.Name] = inputFacets(it)
			}
			for _, c := range it.Children {
				walk(c)
			}
		}
		walk(in.OldRoot)
		return s
	case in.OldWorkload != nil:
		s := &oldState{byName: map[string]facets{}, againstResolved: true}
		idx := indexTemplates(in.OldWorkload)
		for name, e := range idx.byName {
			s.byName[name] = templateFacets(e)
		}
		return s
	default:
		return nil
	}
}

// compare reports each frozen facet of n that differs from its stored
// counterpart, at the path of the new block. A template new in this update,
// or one that switched between leaf and composite (a different object kind,
// so nothing to mutate), has nothing to compare with.
func (s *oldState) compare(n *node) field.ErrorList {
	old, ok := s.byName[n.item.Name]
	if !ok || old.composite != n.composite {
		return nil
	}
	cur := inputFacets(n.item)
	if s.againstResolved {
		cur = configFacets(n)
	}
	it := n.item
	var errs field.ErrorList
	if old.policySet && cur.policySet {
		if old.policy != cur.policy {
			errs = append(errs, field.Invalid(it.policyLoc(n.composite).base, string(cur.policy), MsgPolicyKindImmutable))
		} else if n.composite && cur.policy == GangPolicy && !equalPtr(old.minGroupCount, cur.minGroupCount) {
			errs = append(errs, field.Invalid(it.policyLoc(true).child("gang", "minGroupCount"), derefOrNil(cur.minGroupCount), MsgMinGroupCountImmutable))
		}
	}
	if !slices.Equal(old.topology, cur.topology) {
		errs = append(errs, field.Invalid(it.constraintsLoc(n.composite).base, strings.Join(cur.topology, ","), MsgConstraintsImmutable))
	}
	if old.disruptionSet && cur.disruptionSet && old.disruption != cur.disruption {
		errs = append(errs, field.Invalid(it.disruptionLoc(n.composite).base, string(cur.disruption), MsgDisruptionModeImmutable))
	}
	return errs
}

// inputFacets reads the frozen facets from the user's blocks. An unset block
// yields the zero facet (policy "", no topology, mode ""), so adding or
// removing a block counts as a change, as upstream recommends for embedding
// APIs (+k8s:immutable, or NoSet/NoUnset for the policy).
func inputFacets(it *WorkloadItem) facets {
	f := facets{composite: it.isComposite(), policySet: true, disruptionSet: true}
	in := &it.Input
	if f.composite {
		if p := in.CompositeSchedulingPolicy.Value; p != nil {
			f.policy = p.policyKind()
			f.policySet = f.policy != ""
			if f.policy == GangPolicy {
				f.minGroupCount = p.Gang.MinGroupCount
			}
		}
		if c := in.CompositeSchedulingConstraints.Value; c != nil {
			f.topology = topologyKeys(c.Topology)
		}
		if d := in.CompositeDisruptionMode.Value; d != nil {
			f.disruption = d.modeKind()
			f.disruptionSet = f.disruption != ""
		}
		return f
	}
	if p := in.SchedulingPolicy.Value; p != nil {
		f.policy = p.policyKind()
		f.policySet = f.policy != ""
	}
	if c := in.SchedulingConstraints.Value; c != nil {
		f.topology = topologyKeys(c.Topology, c.PreferredTopology)
	}
	if d := in.DisruptionMode.Value; d != nil {
		f.disruption = d.modeKind()
		f.disruptionSet = f.disruption != ""
	}
	return f
}

// configFacets reads the frozen facets from a resolved configuration, the
// same shape BuildWorkload would compile.
func configFacets(n *node) facets {
	f := facets{
		composite:     n.composite,
		policySet:     true,
		policy:        n.cfg.Policy,
		topology:      topologyKeys(n.cfg.Topology, n.cfg.PreferredTopology),
		disruptionSet: true,
		disruption:    n.cfg.DisruptionMode,
	}
	if n.composite && f.policy == GangPolicy {
		f.minGroupCount = n.cfg.MinCount
	}
	return f
}

// templateFacets reads the frozen facets from a stored template.
func templateFacets(e templateEntry) facets {
	f := facets{policySet: true, disruptionSet: true}
	if t := e.leaf; t != nil {
		switch {
		case t.SchedulingPolicy.Gang != nil:
			f.policy = GangPolicy
		case t.SchedulingPolicy.Basic != nil:
			f.policy = BasicPolicy
		}
		if t.SchedulingConstraints != nil {
			f.topology = topologyKeys(t.SchedulingConstraints.Topology, t.SchedulingConstraints.PreferredTopology)
		}
		if d := t.DisruptionMode; d != nil {
			f.disruption = modeOf(d.Single != nil, d.All != nil)
		}
		f.policySet = f.policy != ""
		return f
	}
	t := e.composite
	f.composite = true
	switch {
	case t.SchedulingPolicy.Gang != nil:
		f.policy = GangPolicy
		f.minGroupCount = &t.SchedulingPolicy.Gang.MinGroupCount
	case t.SchedulingPolicy.Basic != nil:
		f.policy = BasicPolicy
	}
	if t.SchedulingConstraints != nil {
		f.topology = topologyKeys(t.SchedulingConstraints.Topology)
	}
	if d := t.DisruptionMode; d != nil {
		f.disruption = modeOf(d.Single != nil, d.All != nil)
	}
	f.policySet = f.policy != ""
	return f
}

func modeOf(single, all bool) DisruptionModeKind {
	switch {
	case all:
		return AllMode
	case single:
		return SingleMode
	default:
		return ""
	}
}

// topologyKeys flattens the required key and the preferred levels (marked
// as such), so that a change to either is a change of the facet.
func topologyKeys(tcs []v1alpha1.TopologyConstraint, preferred ...[]v1alpha1.TopologyConstraint) []string {
	var keys []string
	for _, tc := range tcs {
		keys = append(keys, tc.Key)
	}
	for _, p := range preferred {
		for _, tc := range p {
			keys = append(keys, "preferred "+tc.Key)
		}
	}
	return keys
}
