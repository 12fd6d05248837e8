package planinput

import (
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// Which ResourceClaim a member's claim entry names: the same resolution the
// DynamicResources plugin makes, plus the claim the resourceclaim
// controller made from a template before the pod's status records it.

// groupClaimKeys are the claims (namespace/name) pod uses through entries
// that match its group's claims.
func groupClaimKeys(claims []groups.GroupClaim, pod *corev1.Pod) []string {
	var out []string
	for _, gc := range claims {
		name := gc.Claim()
		if name == "" {
			continue
		}
		for i := range pod.Spec.ResourceClaims {
			if gc.Matches(&pod.Spec.ResourceClaims[i]) {
				out = append(out, pod.Namespace+"/"+name)
			}
		}
	}
	return out
}

// ClaimKeys are the ResourceClaims pod uses (namespace/name) whose names
// are known: claims it names, and claims made from its templates once its
// status records them. Claims not made yet are left out.
func ClaimKeys(pod *corev1.Pod) []string {
	var out []string
	for i := range pod.Spec.ResourceClaims {
		if name, _, err := resourceclaim.Name(pod, &pod.Spec.ResourceClaims[i]); err == nil && name != nil {
			out = append(out, pod.Namespace+"/"+*name)
		}
	}
	return out
}

// claimName is the name of the claim pod's entry pc refers to, as the
// DynamicResources plugin resolves it, or, for a claim from a template
// that the pod's status does not name yet, of the claim the resourceclaim
// controller made for it: the controller creates the claim first. made is
// false while that claim does not exist; name is nil for an entry that
// needs no claim.
func (c *Constraints) claimName(pod *corev1.Pod, pc *corev1.PodResourceClaim) (name *string, made bool) {
	name, _, err := resourceclaim.Name(pod, pc)
	if err == nil {
		return name, true
	}
	name = c.claimMadeFor(pod, pc.Name)
	return name, name != nil
}

// claimMadeFor finds the claim the resourceclaim controller made from a
// template for pod's claim podClaim, before the pod's status names it.
func (c *Constraints) claimMadeFor(pod *corev1.Pod, podClaim string) *string {
	claims, err := c.DRA.sharedManager().ResourceClaims().List()
	if err != nil {
		return nil
	}
	for _, cl := range claims {
		if cl.Namespace != pod.Namespace || cl.Annotations[resourceapi.PodResourceClaimAnnotation] != podClaim {
			continue
		}
		for _, o := range cl.OwnerReferences {
			if o.UID == pod.UID && o.Controller != nil && *o.Controller {
				return &cl.Name
			}
		}
	}
	return nil
}
