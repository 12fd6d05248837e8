package topology

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceclaim"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"
)

// watchDevices moves t.deviceEpoch with every change that can change what
// a plan counts of devices: a claim created, allocated or freed, devices
// published, a class changed, a pod's claim made from its template. Node
// generations do not move with these, and an infeasible plan is reused
// while the snapshot is unchanged, so without the epoch a gang waiting for
// its members' claims would be judged by the plan made before they existed.
func (t *Topology) watchDevices(h fwk.Handle) {
	if !utilfeature.DefaultFeatureGate.Enabled(features.DynamicResourceAllocation) {
		return
	}
	bump := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { t.deviceEpoch.Add(1) },
		UpdateFunc: func(any, any) { t.deviceEpoch.Add(1) },
		DeleteFunc: func(any) { t.deviceEpoch.Add(1) },
	}
	f := h.SharedInformerFactory()
	stripManagedFields(f.Resource().V1().ResourceSlices().Informer(), f.Resource().V1().ResourceClaims().Informer())
	for _, inf := range []cache.SharedIndexInformer{
		f.Resource().V1().ResourceClaims().Informer(),
		f.Resource().V1().ResourceSlices().Informer(),
		f.Resource().V1().DeviceClasses().Informer(),
	} {
		_, _ = inf.AddEventHandler(bump)
	}
	_, _ = f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*corev1.Pod)
			n, ok2 := newObj.(*corev1.Pod)
			if ok1 && ok2 && !resourceclaim.PodStatusEqual(o.Status.ResourceClaimStatuses, n.Status.ResourceClaimStatuses) {
				t.deviceEpoch.Add(1)
			}
		},
	})
}

// stripManagedFields drops metadata.managedFields from the objects the
// informers keep, as upstream's scheduler does for pods: nothing in the
// scheduler reads them, and a claim's list grows with every writer (the
// resourceclaim controller, the scheduler's allocation and reservation).
// The DynamicResources plugin updates claims from these copies; an update
// without managedFields keeps the stored ones. A transform can only be set
// before an informer starts: when one already runs (another profile's
// plugin set it, or an embedding program started the factory), the
// objects simply stay whole.
func stripManagedFields(informers ...cache.SharedIndexInformer) {
	for _, inf := range informers {
		if err := inf.SetTransform(func(obj any) (any, error) {
			if m, ok := obj.(metav1.Object); ok && m.GetManagedFields() != nil {
				m.SetManagedFields(nil)
			}
			return obj, nil
		}); err != nil {
			klog.V(2).InfoS("ResourceSlices and ResourceClaims keep their managedFields", "err", err)
		}
	}
}
