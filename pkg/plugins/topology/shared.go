package topology

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	schedv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
)

// allocateShared allocates, once a plan places the group, the claims its
// members share, on the first planned node of a member that uses each.
//
// The DynamicResources plugin allocates a claim in the Reserve of the
// first pod that uses it and writes the allocation in that pod's PreBind.
// Until then every other pod of the claim is refused ("in the process of
// being allocated"). A gang member waits in Permit, before PreBind, for
// its siblings, so the siblings would wait for an allocation that waits
// for them. Allocating the claim with the plan, as the plugin would for
// the first member (same allocator, same node), breaks the circle: every
// member finds the claim allocated and reserves it for itself.
//
// A claim PhalanxDynamicResources will reserve for the members' PodGroup
// is reserved for it in the same write. Every member's PreFilter then
// finds the reservation and its PreBind writes nothing; without it, the
// members' PreBinds would all add the PodGroup at once, and every one but
// the first would be refused for a duplicate entry.
func (t *Topology) allocateShared(ctx context.Context, root groups.Key, cons *planinput.Constraints, assignments map[string]string) (map[string]bool, error) {
	var done map[string]bool
	for _, sc := range cons.SharedClaims() {
		var node string
		for _, u := range sc.Users {
			if n, ok := assignments[planinput.PodKey(u)]; ok {
				node = n
				break
			}
		}
		if node == "" {
			continue
		}
		ni, err := t.handle.SnapshotSharedLister().NodeInfos().Get(node)
		if err != nil {
			return nil, fmt.Errorf("planned node %s: %w", node, err)
		}
		alloc, err := cons.AllocateOn(ni.Node(), sc.Claim)
		if err != nil {
			return nil, err
		}
		if alloc == nil {
			return nil, fmt.Errorf("ResourceClaim %s/%s cannot be allocated on planned node %s", sc.Claim.Namespace, sc.Claim.Name, node)
		}
		t.allocatedShared.Store(true)
		if err := t.writeAllocation(ctx, sc.Claim, alloc, t.podGroupConsumer(sc), root.String()); err != nil {
			return nil, err
		}
		if done == nil {
			done = map[string]bool{}
		}
		done[sc.Claim.Namespace+"/"+sc.Claim.Name] = true
		klog.FromContext(ctx).V(3).Info("Allocated a shared ResourceClaim for its group", "claim", klog.KObj(sc.Claim), "group", root, "node", node)
	}
	return done, nil
}

// retryKey marks a cycle whose member retries with the shared claims its
// own PreFilter allocated; PostFilter keeps the plan then.
const retryKey fwk.StateKey = "phalanx.dev/topology-shared-claims"

type retryMarker struct{}

func (retryMarker) Clone() fwk.StateData { return retryMarker{} }

// usesAny says whether pod uses one of claims (namespace/name).
func usesAny(pod *corev1.Pod, claims map[string]bool) bool {
	if len(claims) == 0 {
		return false
	}
	return slices.ContainsFunc(planinput.ClaimKeys(pod), func(k string) bool { return claims[k] })
}

// podGroupConsumer is the PodGroup that the profile's
// PhalanxDynamicResources will reserve sc's claim for, decided as the
// plugin decides it for each user (resourceclaim.BindTo): nil when the
// profile runs upstream's DynamicResources, which reserves every claim for
// each pod, or when no user names the claim as its PodGroup's.
func (t *Topology) podGroupConsumer(sc planinput.SharedClaim) *resourceapi.ResourceClaimConsumerReference {
	if t.reservesForPodGroups == nil || !t.reservesForPodGroups() {
		return nil
	}
	lister := t.groups.NativePodGroups()
	if lister == nil {
		return nil
	}
	for _, u := range sc.Users {
		if u.Spec.SchedulingGroup == nil || u.Spec.SchedulingGroup.PodGroupName == nil {
			continue
		}
		pg, err := lister.PodGroups(u.Namespace).Get(*u.Spec.SchedulingGroup.PodGroupName)
		if err != nil {
			continue
		}
		for i := range u.Spec.ResourceClaims {
			pc := &u.Spec.ResourceClaims[i]
			if name, _, err := resourceclaim.Name(u, pc); err != nil || name == nil || *name != sc.Claim.Name {
				continue
			}
			if ref, err := resourceclaim.BindTo(u, pg, pc); err == nil && isPodGroupRef(ref) {
				return &ref
			}
		}
	}
	return nil
}

func isPodGroupRef(ref resourceapi.ResourceClaimConsumerReference) bool {
	return ref.APIGroup == schedv1beta1.GroupName && ref.Resource == "podgroups"
}

// writeAllocation writes alloc as claim's allocation, as the
// DynamicResources plugin's PreBind does (finalizer first, then status),
// reserved for consumer when it is not nil, and tells the scheduler's DRA
// manager, whose informer lags.
func (t *Topology) writeAllocation(ctx context.Context, claim *resourceapi.ResourceClaim, alloc *resourceapi.AllocationResult, consumer *resourceapi.ResourceClaimConsumerReference, group string) error {
	client := t.handle.ClientSet().ResourceV1().ResourceClaims(claim.Namespace)
	c := claim.DeepCopy()
	if !slices.Contains(c.Finalizers, resourceapi.Finalizer) {
		c.Finalizers = append(c.Finalizers, resourceapi.Finalizer)
	}
	metav1.SetMetaDataAnnotation(&c.ObjectMeta, v1alpha1.AllocatedForAnnotation, group)
	c, err := client.Update(ctx, c, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("mark ResourceClaim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	c.Status.Allocation = alloc.DeepCopy()
	if c.Status.Allocation.AllocationTimestamp == nil {
		// The plugin's PreBind stamps an allocation that lacks it, and
		// an allocation may not change once written.
		c.Status.Allocation.AllocationTimestamp = &metav1.Time{Time: time.Now()}
	}
	if consumer != nil {
		c.Status.ReservedFor = append(c.Status.ReservedFor, *consumer)
	}
	c, err = client.UpdateStatus(ctx, c, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("allocate ResourceClaim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	if dm := t.handle.SharedDRAManager(); dm != nil {
		_ = dm.ResourceClaims().AssumeClaimAfterAPICall(c)
	}
	return nil
}

// releaseShared frees the claims Phalanx allocated for root that no pod
// uses yet, when no member of the hierarchy is reserved or bound: the
// group is planned again from scratch, maybe elsewhere, and a claim kept
// allocated would hold devices for an attempt that is over.
func (t *Topology) releaseShared(ctx context.Context, root groups.Key, tree *groups.Tree) {
	if !t.allocatedShared.Load() {
		return
	}
	seen := map[string]bool{}
	busy := false
	var refs []string
	var walk func(*groups.Tree)
	walk = func(tr *groups.Tree) {
		for _, m := range tr.Members {
			if m.State == groups.Assumed || m.State == groups.Bound {
				busy = true
			}
			for _, k := range planinput.ClaimKeys(m.Pod) {
				if !seen[k] {
					seen[k] = true
					refs = append(refs, k)
				}
			}
		}
		for _, ch := range tr.Children {
			walk(ch)
		}
	}
	walk(tree)
	dm := t.handle.SharedDRAManager()
	if busy || len(refs) == 0 || dm == nil {
		return
	}
	for _, k := range refs {
		ns, name, _ := strings.Cut(k, "/")
		if c, err := dm.ResourceClaims().Get(ns, name); err == nil {
			t.release(ctx, c, root.String(), true)
		}
	}
}

// releaseGone frees the unused claims Phalanx allocated for a group that
// is gone.
func (t *Topology) releaseGone(ctx context.Context, root groups.Key) {
	if !t.allocatedShared.Load() {
		return
	}
	dm := t.handle.SharedDRAManager()
	if dm == nil {
		return
	}
	claims, err := dm.ResourceClaims().List()
	if err != nil {
		return
	}
	for _, c := range claims {
		t.release(ctx, c, root.String(), false)
	}
}

// releaseOrphans runs once, on the first cycle of the scheduler that
// schedules. What Phalanx allocated for a group is freed when the group
// goes, by the scheduler that sees it go; a group deleted while no Phalanx
// scheduler ran (a crash, a failover, an upgrade) would leave its unused
// claims allocated, their devices lost to every pod, for as long as the
// claims exist. A claim marked for a group the cache does not know, that no
// pod has reserved, is freed; one whose group exists arms the release of
// the group's unused claims, which this scheduler did not allocate.
func (t *Topology) releaseOrphans(ctx context.Context) {
	dm := t.handle.SharedDRAManager()
	if dm == nil {
		return
	}
	claims, err := dm.ResourceClaims().List()
	if err != nil {
		return
	}
	var live map[string]bool
	for _, c := range claims {
		group := c.Annotations[v1alpha1.AllocatedForAnnotation]
		if group == "" {
			continue
		}
		t.allocatedShared.Store(true)
		if live == nil {
			live = map[string]bool{}
			for _, e := range t.groups.Entries() {
				// A label gang has no object: it lives while its pods do.
				if e.Exists || e.Key.Kind == groups.LabelKind {
					live[e.Key.String()] = true
				}
			}
		}
		if !live[group] {
			t.release(ctx, c, group, false)
		}
	}
}

// release frees claim when Phalanx allocated it for group and no pod has
// reserved it. With podGroupReserved, a reservation for a PodGroup, written
// with the allocation, goes with it: the caller found no member of the
// group reserved or bound, which is when upstream's DynamicResources frees
// a PodGroup's claim too. Other callers leave such a claim alone: the
// PodGroup's members may run on it, and kube-controller-manager frees it
// once the PodGroup is gone.
func (t *Topology) release(ctx context.Context, claim *resourceapi.ResourceClaim, group string, podGroupReserved bool) {
	if claim.Annotations[v1alpha1.AllocatedForAnnotation] != group || claim.Status.Allocation == nil {
		return
	}
	if slices.ContainsFunc(claim.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool {
		return !podGroupReserved || !isPodGroupRef(r)
	}) {
		return
	}
	logger := klog.FromContext(ctx)
	client := t.handle.ClientSet().ResourceV1().ResourceClaims(claim.Namespace)
	c := claim.DeepCopy()
	c.Status.Allocation = nil
	c.Status.ReservedFor = nil
	c, err := client.UpdateStatus(ctx, c, metav1.UpdateOptions{})
	if err != nil {
		if !apierrors.IsNotFound(err) {
			logger.Error(err, "Could not free a shared ResourceClaim allocated for its group", "claim", klog.KObj(claim), "group", group)
		}
		return
	}
	delete(c.Annotations, v1alpha1.AllocatedForAnnotation)
	c.Finalizers = slices.DeleteFunc(c.Finalizers, func(f string) bool { return f == resourceapi.Finalizer })
	if c, err = client.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		logger.Error(err, "Could not unmark a freed ResourceClaim", "claim", klog.KObj(claim))
		return
	}
	if dm := t.handle.SharedDRAManager(); dm != nil {
		_ = dm.ResourceClaims().AssumeClaimAfterAPICall(c)
	}
	logger.V(3).Info("Freed a shared ResourceClaim no member used", "claim", klog.KObj(claim), "group", group)
}
