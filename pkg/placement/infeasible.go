package placement

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Infeasible reports a group that cannot be satisfied, with the numbers a
// user needs to fix it. PlanGroup returns it as the error when the root
// cannot be satisfied; Plan.Unsatisfied holds it for groups left out.
type Infeasible struct {
	Group       string // the group that could not be satisfied
	TopologyKey string
	// BestDomain is the domain that came closest; "" when the group is
	// unconstrained or no node carries its key.
	BestDomain string
	// Fits counts what fits in BestDomain: pods (bound included) for a leaf,
	// satisfiable children for a composite.
	Fits int
	// Need is MinCount for a leaf, MinGroupCount for a composite.
	Need int
	// Short is what is missing in BestDomain to place the rest, e.g.
	// {nvidia.com/gpu: 4}. Pod slots are reported as "pods". For a composite
	// it is the Short of Cause.
	Short Resources
	// Reason is a message for group status, without the group name.
	Reason string
	// Cause is, for a composite, the first child that failed in BestDomain.
	Cause *Infeasible
	// Invalid: the group's definition contradicts the nodes (a preferred
	// topology level wider than the level above it), so no capacity would
	// help until it or the node labels change.
	Invalid bool
	// Domains are, with Options.ExplainDomains, the domains of TopologyKey
	// the group was tried in, closest first (BestDomain is the first);
	// empty for an unconstrained or pinned group.
	Domains []DomainFit
}

// DomainFit is what one domain could hold of a group that failed.
type DomainFit struct {
	Domain string
	// Fits and Need count pods for a leaf (bound included), child groups
	// for a composite.
	Fits, Need int
	// Short is what is missing there, as Infeasible.Short.
	Short Resources
	// Reason words the domain's verdict, as Infeasible.Reason does.
	Reason string
}

func (e *Infeasible) Error() string {
	return fmt.Sprintf("group %s is unschedulable: %s", e.Group, e.Reason)
}

// leafReason words the failure of a leaf gang in its best domain.
func leafReason(e *Infeasible, pinned, noDomain bool, scope string, exist, bound, eligible int, limits, excluded []string) string {
	var b strings.Builder
	switch {
	case exist < e.Need:
		fmt.Fprintf(&b, "only %d of the %d pods the gang needs exist", exist, e.Need)
		return b.String()
	case noDomain:
		fmt.Fprintf(&b, "no node%s %s", scope, hasLevel(e.TopologyKey))
		return b.String()
	case pinned:
		fmt.Fprintf(&b, "bound pods pin the group to %s=%s, where only %d of %d pods fit", e.TopologyKey, e.BestDomain, e.Fits, e.Need)
	case e.TopologyKey != "":
		fmt.Fprintf(&b, "no %s domain%s fits %d pods: best %s fits %d", e.TopologyKey, scope, e.Need, e.BestDomain, e.Fits)
	default:
		fmt.Fprintf(&b, "only %d of %d pods fit%s", e.Fits, e.Need, scope)
	}
	if bound > 0 {
		fmt.Fprintf(&b, " (%d bound)", bound)
	}
	switch {
	case eligible == 0 && len(excluded) > 0:
		fmt.Fprintf(&b, " (%s)", strings.Join(excluded, "; "))
	case eligible == 0:
		b.WriteString(" (no node there matches the pods' node selector, affinity and tolerations)")
	case len(limits) > 0:
		fmt.Fprintf(&b, " (%s)", strings.Join(limits, "; "))
		if len(excluded) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(excluded, "; "))
		}
	case len(e.Short) > 0:
		fmt.Fprintf(&b, " (short %s)", formatResources(e.Short))
	case len(excluded) > 0:
		fmt.Fprintf(&b, " (%s)", strings.Join(excluded, "; "))
	default:
		b.WriteString(" (free capacity is fragmented across nodes)")
	}
	return b.String()
}

// compositeReason words the failure of a composite gang in its best domain.
func compositeReason(e *Infeasible, pinned, noDomain bool, scope string, children int) string {
	var b strings.Builder
	switch {
	case children < e.Need:
		fmt.Fprintf(&b, "only %d of the %d child groups it needs exist", children, e.Need)
		return b.String()
	case noDomain:
		fmt.Fprintf(&b, "no node%s %s", scope, hasLevel(e.TopologyKey))
		return b.String()
	case pinned:
		fmt.Fprintf(&b, "bound pods pin the group to %s=%s, where only %d of %d child groups fit", e.TopologyKey, e.BestDomain, e.Fits, e.Need)
	case e.TopologyKey != "":
		fmt.Fprintf(&b, "no %s domain%s fits %d child groups: best %s fits %d", e.TopologyKey, scope, e.Need, e.BestDomain, e.Fits)
	default:
		fmt.Fprintf(&b, "only %d of %d child groups fit%s", e.Fits, e.Need, scope)
	}
	if e.Cause != nil {
		fmt.Fprintf(&b, " (%s: %s)", e.Cause.Group, e.Cause.Reason)
	}
	return b.String()
}

// formatResources renders quantities the way users write them in pod specs,
// sorted by name for stable messages: "1500m cpu, 4Gi memory, 2 nvidia.com/gpu".
func formatResources(r Resources) string {
	names := make([]corev1.ResourceName, 0, len(r))
	for name := range r {
		names = append(names, name)
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names))
	for _, name := range names {
		if class, ok := DeviceClassOf(name); ok {
			unit := "devices"
			if r[name] == 1 {
				unit = "device"
			}
			parts = append(parts, fmt.Sprintf("%d %s of class %s", r[name], unit, class))
			continue
		}
		parts = append(parts, formatQuantity(name, r[name])+" "+string(name))
	}
	return strings.Join(parts, ", ")
}

func formatQuantity(name corev1.ResourceName, v int64) string {
	switch name {
	case corev1.ResourceCPU:
		return resource.NewMilliQuantity(v, resource.DecimalSI).String()
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return resource.NewQuantity(v, resource.BinarySI).String()
	default:
		return fmt.Sprint(v)
	}
}

// hasLevel words what a node needs to be in a domain of key, after "no
// node": a label, or for a device attribute level, devices that agree on
// one value of the attribute.
func hasLevel(key string) string {
	if attr, ok := DeviceAttributeOf(key); ok {
		return fmt.Sprintf("has devices of the group's classes that agree on one value of device attribute %s", attr)
	}
	return fmt.Sprintf("has the %s label", key)
}
