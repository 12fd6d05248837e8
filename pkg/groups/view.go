package groups

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// View is one pod's group as one scheduling cycle sees it: the pod's
// attachment (parsed from its labels or spec once), its chain of groups from
// leaf to root, the gang its quorum counts toward, and the effective
// priority of the hierarchy. The first PreFilter that needs it resolves it
// and stores it in the cycle's CycleState (groupcache.Fed.ViewFor); every
// later extension point of that cycle (Filter, PostFilter, Reserve,
// Permit, Unreserve) reads it from there instead of resolving the pod
// again.
//
// A View is never modified after it is built: preemption's dry runs clone
// the CycleState and read it from several goroutines. What moves during a
// cycle (members reserved, bound or deleted) is not in it: quorum is counted
// live from the cache by the leaf's key (Cache.QuorumOf).
type View struct {
	UID types.UID
	// Grouped is false for a pod in no group; nothing else is set then.
	Grouped bool
	// Attachment is the pod's leaf group and, for a label gang, what its
	// min-available label says.
	Attachment Attachment
	// Err is why the pod's group cannot be resolved: a malformed
	// attachment, a *MissingError, or a hierarchy deeper than allowed
	// (which includes cycles). Chain is empty then.
	Err error
	// Chain is the leaf group followed by its ancestors up to the root, as
	// the cache had them when the view was built.
	Chain Chain
	// Unit is the highest gang on the chain: the members whose quorum the
	// pod counts toward, which wait for it in Permit and let go when it
	// fails. Gang is false when no group of the chain is a gang.
	Unit Key
	Gang bool
	// attachErr: Err is about the attachment itself, so no group is known.
	attachErr bool

	// Priority and Policy are what every member of the hierarchy must
	// have (the root's, or the pod's own when the dialect defines no group
	// priority); PriorityErr is why they cannot be resolved (a missing
	// PriorityClass). Only set for a resolved chain.
	Priority    int32
	Policy      corev1.PreemptionPolicy
	PriorityErr error
}

// Leaf is the pod's own group's key.
func (v *View) Leaf() Key { return v.Attachment.Key }

// Root is the key of the top of the pod's hierarchy; the leaf's when the
// chain could not be resolved.
func (v *View) Root() Key {
	if len(v.Chain) == 0 {
		return v.Attachment.Key
	}
	return v.Chain.Root().Key
}

// Resolved reports whether the pod is in a group whose whole chain exists.
func (v *View) Resolved() bool { return v.Grouped && v.Err == nil }

// ResolveView builds pod's View from the cache as it is now, with the
// hierarchy's priority resolved through classes.
func (c *Cache) ResolveView(pod *corev1.Pod, classes PriorityClassLister) *View {
	v := &View{UID: pod.UID}
	a, grouped, err := Attach(pod)
	if !grouped {
		return v
	}
	v.Grouped, v.Attachment = true, a
	if err != nil {
		v.Err, v.attachErr = err, true
		return v
	}
	c.mu.RLock()
	chain, err := c.chainLocked(a.Key)
	if err == nil {
		v.Chain = make(Chain, len(chain))
		for i, g := range chain {
			v.Chain[i] = infoOf(g)
		}
	}
	c.mu.RUnlock()
	if err != nil {
		v.Err = err
		return v
	}
	for _, g := range v.Chain {
		if g.Gang {
			v.Unit, v.Gang = g.Key, true
		}
	}
	v.Priority, v.Policy, v.PriorityErr = EffectivePriority(pod, v.Chain.Root(), classes)
	return v
}

// PodPriority is the pod's own priority, 0 when unset.
func PodPriority(p *corev1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// PodPolicy is the pod's own preemption policy, PreemptLowerPriority when
// unset.
func PodPolicy(p *corev1.Pod) corev1.PreemptionPolicy {
	if p.Spec.PreemptionPolicy != nil {
		return *p.Spec.PreemptionPolicy
	}
	return corev1.PreemptLowerPriority
}
