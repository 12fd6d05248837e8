package workloadbuilder

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// validateStructure is the structural layer: the rules the CRD schema and
// upstream's declarative validation apply to the building blocks, checked on
// the user's input so errors name the user's fields, plus the tree-wide
// rules of the Workload (unique names, depth, list sizes, one priority).
func validateStructure(tree *node, old *oldState) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	tree.walk(func(n *node) {
		it := n.item
		errs = append(errs, validateName(it, seen)...)
		if n.composite {
			errs = append(errs, validateCompositeBlocks(it)...)
		} else {
			errs = append(errs, validatePodGroupBlocks(it)...)
		}
		errs = append(errs, validatePriorityBlock(it)...)
		errs = append(errs, validateShape(n)...)
		if n.parent != nil {
			errs = append(errs, validateSamePriority(n, n.parent)...)
		}
		if old != nil {
			errs = append(errs, old.compare(n)...)
		}
	})
	return errs
}

func validateName(it *WorkloadItem, seen map[string]bool) field.ErrorList {
	path := it.namePath()
	if it.Name == "" {
		return field.ErrorList{field.Required(path, "a template name is needed to name the group <workload>-<name>")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(it.Name) {
		errs = append(errs, field.Invalid(path, it.Name, msg))
	}
	// Names must be unique in the whole tree, not just among siblings: the
	// group objects of all levels share one namespace, <workload>-<name>.
	if seen[it.Name] {
		errs = append(errs, field.Duplicate(path, it.Name))
	}
	seen[it.Name] = true
	return errs
}

// validateShape checks the item's place in the tree: composites need
// children, lists hold at most v1alpha1.MaxTemplates, and a composite at the
// last level would push its children past v1alpha1.MaxTreeDepth.
func validateShape(n *node) field.ErrorList {
	it := n.item
	if !n.composite {
		return nil
	}
	var errs field.ErrorList
	if len(n.children) == 0 {
		path := it.ChildrenPath
		if path == nil {
			path = it.Path
		}
		errs = append(errs, field.Required(path, MsgAtLeastOneChild))
	}
	leaves := len(n.children) - len(compositeChildren(n))
	if leaves > v1alpha1.MaxTemplates {
		errs = append(errs, field.TooMany(it.childrenPath(listPodGroupTemplates), leaves, v1alpha1.MaxTemplates))
	}
	if composites := len(compositeChildren(n)); composites > v1alpha1.MaxTemplates {
		errs = append(errs, field.TooMany(it.childrenPath(listCompositePodGroupTemplates), composites, v1alpha1.MaxTemplates))
	}
	// Report the shallowest offender only; anything deeper sits under it.
	if n.level == v1alpha1.MaxTreeDepth {
		errs = append(errs, field.Invalid(it.Path, it.Name, MsgMaxDepth))
	}
	return errs
}

// validateSamePriority enforces upstream's rule that one hierarchy has one
// priority. Comparing each item with its parent is enough (equality carries
// down the tree) and blames only the item that introduced a different value:
// children inherit their parent's values, so a child that says nothing
// agrees with its parent even when that parent is the culprit.
func validateSamePriority(n, parent *node) field.ErrorList {
	var errs field.ErrorList
	loc := n.item.priorityLoc()
	if n.cfg.PriorityClassName != parent.cfg.PriorityClassName {
		errs = append(errs, field.Invalid(loc.child("priorityClassName"), n.cfg.PriorityClassName, MsgPriorityMismatch))
	}
	if !equalPtr(n.cfg.Priority, parent.cfg.Priority) {
		errs = append(errs, field.Invalid(loc.child("priority"), derefOrNil(n.cfg.Priority), MsgPriorityMismatch))
	}
	return errs
}

func validatePodGroupBlocks(it *WorkloadItem) field.ErrorList {
	var errs field.ErrorList
	if p := it.Input.SchedulingPolicy.Value; p != nil {
		loc := it.policyLoc(false)
		errs = append(errs, validateUnion(loc.base, MsgPolicyUnion, member{"basic", p.Basic != nil}, member{"gang", p.Gang != nil})...)
		if p.Gang != nil {
			errs = append(errs, validateMinimum(loc.child("gang", "minCount"), p.Gang.MinCount)...)
		}
	}
	if c := it.Input.SchedulingConstraints.Value; c != nil {
		errs = append(errs, validateTopology(it.constraintsLoc(false), c.Topology)...)
		errs = append(errs, validatePreferredTopology(it.constraintsLoc(false), c.Topology, c.PreferredTopology)...)
	}
	if d := it.Input.DisruptionMode.Value; d != nil {
		errs = append(errs, validateUnion(it.disruptionLoc(false).base, MsgDisruptionModeUnion, member{"single", d.Single != nil}, member{"all", d.All != nil})...)
	}
	errs = append(errs, validateClaims(it.claimsLoc(), it.Input.ResourceClaims.Value)...)
	return errs
}

func validateCompositeBlocks(it *WorkloadItem) field.ErrorList {
	var errs field.ErrorList
	if p := it.Input.CompositeSchedulingPolicy.Value; p != nil {
		loc := it.policyLoc(true)
		errs = append(errs, validateUnion(loc.base, MsgPolicyUnion, member{"basic", p.Basic != nil}, member{"gang", p.Gang != nil})...)
		if p.Gang != nil {
			errs = append(errs, validateMinimum(loc.child("gang", "minGroupCount"), p.Gang.MinGroupCount)...)
		}
	}
	if c := it.Input.CompositeSchedulingConstraints.Value; c != nil {
		errs = append(errs, validateTopology(it.constraintsLoc(true), c.Topology)...)
	}
	if d := it.Input.CompositeDisruptionMode.Value; d != nil {
		errs = append(errs, validateUnion(it.disruptionLoc(true).base, MsgDisruptionModeUnion, member{"single", d.Single != nil}, member{"all", d.All != nil})...)
	}
	return errs
}

var supportedPreemptionPolicies = []v1alpha1.PreemptionPolicy{v1alpha1.PreemptLowerPriority, v1alpha1.PreemptNever}

func validatePriorityBlock(it *WorkloadItem) field.ErrorList {
	p := it.Input.Priority.Value
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	loc := it.priorityLoc()
	if p.PriorityClassName != "" {
		for _, msg := range validation.IsDNS1123Subdomain(p.PriorityClassName) {
			errs = append(errs, field.Invalid(loc.child("priorityClassName"), p.PriorityClassName, msg))
		}
	}
	if pp := p.PreemptionPolicy; pp != nil && !slices.Contains(supportedPreemptionPolicies, *pp) {
		errs = append(errs, field.NotSupported(loc.child("preemptionPolicy"), *pp, supportedPreemptionPolicies))
	}
	return errs
}

func validateTopology(loc locator, topology []v1alpha1.TopologyConstraint) field.ErrorList {
	if len(topology) > 1 {
		// Further checks would only describe entries that must go anyway.
		return field.ErrorList{field.TooMany(loc.child("topology"), len(topology), 1)}
	}
	var errs field.ErrorList
	for i, tc := range topology {
		path := loc.at(func(p *field.Path) *field.Path { return p.Child("topology").Index(i).Child("key") })
		if tc.Key == "" {
			errs = append(errs, field.Required(path, "a node label key, such as topology.kubernetes.io/zone"))
			continue
		}
		for _, msg := range v1alpha1.ValidateTopologyKey(tc.Key) {
			errs = append(errs, field.Invalid(path, tc.Key, msg))
		}
	}
	return errs
}

// validatePreferredTopology checks a leaf's preferred levels as the CRD
// schema does: at most MaxPreferredTopology label keys, each once, none
// equal to the required key (a level must be narrower than it). Whether
// the nodes agree with the order is the scheduler's to say.
func validatePreferredTopology(loc locator, required, preferred []v1alpha1.TopologyConstraint) field.ErrorList {
	if len(preferred) > v1alpha1.MaxPreferredTopology {
		return field.ErrorList{field.TooMany(loc.child("preferredTopology"), len(preferred), v1alpha1.MaxPreferredTopology)}
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, tc := range preferred {
		entry := loc.at(func(p *field.Path) *field.Path { return p.Child("preferredTopology").Index(i) })
		path := loc.at(func(p *field.Path) *field.Path { return p.Child("preferredTopology").Index(i).Child("key") })
		switch {
		case tc.Key == "":
			errs = append(errs, field.Required(path, "a node label key, such as topology.phalanx.dev/rack"))
			continue
		case seen[tc.Key]:
			errs = append(errs, field.Duplicate(entry, tc.Key))
			continue
		case len(required) > 0 && required[0].Key == tc.Key:
			errs = append(errs, field.Invalid(path, tc.Key, MsgPreferredIsRequired))
			continue
		}
		seen[tc.Key] = true
		for _, msg := range v1alpha1.ValidateTopologyKey(tc.Key) {
			errs = append(errs, field.Invalid(path, tc.Key, msg))
		}
	}
	return errs
}

func validateClaims(loc locator, claims []WorkloadPodGroupResourceClaim) field.ErrorList {
	var errs field.ErrorList
	if len(claims) > v1alpha1.MaxResourceClaims {
		errs = append(errs, field.TooMany(loc.base, len(claims), v1alpha1.MaxResourceClaims))
	}
	seen := map[string]bool{}
	for i, c := range claims {
		at := func(name ...string) *field.Path {
			return loc.at(func(p *field.Path) *field.Path {
				p = p.Index(i)
				if len(name) > 0 {
					p = p.Child(name[0])
				}
				return p
			})
		}
		switch {
		case c.Name == "":
			errs = append(errs, field.Required(at("name"), "claims are keyed by name"))
		case seen[c.Name]:
			errs = append(errs, field.Duplicate(at("name"), c.Name))
		default:
			for _, msg := range validation.IsDNS1123Label(c.Name) {
				errs = append(errs, field.Invalid(at("name"), c.Name, msg))
			}
		}
		seen[c.Name] = true
		errs = append(errs, validateUnion(at(), MsgClaimSourceUnion,
			member{"resourceClaimName", c.ResourceClaimName != nil},
			member{"resourceClaimTemplateName", c.ResourceClaimTemplateName != nil})...)
		for _, src := range []struct {
			field string
			value *string
		}{{"resourceClaimName", c.ResourceClaimName}, {"resourceClaimTemplateName", c.ResourceClaimTemplateName}} {
			if src.value == nil {
				continue
			}
			for _, msg := range validation.IsDNS1123Subdomain(*src.value) {
				errs = append(errs, field.Invalid(at(src.field), *src.value, msg))
			}
		}
	}
	return errs
}

// member is one arm of a union and whether it is set.
type member struct {
	name string
	set  bool
}

// validateUnion reports a union with no member or several. The bad value
// lists the members that are set, so "both" errors say which both.
func validateUnion(path *field.Path, msg string, members ...member) field.ErrorList {
	var set []string
	for _, m := range members {
		if m.set {
			set = append(set, m.name)
		}
	}
	switch len(set) {
	case 1:
		return nil
	case 0:
		return field.ErrorList{field.Invalid(path, "", msg)}
	default:
		return field.ErrorList{field.Invalid(path, fmt.Sprintf("{%s}", strings.Join(set, ", ")), msg)}
	}
}

func validateMinimum(path *field.Path, v *int32) field.ErrorList {
	if v != nil && *v < 1 {
		return field.ErrorList{field.Invalid(path, *v, MsgMinimum)}
	}
	return nil
}

func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// derefOrNil makes a pointer printable as a bad value.
func derefOrNil[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
