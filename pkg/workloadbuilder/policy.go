package workloadbuilder

import (
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validatePolicy is the controller-policy layer. It runs even when the
// structural layer is off, because nothing upstream of the controller knows
// what this controller supports, and it judges the resolved configuration,
// because a default or an adjustment can be just as unsupported as user
// input. Errors go to the path of the block whose value is at fault.
func (b *Builder) validatePolicy(tree *node) field.ErrorList {
	var errs field.ErrorList
	tree.walk(func(n *node) {
		errs = append(errs, validateBlockKinds(n)...)
		errs = append(errs, b.validateResolved(n)...)
	})
	return errs
}

// validateBlockKinds rejects PodGroup blocks on an item that compiles to a
// composite template. Resolution ignores them there, so letting them pass
// would drop the user's setting without a word. This is a contract between
// the controller and the library, so it holds even with the structural
// layer off.
func validateBlockKinds(n *node) field.ErrorList {
	if !n.composite {
		return nil
	}
	it := n.item
	in := &it.Input
	var errs field.ErrorList
	if in.SchedulingPolicy.Value != nil {
		errs = append(errs, field.Forbidden(it.policyLoc(false).base, MsgPodGroupBlockOnComposite))
	}
	if in.SchedulingConstraints.Value != nil {
		errs = append(errs, field.Forbidden(it.constraintsLoc(false).base, MsgPodGroupBlockOnComposite))
	}
	if in.DisruptionMode.Value != nil {
		errs = append(errs, field.Forbidden(it.disruptionLoc(false).base, MsgPodGroupBlockOnComposite))
	}
	if len(in.ResourceClaims.Value) > 0 || len(n.cfg.ResourceClaims) > 0 {
		// Claims on a composite can also come from Defaults or Adjust; the
		// error still names the place the claims would be read from.
		errs = append(errs, field.Forbidden(it.claimsLoc().base, MsgPodGroupBlockOnComposite))
	}
	return errs
}

func (b *Builder) validateResolved(n *node) field.ErrorList {
	it, cfg := n.item, n.cfg
	policyLoc := it.policyLoc(n.composite)
	disruptionPath := it.disruptionLoc(n.composite).base
	var errs field.ErrorList

	if !slices.Contains(b.opts.AllowedPolicies, cfg.Policy) {
		errs = append(errs, field.NotSupported(policyLoc.base, string(cfg.Policy), b.opts.AllowedPolicies))
	}
	if cfg.Policy == GangPolicy {
		errs = append(errs, validateResolvedCount(n, policyLoc)...)
	}

	if cfg.DisruptionMode != "" && !slices.Contains(b.opts.AllowedDisruptionModes, cfg.DisruptionMode) {
		errs = append(errs, field.NotSupported(disruptionPath, string(cfg.DisruptionMode), b.opts.AllowedDisruptionModes))
	}
	// A required key from a default and a preferred level from the user
	// (or the other way round) can meet only here; what the user's own
	// block says is the structural layer's to report.
	if len(cfg.Topology) > 0 {
		in := it.Input.SchedulingConstraints.Value
		own := !b.opts.DisableDeclarativeValidation && in != nil && len(in.Topology) > 0 && in.Topology[0].Key == cfg.Topology[0].Key
		for i, tc := range cfg.PreferredTopology {
			if own && i < len(in.PreferredTopology) && in.PreferredTopology[i].Key == tc.Key {
				continue
			}
			if tc.Key == cfg.Topology[0].Key {
				path := it.constraintsLoc(false).at(func(p *field.Path) *field.Path { return p.Child("preferredTopology").Index(i).Child("key") })
				errs = append(errs, field.Invalid(path, tc.Key, MsgPreferredIsRequired))
			}
		}
	}
	// Upstream applies this to composites as well: a basic composite admits
	// its children independently, so there is no whole to disrupt together.
	if cfg.Policy == BasicPolicy && cfg.DisruptionMode == AllMode {
		errs = append(errs, field.Invalid(disruptionPath, string(AllMode), MsgAllWithBasic))
	}
	return errs
}

// validateResolvedCount checks the gang count that will be compiled. A count
// the user wrote is the structural layer's business; this catches the count
// a controller failed to supply or supplied out of range (a Job with
// parallelism 0, say), which no API server has seen.
func validateResolvedCount(n *node, policyLoc locator) field.ErrorList {
	path := policyLoc.child("gang", minCountField(n.composite))
	if n.cfg.MinCount == nil {
		msg := MsgMinCountUnresolved
		if n.composite {
			msg = MsgMinGroupCountUnresolved
		}
		return field.ErrorList{field.Required(path, msg)}
	}
	if equalPtr(userCount(n), n.cfg.MinCount) {
		return nil
	}
	return validateMinimum(path, n.cfg.MinCount)
}

// userCount is the gang count the user wrote for n, if any.
func userCount(n *node) *int32 {
	in := &n.item.Input
	if n.composite {
		if p := in.CompositeSchedulingPolicy.Value; p != nil && p.Gang != nil {
			return p.Gang.MinGroupCount
		}
		return nil
	}
	if p := in.SchedulingPolicy.Value; p != nil && p.Gang != nil {
		return p.Gang.MinCount
	}
	return nil
}
