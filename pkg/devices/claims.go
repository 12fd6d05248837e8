package devices

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// Demand is what one member asks of devices.
type Demand struct {
	// PerMember are the unallocated claims every member has a copy of
	// (from a ResourceClaimTemplate, or its own claim): allocated once per
	// member, on the member's node.
	PerMember []*resourceapi.ResourceClaim
	// Counts are, per device class, the devices PerMember asks for by
	// exact count.
	Counts map[string]int64
	// Exact says Counts alone decide how many members a node with simple
	// devices holds: every request is a plain count of a class.
	Exact bool
	// Shared are unallocated claims several members use: allocated once,
	// by the first member scheduled.
	Shared []*resourceapi.ResourceClaim
	// Pinned are the node selectors of allocated claims the member uses;
	// nil entries allow every node.
	Pinned []*corev1.NodeSelector
}

// DemandOf sorts a member's claims. shared says whether other members use
// a claim too.
func DemandOf(claims []*resourceapi.ResourceClaim, shared func(*resourceapi.ResourceClaim) bool) Demand {
	d := Demand{Counts: map[string]int64{}, Exact: true}
	for _, c := range claims {
		switch {
		case c.Status.Allocation != nil:
			d.Pinned = append(d.Pinned, c.Status.Allocation.NodeSelector)
		case shared(c):
			d.Shared = append(d.Shared, c)
		default:
			d.PerMember = append(d.PerMember, c)
			if len(c.Spec.Devices.Constraints) > 0 {
				d.Exact = false
			}
			for _, r := range c.Spec.Devices.Requests {
				e := r.Exactly
				if e == nil {
					d.Exact = false // a prioritized list: the allocator picks
					continue
				}
				if e.AllocationMode == resourceapi.DeviceAllocationModeAll || len(e.Selectors) > 0 ||
					(e.AdminAccess != nil && *e.AdminAccess) || e.Capacity != nil || len(e.Tolerations) > 0 {
					d.Exact = false
				}
				if e.AllocationMode == resourceapi.DeviceAllocationModeAll || (e.AdminAccess != nil && *e.AdminAccess) {
					continue
				}
				n := e.Count
				if n == 0 {
					n = 1
				}
				d.Counts[e.DeviceClassName] += n
			}
		}
	}
	return d
}

// Key is what the demand adds to a shape key: members with equal keys ask
// the same of devices. Per-member claims count by their spec, so members
// with claims of their own from one template share a shape; shared and
// allocated claims by identity.
func (d Demand) Key() string {
	var b strings.Builder
	for _, c := range d.PerMember {
		fmt.Fprintf(&b, "m:%s;", c.Spec.Devices.String())
	}
	for _, c := range d.Shared {
		fmt.Fprintf(&b, "s:%s/%s;", c.Namespace, c.Name)
	}
	for _, sel := range d.Pinned {
		fmt.Fprintf(&b, "p:%s;", sel.String())
	}
	return b.String()
}

// Countable says whether the devices of class can be counted per node:
// no slice offers a device of the class to nodes by selector or allNodes.
func (v *View) Countable(class string) bool {
	for _, s := range v.shared {
		if len(v.m.matching(v.ctx, s, v.src.Classes, class)) > 0 {
			return false
		}
	}
	return true
}

// Simple says whether node's devices are plain: no shared counters
// (partitionable devices), no taints, no devices several claims may
// share, no binding conditions, and no devices reaching it from other
// nodes' pools. On such a node an exact demand's counts are exact.
func (v *View) Simple(node string) bool {
	for _, s := range v.local[node] {
		if len(s.Spec.SharedCounters) > 0 {
			return false
		}
		for _, d := range s.Spec.Devices {
			if len(d.ConsumesCounters) > 0 || len(d.Taints) > 0 || (d.AllowMultipleAllocations != nil && *d.AllowMultipleAllocations) || len(d.BindingConditions) > 0 {
				return false
			}
		}
	}
	return true
}
