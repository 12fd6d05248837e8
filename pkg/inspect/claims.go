package inspect

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/ptr"
)

// claimOverlay is the DRA manager the inspector's frameworks read: the
// scheduler's, with the ResourceClaims of the fit request in progress laid
// over it, so that the plan and the victim search count the devices the
// request's pods would claim as the scheduler will once they exist.
// Requests are serialized (Inspector.mu), and claims is set and cleared
// under that lock.
type claimOverlay struct {
	fwk.SharedDRAManager
	claims map[string]*resourceapi.ResourceClaim // namespace/name
}

func (o *claimOverlay) ResourceClaims() fwk.ResourceClaimTracker {
	base := o.SharedDRAManager.ResourceClaims()
	if len(o.claims) == 0 {
		return base
	}
	return &overlayTracker{ResourceClaimTracker: base, claims: o.claims}
}

type overlayTracker struct {
	fwk.ResourceClaimTracker
	claims map[string]*resourceapi.ResourceClaim
}

func (t *overlayTracker) Get(namespace, name string) (*resourceapi.ResourceClaim, error) {
	if c, ok := t.claims[namespace+"/"+name]; ok {
		return c, nil
	}
	return t.ResourceClaimTracker.Get(namespace, name)
}

func (t *overlayTracker) List() ([]*resourceapi.ResourceClaim, error) {
	out, err := t.ResourceClaimTracker.List()
	if err != nil {
		return nil, err
	}
	var kept []*resourceapi.ResourceClaim
	for _, c := range out {
		if _, shadowed := t.claims[c.Namespace+"/"+c.Name]; !shadowed {
			kept = append(kept, c)
		}
	}
	for _, c := range t.claims {
		kept = append(kept, c)
	}
	return kept, nil
}

// templateLookup reads a ResourceClaimTemplate of the cluster.
type templateLookup func(namespace, name string) (*resourceapi.ResourceClaimTemplate, error)

// podClaims makes the claims the request's pods would get: a claim of the
// request for a resourceClaimName that names one (else the cluster's is
// read when the plan asks), and for a resourceClaimTemplateName the claim
// the resourceclaim controller would make from the template (the
// request's, else the cluster's), recorded in the pod's status as the
// controller records it. Call it before the pods enter the group cache.
func (h *hypothetical) podClaims(lookup templateLookup) error {
	for _, pod := range h.pods {
		for _, pc := range pod.Spec.ResourceClaims {
			if pc.ResourceClaimTemplateName == nil {
				continue
			}
			tmpl := h.templates[pod.Namespace+"/"+*pc.ResourceClaimTemplateName]
			if tmpl == nil {
				if lookup == nil {
					return badRequest("pod %s names ResourceClaimTemplate %s, which is not in the request", pod.Name, *pc.ResourceClaimTemplateName)
				}
				var err error
				if tmpl, err = lookup(pod.Namespace, *pc.ResourceClaimTemplateName); err != nil {
					return badRequest("pod %s names ResourceClaimTemplate %s, which is neither in the request nor readable in namespace %s: %v",
						pod.Name, *pc.ResourceClaimTemplateName, pod.Namespace, err)
				}
			}
			name := fmt.Sprintf("%s-%s", pod.Name, pc.Name)
			claim := &resourceapi.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{
					Namespace:   pod.Namespace,
					Name:        name,
					UID:         types.UID(fmt.Sprintf("%s-claim-%s", pod.UID, pc.Name)),
					Annotations: map[string]string{resourceapi.PodResourceClaimAnnotation: pc.Name},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID,
						Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
				},
				Spec: *tmpl.Spec.Spec.DeepCopy(),
			}
			h.claims[pod.Namespace+"/"+name] = claim
			pod.Status.ResourceClaimStatuses = append(pod.Status.ResourceClaimStatuses,
				corev1.PodResourceClaimStatus{Name: pc.Name, ResourceClaimName: ptr.To(name)})
		}
	}
	return nil
}
