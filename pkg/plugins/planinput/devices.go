package planinput

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/dynamic-resource-allocation/structured"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/devices"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// DRA is where a plan reads devices from: the scheduler's DRA manager (the
// same state the DynamicResources plugin allocates from, allocations in
// flight included) and the model that keeps answers between plans.
type DRA struct {
	manager  func() fwk.SharedDRAManager
	Model    *devices.Model
	Features structured.Features
}

// NewDRA reads devices through manager.
func NewDRA(manager fwk.SharedDRAManager, model *devices.Model, features structured.Features) *DRA {
	return &DRA{manager: func() fwk.SharedDRAManager { return manager }, Model: model, Features: features}
}

// Manager is the DRA manager, nil when the scheduler runs none.
func (d *DRA) Manager() fwk.SharedDRAManager {
	if d == nil || d.manager == nil {
		return nil
	}
	return d.manager()
}

// deviceState is one plan's view of the devices, made when the first
// member with claims is met.
type deviceState struct {
	view *devices.View
	err  error
	// refs counts, per claim (namespace/name), the members that use it.
	refs map[string]int
	// classes are the device classes the plan's shapes count.
	classes map[string]bool
}

// memberClaims is what one member's claims ask, or why it cannot be
// planned yet.
type memberClaims struct {
	demand devices.Demand
	// waiting says why the member cannot run anywhere yet: a claim not
	// created or being deleted, or in use by other pods.
	waiting string
}

func (c *Constraints) deviceState(ctx context.Context, tree *groups.Tree) *deviceState {
	if c.devices != nil {
		return c.devices
	}
	st := &deviceState{refs: map[string]int{}, classes: map[string]bool{}}
	c.devices = st
	dra := c.DRA
	if dra.Manager() == nil {
		st.err = fmt.Errorf("pods use ResourceClaims but the scheduler has no DRA manager")
		return st
	}
	slices, err := dra.Manager().ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		st.err = fmt.Errorf("list ResourceSlices: %w", err)
		return st
	}
	allocated, err := dra.Manager().ResourceClaims().ListAllAllocatedDevices()
	if err != nil {
		st.err = fmt.Errorf("list allocated devices: %w", err)
		return st
	}
	st.view = dra.Model.View(ctx, devices.Source{
		Slices:    slices,
		Classes:   dra.Manager().DeviceClasses(),
		Allocated: &structured.AllocatedState{AllocatedDevices: allocated},
		Features:  dra.Features,
	})
	var walk func(*groups.Tree)
	walk = func(t *groups.Tree) {
		for _, m := range t.Members {
			for i := range m.Pod.Spec.ResourceClaims {
				if name, _, err := resourceclaim.Name(m.Pod, &m.Pod.Spec.ResourceClaims[i]); err == nil && name != nil {
					st.refs[m.Pod.Namespace+"/"+*name]++
				}
			}
		}
		for _, ch := range t.Children {
			walk(ch)
		}
	}
	walk(tree)
	return st
}

// claimsOf resolves pod's claims as the DynamicResources filter would.
func (c *Constraints) claimsOf(ctx context.Context, tree *groups.Tree, pod *corev1.Pod) (memberClaims, error) {
	st := c.deviceState(ctx, tree)
	if st.err != nil {
		return memberClaims{}, st.err
	}
	var claims []*resourceapi.ResourceClaim
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, _, err := resourceclaim.Name(pod, pc)
		if err != nil {
			return memberClaims{waiting: fmt.Sprintf("the ResourceClaim of pod %s for %q is not created yet", pod.Name, pc.Name)}, nil
		}
		if name == nil {
			continue
		}
		claim, err := c.DRA.Manager().ResourceClaims().Get(pod.Namespace, *name)
		if apierrors.IsNotFound(err) {
			return memberClaims{waiting: fmt.Sprintf("ResourceClaim %s/%s does not exist", pod.Namespace, *name)}, nil
		}
		if err != nil {
			return memberClaims{}, fmt.Errorf("get ResourceClaim %s/%s: %w", pod.Namespace, *name, err)
		}
		if claim.DeletionTimestamp != nil {
			return memberClaims{waiting: fmt.Sprintf("ResourceClaim %s/%s is being deleted", pod.Namespace, *name)}, nil
		}
		if claim.Status.Allocation != nil && !resourceclaim.CanBeReserved(claim) && !resourceclaim.IsReservedForPod(pod, claim, true) {
			return memberClaims{waiting: fmt.Sprintf("ResourceClaim %s/%s is in use by as many pods as it may be", pod.Namespace, *name)}, nil
		}
		claims = append(claims, claim)
	}
	return memberClaims{demand: devices.DemandOf(claims, func(cl *resourceapi.ResourceClaim) bool {
		return st.refs[cl.Namespace+"/"+cl.Name] > 1
	})}, nil
}

// deviceKey is what a member's claims add to its shape key. Members whose
// claims ask the same (claims of their own from one template) share it.
func (c *Constraints) deviceKey(tree *groups.Tree, pod *corev1.Pod) string {
	if c == nil || c.DRA == nil || len(pod.Spec.ResourceClaims) == 0 {
		return ""
	}
	mc, err := c.claimsOf(context.Background(), tree, pod)
	switch {
	case err != nil:
		return "#d!error"
	case mc.waiting != "":
		return "#d!" + mc.waiting
	}
	return "#d:" + mc.demand.Key()
}

// constrainDevices adds what s's members ask of devices: per-member device
// counts as requests of placement.DeviceResource, and node limits for
// what counts alone do not decide. pending bounds how many members of the
// shape any node could need to hold.
func (c *Constraints) constrainDevices(ctx context.Context, tree *groups.Tree, key string, rep *corev1.Pod, pending int, s *placement.Shape) (string, error) {
	if c.DRA == nil || len(rep.Spec.ResourceClaims) == 0 {
		return "", nil
	}
	mc, err := c.claimsOf(ctx, tree, rep)
	if err != nil {
		return "", err
	}
	limit := func(node string, n int) {
		if s.NodeLimit == nil {
			s.NodeLimit = map[string]int{}
		}
		if old, ok := s.NodeLimit[node]; !ok || n < old {
			s.NodeLimit[node] = n
		}
	}
	nodes := c.nodeObjects()
	if mc.waiting != "" {
		for _, n := range nodes {
			limit(n.Name, 0)
		}
		return mc.waiting, nil
	}
	d := mc.demand
	st := c.devices
	// Devices a pool offers to many nodes cannot be counted per node; then
	// every node is asked through the allocator.
	counted := len(d.Counts) > 0 && !st.view.HasShared()
	if counted {
		s.Requests = maps.Clone(s.Requests)
		if s.Requests == nil {
			s.Requests = placement.Resources{}
		}
		for class, n := range d.Counts {
			s.Requests[placement.DeviceResource(class)] = n
			st.classes[class] = true
		}
	}
	var notes []string
	unreachable := 0
	for _, n := range nodes {
		ok := true
		for _, sel := range d.Pinned {
			if sel == nil {
				continue
			}
			ns, err := nodeaffinity.NewNodeSelector(sel)
			if err != nil || !ns.Match(n) {
				ok = false
				break
			}
		}
		if ok && len(d.Shared) > 0 {
			// A shared claim is allocated once, by the first member
			// scheduled; a node it cannot be allocated for is closed.
			fit, err := st.view.Fits(key+"#shared", n, d.Shared, 1)
			if err != nil {
				return "", err
			}
			ok = fit > 0
		}
		if !ok {
			limit(n.Name, 0)
			unreachable++
			continue
		}
		if len(d.PerMember) == 0 || (counted && d.Exact && st.view.Simple(n.Name)) {
			continue
		}
		if !st.view.HasDevices(n.Name) {
			limit(n.Name, 0)
			continue
		}
		fit, err := st.view.Fits(key, n, d.PerMember, pending)
		if err != nil {
			return "", err
		}
		if fit < pending {
			limit(n.Name, fit)
		}
	}
	if unreachable > 0 {
		notes = append(notes, fmt.Sprintf("%d nodes cannot reach the devices of the group's allocated or shared ResourceClaims", unreachable))
	}
	if !d.Exact && len(d.PerMember) > 0 {
		notes = append(notes, "ResourceClaims allocated on each node in turn")
	}
	return strings.Join(notes, "; "), nil
}

func (c *Constraints) nodeObjects() []*corev1.Node {
	out := make([]*corev1.Node, 0, len(c.Nodes))
	for _, ni := range c.Nodes {
		if n := ni.Node(); n != nil {
			out = append(out, n)
		}
	}
	return out
}

// Extra is the device room of the classes the plan's shapes count, for
// placement.Options.Extra; nil when no shape counts devices.
func (c *Constraints) Extra() map[string]placement.ExtraRoom {
	if c == nil || c.devices == nil || c.devices.view == nil || len(c.devices.classes) == 0 {
		return nil
	}
	classes := make([]string, 0, len(c.devices.classes))
	for class := range c.devices.classes {
		classes = append(classes, class)
	}
	sort.Strings(classes)
	out := map[string]placement.ExtraRoom{}
	for _, n := range c.nodeObjects() {
		room := placement.ExtraRoom{Allocatable: placement.Resources{}, Requested: placement.Resources{}}
		for _, class := range classes {
			total, used := c.devices.view.Room(n.Name, class)
			if total == 0 {
				continue
			}
			room.Allocatable[placement.DeviceResource(class)] = total
			room.Requested[placement.DeviceResource(class)] = used
		}
		if len(room.Allocatable) > 0 {
			out[n.Name] = room
		}
	}
	return out
}

// FreedDevices is what evicting pod frees of the devices the plan counts:
// the devices of the allocated claims it is the last consumer of, per
// class. A claim other pods still use stays allocated, and devices held
// with admin access were never taken from anyone.
func (c *Constraints) FreedDevices(pod *corev1.Pod) placement.Resources {
	if c == nil || c.DRA == nil || c.devices == nil || len(c.devices.classes) == 0 || len(pod.Spec.ResourceClaims) == 0 {
		return nil
	}
	var out placement.Resources
	for i := range pod.Spec.ResourceClaims {
		name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i])
		if err != nil || name == nil {
			continue
		}
		claim, err := c.DRA.Manager().ResourceClaims().Get(pod.Namespace, *name)
		if err != nil || claim.Status.Allocation == nil {
			continue
		}
		if len(claim.Status.ReservedFor) > 1 || (len(claim.Status.ReservedFor) == 1 && claim.Status.ReservedFor[0].UID != pod.UID) {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.AdminAccess != nil && *r.AdminAccess {
				continue
			}
			class := requestClass(claim, r.Request)
			if !c.devices.classes[class] {
				continue
			}
			if out == nil {
				out = placement.Resources{}
			}
			out[placement.DeviceResource(class)]++
		}
	}
	return out
}

// requestClass is the device class of a claim's request or subrequest
// ("request/subrequest"), "" when the claim has no such request.
func requestClass(claim *resourceapi.ResourceClaim, ref string) string {
	req, sub, _ := strings.Cut(ref, "/")
	for _, r := range claim.Spec.Devices.Requests {
		if r.Name != req {
			continue
		}
		if sub == "" && r.Exactly != nil {
			return r.Exactly.DeviceClassName
		}
		for _, s := range r.FirstAvailable {
			if s.Name == sub {
				return s.DeviceClassName
			}
		}
	}
	return ""
}
