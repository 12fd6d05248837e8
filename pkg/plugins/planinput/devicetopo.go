package planinput

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// DeviceDomains gives the planner the domains of the device attribute
// levels (placement.DeviceAttributeKey) that input's groups require or
// prefer, for placement.Options.Domains: per level, each node's value of
// the attribute. It is nil when no group names one, so plans of other
// groups pay nothing.
//
// A node's value comes from the devices it can use (its own slices and
// those shared slices offer it) that match a device class the
// hierarchy's claims ask for (every device carrying the attribute when
// no claim of the hierarchy exists yet). A node whose devices agree on
// one value is in that domain. A node whose devices carry several
// values, or none, is in no domain of the level, as a node without a
// label is outside a label level: the DynamicResources plugin may hand a
// member any matching device of its node, so only a node whose every
// such device is in the domain keeps the member's devices there.
// Devices that lack the attribute are not counted (a claim may also ask
// for a NIC, which has no NVLink clique).
//
// All devices count, allocated or free, so a node stays in its domain
// while members come and go, and bound members keep pinning it.
func (c *Constraints) DeviceDomains(ctx context.Context, tree *groups.Tree, input *placement.Group) map[string]map[string]string {
	attrs := map[string]string{} // key -> attribute
	var walk func(*placement.Group)
	walk = func(g *placement.Group) {
		for _, k := range append([]string{g.TopologyKey}, g.PreferredKeys...) {
			if a, ok := placement.DeviceAttributeOf(k); ok {
				attrs[k] = a
			}
		}
		for _, ch := range g.Children {
			walk(ch)
		}
	}
	walk(input)
	if len(attrs) == 0 {
		return nil
	}
	out := make(map[string]map[string]string, len(attrs))
	for k := range attrs {
		// Listed even when empty: the planner must not read the key from
		// node labels.
		out[k] = map[string]string{}
	}
	if c == nil || c.DRA == nil {
		return out
	}
	st := c.deviceState(ctx, tree)
	if st.err != nil || st.view == nil {
		return out
	}
	classes := c.hierarchyClasses(tree)
	for _, n := range c.nodeObjects() {
		for k, attr := range attrs {
			if vals := st.view.AttributeValues(n, attr, classes); len(vals) == 1 {
				out[k][n.Name] = vals[0]
			}
		}
	}
	return out
}

// hierarchyClasses lists the device classes the claims of tree's members
// ask for, from every request and every alternative of a prioritized
// list. Claims not created yet add nothing.
func (c *Constraints) hierarchyClasses(tree *groups.Tree) []string {
	var classes []string
	add := func(class string) {
		if class != "" && !slices.Contains(classes, class) {
			classes = append(classes, class)
		}
	}
	var walk func(*groups.Tree)
	walk = func(t *groups.Tree) {
		for _, m := range t.Members {
			for _, claim := range c.podClaims(m.Pod) {
				for _, r := range claim.Spec.Devices.Requests {
					if r.Exactly != nil {
						add(r.Exactly.DeviceClassName)
					}
					for _, s := range r.FirstAvailable {
						add(s.DeviceClassName)
					}
				}
			}
		}
		for _, ch := range t.Children {
			walk(ch)
		}
	}
	walk(tree)
	slices.Sort(classes)
	return classes
}

// podClaims are the claims of pod that exist.
func (c *Constraints) podClaims(pod *corev1.Pod) []*resourceapi.ResourceClaim {
	var out []*resourceapi.ResourceClaim
	for i := range pod.Spec.ResourceClaims {
		name, made := c.claimName(pod, &pod.Spec.ResourceClaims[i])
		if !made || name == nil {
			continue
		}
		if claim, err := c.DRA.sharedManager().ResourceClaims().Get(pod.Namespace, *name); err == nil {
			out = append(out, claim)
		}
	}
	return out
}
