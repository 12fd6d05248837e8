package planinput

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
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
	// PodGroupReservation: the profile runs PhalanxDynamicResources, which
	// reserves a claim a pod uses through its scheduling.k8s.io PodGroup's
	// spec.resourceClaims for the PodGroup; every other claim is reserved
	// for each pod.
	PodGroupReservation bool
}

// sharedManager is the DRA manager, nil when the scheduler runs none.
func (d *DRA) sharedManager() fwk.SharedDRAManager {
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
	// ofGroup are the claims (namespace/name) members use through their
	// group's resourceClaims: shared by definition, however many members
	// exist yet.
	ofGroup map[string]bool
	// classes are the device classes the plan's shapes count.
	classes map[string]bool
	// domainKey is, per representative pod, the node label whose domains
	// its shared claims' allocations reach (sharedDomain).
	domainKey map[*corev1.Pod]string
	// users lists, per claim (namespace/name), the pending members that
	// use it; shared are the unallocated claims several members share.
	users  map[string][]*corev1.Pod
	shared map[string]*resourceapi.ResourceClaim
	// perPod numbers, per claim, the pending members that will reserve it
	// for themselves (not for their PodGroup), in the tree's order;
	// inFlight counts the reserved members that will, once they bind.
	// A claim's status.reservedFor holds at most 256 consumers, so the
	// members past its free entries cannot bind (reservedForRoom).
	perPod   map[string]map[*corev1.Pod]int
	inFlight map[string]int
	// unusable says, per member, why a claim of its PodGroup that
	// kube-controller-manager makes from a template is of no use to it:
	// the claim is made for the PodGroup, and upstream's DynamicResources
	// accepts it only under DRAWorkloadResourceClaims, which a Phalanx
	// scheduler runs without.
	unusable map[*corev1.Pod]string
	// members keeps what each member's claims ask, read once: the shape
	// key and the shape's constraints both need it for the same pod.
	members map[*corev1.Pod]resolvedClaims
}

type resolvedClaims struct {
	claims memberClaims
	err    error
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
	st := &deviceState{refs: map[string]int{}, ofGroup: map[string]bool{}, classes: map[string]bool{}, domainKey: map[*corev1.Pod]string{},
		users: map[string][]*corev1.Pod{}, shared: map[string]*resourceapi.ResourceClaim{}, members: map[*corev1.Pod]resolvedClaims{},
		perPod: map[string]map[*corev1.Pod]int{}, inFlight: map[string]int{}, unusable: map[*corev1.Pod]string{}}
	c.devices = st
	dra := c.DRA
	if dra.sharedManager() == nil {
		st.err = fmt.Errorf("pods use ResourceClaims but the scheduler has no DRA manager")
		return st
	}
	slices, err := dra.sharedManager().ResourceSlices().ListWithDeviceTaintRules()
	if err != nil {
		st.err = fmt.Errorf("list ResourceSlices: %w", err)
		return st
	}
	allocated, err := allocatedDevices(ctx, dra.sharedManager().ResourceClaims())
	if err != nil {
		st.err = fmt.Errorf("list allocated devices: %w", err)
		return st
	}
	st.view = dra.Model.View(ctx, devices.Source{
		Slices:    slices,
		Classes:   dra.sharedManager().DeviceClasses(),
		Allocated: &structured.AllocatedState{AllocatedDevices: allocated},
		Features:  dra.Features,
	})
	var walk func(*groups.Tree)
	walk = func(t *groups.Tree) {
		for _, m := range t.Members {
			ofGroup := groupClaimKeys(t.Claims, m.Pod)
			forGroup := dra.PodGroupReservation && m.Pod.Spec.SchedulingGroup != nil && m.Pod.Spec.SchedulingGroup.PodGroupName != nil
			for _, k := range ClaimKeys(m.Pod) {
				st.refs[k]++
				if m.State == groups.Pending {
					st.users[k] = append(st.users[k], m.Pod)
				}
				if forGroup && containsString(ofGroup, k) {
					continue
				}
				switch m.State {
				case groups.Pending:
					if st.perPod[k] == nil {
						st.perPod[k] = map[*corev1.Pod]int{}
					}
					st.perPod[k][m.Pod] = len(st.perPod[k])
				case groups.Assumed:
					st.inFlight[k]++
				}
			}
			for _, k := range ofGroup {
				st.ofGroup[k] = true
			}
			if !dra.PodGroupReservation && m.Pod.Spec.SchedulingGroup != nil {
				if name := templateGroupClaim(t.Claims, m.Pod); name != "" {
					st.unusable[m.Pod] = fmt.Sprintf("the group's claim %q is made from a template for the PodGroup, and the profile runs DynamicResources, which accepts only claims made for the pod: run PhalanxDynamicResources in its place", name)
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

// claimsOf resolves pod's claims as the DynamicResources filter would,
// once per plan.
func (c *Constraints) claimsOf(ctx context.Context, tree *groups.Tree, pod *corev1.Pod) (memberClaims, error) {
	st := c.deviceState(ctx, tree)
	if st.err != nil {
		return memberClaims{}, st.err
	}
	if r, ok := st.members[pod]; ok {
		return r.claims, r.err
	}
	mc, err := c.resolveClaims(st, pod)
	st.members[pod] = resolvedClaims{mc, err}
	return mc, err
}

func (c *Constraints) resolveClaims(st *deviceState, pod *corev1.Pod) (memberClaims, error) {
	if why := st.unusable[pod]; why != "" {
		return memberClaims{waiting: why}, nil
	}
	var claims []*resourceapi.ResourceClaim
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, made := c.claimName(pod, pc)
		if !made {
			return memberClaims{waiting: fmt.Sprintf("the ResourceClaim of pod %s for %q is not created yet", pod.Name, pc.Name)}, nil
		}
		if name == nil {
			continue
		}
		claim, err := c.DRA.sharedManager().ResourceClaims().Get(pod.Namespace, *name)
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
		if why := st.reservedForRoom(pod, claim); why != "" {
			return memberClaims{waiting: why}, nil
		}
		claims = append(claims, claim)
	}
	return memberClaims{demand: devices.DemandOf(claims, func(cl *resourceapi.ResourceClaim) bool {
		k := cl.Namespace + "/" + cl.Name
		return st.refs[k] > 1 || st.ofGroup[k]
	})}, nil
}

// templateGroupClaim is the name of an entry of pod's that uses a claim
// its group makes from a template, "" when there is none.
func templateGroupClaim(claims []groups.GroupClaim, pod *corev1.Pod) string {
	for _, gc := range claims {
		if gc.TemplateName == "" {
			continue
		}
		for i := range pod.Spec.ResourceClaims {
			if gc.Matches(&pod.Spec.ResourceClaims[i]) {
				return gc.Name
			}
		}
	}
	return ""
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// reservedForRoom says why pod cannot use claim, which it would reserve
// for itself, when the claim's status.reservedFor has no entry left for
// it: the entries other pods hold and those the group's reserved members
// will take go first, then the pending members in the tree's order. A
// gang whose minimum needs more members on one claim than that binds
// none, instead of binding 256 and waiting for the rest forever.
func (st *deviceState) reservedForRoom(pod *corev1.Pod, claim *resourceapi.ResourceClaim) string {
	k := claim.Namespace + "/" + claim.Name
	idx, ok := st.perPod[k][pod]
	if !ok || resourceclaim.IsReservedForPod(pod, claim, false) {
		return ""
	}
	taken := len(claim.Status.ReservedFor) + st.inFlight[k]
	if idx < resourceapi.ResourceClaimReservedForMaxSize-taken {
		return ""
	}
	return fmt.Sprintf("ResourceClaim %s/%s is reserved for each pod that uses it, and its status.reservedFor holds at most %d (%d taken)",
		claim.Namespace, claim.Name, resourceapi.ResourceClaimReservedForMaxSize, taken)
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
func (c *Constraints) constrainDevices(ctx context.Context, tree, leaf *groups.Tree, key string, rep *corev1.Pod, pending int, s *placement.Shape) (string, error) {
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
	counted := len(d.Counts) > 0
	for class := range d.Counts {
		counted = counted && st.view.Countable(class)
	}
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
	var within map[string]bool
	for _, cl := range d.Shared {
		st.shared[cl.Namespace+"/"+cl.Name] = cl
	}
	if len(d.Shared) > 0 {
		dom, err := c.sharedDomain(st, leaf.TopologyKey, rep, nodes, d.Shared)
		if err != nil {
			return "", err
		}
		within = dom
	}
	unreachable, noRoom := 0, 0
	for _, n := range nodes {
		ok := within == nil || within[n.Name]
		for _, sel := range d.Pinned {
			if sel == nil || !ok {
				continue
			}
			ns, err := nodeaffinity.NewNodeSelector(sel)
			if err != nil || !ns.Match(n) {
				ok = false
			}
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
			noRoom++
			continue
		}
		fit, err := st.view.Fits(key, n, d.PerMember, pending)
		if err != nil {
			return "", err
		}
		if fit < pending {
			limit(n.Name, fit)
		}
		if fit == 0 {
			noRoom++
		}
	}
	if noRoom > 0 {
		notes = append(notes, fmt.Sprintf("%d nodes cannot allocate a member's ResourceClaims", noRoom))
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

// sharedDomain decides where members that share unallocated claims may
// go. The first member scheduled allocates them, on its node, and the
// allocation then reaches only the nodes its node selector matches (a
// ComputeDomain-style channel of one NVLink clique, a device of one
// rack's switch); every other member must be on such a node. The
// allocator is deterministic, so the claims are allocated for each node
// in turn and nodes are grouped by the selector their allocation would
// carry: any member may go first only if all members are in one group.
//
// When the selectors name the domains of one node label (key In [value],
// as drivers that select a pool's nodes by label write them), that label
// becomes the group's topology key and the planner picks the domain. When
// every allocation reaches every node there is nothing to decide. Otherwise
// the largest group is chosen and the others are closed. The returned set
// is nil when every node may be used.
func (c *Constraints) sharedDomain(st *deviceState, leafKey string, rep *corev1.Pod, nodes []*corev1.Node, shared []*resourceapi.ResourceClaim) (map[string]bool, error) {
	groupsBySel := map[string][]string{}
	labelOf := map[string]labelValue{}
	everywhere := true
	for _, n := range nodes {
		results, err := st.view.Allocate(n, shared)
		if err != nil {
			return nil, err
		}
		if results == nil {
			everywhere = false
			continue
		}
		sel := ""
		var lv labelValue
		for i, r := range results {
			if r.NodeSelector != nil {
				sel += fmt.Sprintf("%d:%s;", i, r.NodeSelector.String())
				lv = mergeLabel(lv, r.NodeSelector)
			}
		}
		if sel != "" {
			everywhere = false
		}
		groupsBySel[sel] = append(groupsBySel[sel], n.Name)
		labelOf[sel] = lv
	}
	if everywhere {
		return nil, nil
	}
	// One label names every group: let the planner choose among them.
	k := ""
	for sel, lv := range labelOf {
		if sel == "" || lv.key == "" || (k != "" && lv.key != k) {
			k = ""
			break
		}
		k = lv.key
	}
	within := map[string]bool{}
	// A group already bound to another key keeps it; the planner holds
	// one required key per group, so the claims' domain is chosen here.
	if k != "" && len(groupsBySel[""]) == 0 && (leafKey == "" || leafKey == k) {
		st.domainKey[rep] = k
		for _, names := range groupsBySel {
			for _, n := range names {
				within[n] = true
			}
		}
		return within, nil
	}
	best := ""
	for sel, names := range groupsBySel {
		if b := groupsBySel[best]; len(names) > len(b) || (len(names) == len(b) && sel < best) {
			best = sel
		}
	}
	for _, n := range groupsBySel[best] {
		within[n] = true
	}
	return within, nil
}

// labelValue is a node selector of the form "key In [value]"; key is ""
// for any other selector.
type labelValue struct{ key, value string }

func mergeLabel(old labelValue, sel *corev1.NodeSelector) labelValue {
	if len(sel.NodeSelectorTerms) != 1 {
		return labelValue{}
	}
	t := sel.NodeSelectorTerms[0]
	if len(t.MatchFields) > 0 || len(t.MatchExpressions) != 1 {
		return labelValue{}
	}
	e := t.MatchExpressions[0]
	if e.Operator != corev1.NodeSelectorOpIn || len(e.Values) != 1 {
		return labelValue{}
	}
	if old.key != "" && old.key != e.Key {
		return labelValue{}
	}
	return labelValue{key: e.Key, value: e.Values[0]}
}

// sharedDomainKey is the node label whose domains the shared claims of
// rep's shape reach, "" when they impose none (see sharedDomain).
func (c *Constraints) sharedDomainKey(rep *corev1.Pod) string {
	if c == nil || c.devices == nil {
		return ""
	}
	return c.devices.domainKey[rep]
}

// SharedClaim is an unallocated claim several pending members share, and
// those members.
type SharedClaim struct {
	Claim *resourceapi.ResourceClaim
	Users []*corev1.Pod
}

// SharedClaims lists the unallocated claims the plan's members share, by
// name.
func (c *Constraints) SharedClaims() []SharedClaim {
	if c == nil || c.devices == nil || len(c.devices.shared) == 0 {
		return nil
	}
	keys := make([]string, 0, len(c.devices.shared))
	for k := range c.devices.shared {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]SharedClaim, 0, len(keys))
	for _, k := range keys {
		out = append(out, SharedClaim{Claim: c.devices.shared[k], Users: c.devices.users[k]})
	}
	return out
}

// AllocateOn is the allocation claim would get from a member scheduled on
// node: the one the DynamicResources plugin would make. nil when it
// cannot be allocated there.
func (c *Constraints) AllocateOn(node *corev1.Node, claim *resourceapi.ResourceClaim) (*resourceapi.AllocationResult, error) {
	if c == nil || c.devices == nil || c.devices.view == nil {
		return nil, fmt.Errorf("no device state for claim %s/%s", claim.Namespace, claim.Name)
	}
	results, err := c.devices.view.Allocate(node, []*resourceapi.ResourceClaim{claim})
	if err != nil || results == nil {
		return nil, err
	}
	return &results[0], nil
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
	for _, k := range ClaimKeys(pod) {
		ns, name, _ := strings.Cut(k, "/")
		claim, err := c.DRA.sharedManager().ResourceClaims().Get(ns, name)
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

// trackerConflict is the text of the DRA claim tracker's error for a list
// that raced with a claim leaving the in-flight allocations; the error
// value is not exported.
const trackerConflict = "conflicting concurrent modification"

// allocatedDevices lists the devices allocated or being allocated, trying
// again while the list races with an allocation, as upstream's
// DynamicResources does (for up to 5 s): the race is expected while claims
// are being allocated, and failing the plan on it put the whole gang into
// error backoff (three gangs of a hundred in a 1,000-node DRA run, a second
// or more each).
func allocatedDevices(ctx context.Context, tracker interface {
	ListAllAllocatedDevices() (sets.Set[structured.DeviceID], error)
}) (sets.Set[structured.DeviceID], error) {
	var allocated sets.Set[structured.DeviceID]
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Microsecond, 5*time.Second, true, func(context.Context) (bool, error) {
		a, err := tracker.ListAllAllocatedDevices()
		if err != nil && strings.Contains(err.Error(), trackerConflict) {
			last = err
			return false, nil
		}
		allocated = a
		return true, err
	})
	if err != nil && last != nil && wait.Interrupted(err) {
		return nil, fmt.Errorf("%w, still after retrying: %w", last, err)
	}
	return allocated, err
}
