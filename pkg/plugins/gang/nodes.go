package gang

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// A member waiting in Permit holds a reservation on one node. If that node
// is deleted while it waits, allowing the member would bind it to a node
// that no longer exists (the API server accepts such a binding), and the
// gang would drop below its minimum once the orphaned pod is collected.
// Instead the member is rejected: its Unreserve releases every waiting
// member of the hierarchy, and the gang re-plans on the nodes that remain.

// watchNodeDeletions rejects the waiting members reserved on a node when
// the node is deleted.
func (pl *Gang) watchNodeDeletions() error {
	_, err := pl.handle.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if node, ok := obj.(*corev1.Node); ok {
				pl.rejectWaitingOn(node.Name)
			}
		},
	})
	return err
}

func (pl *Gang) rejectWaitingOn(node string) {
	var onNode []fwk.WaitingPod
	pl.handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if wp.GetPod().Spec.NodeName == node {
			onNode = append(onNode, wp)
		}
	})
	for _, wp := range onNode {
		pod := wp.GetPod()
		if wp.Reject(Name, fmt.Sprintf("node %s was deleted while member %s/%s waited on it; the gang retries as a unit", node, pod.Namespace, pod.Name)) {
			klog.Background().V(2).Info("Rejected gang member reserved on a deleted node", "pod", klog.KObj(pod), "node", node)
		}
	}
}
