package gang

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
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

// reservedOnDeletedNode returns why the hierarchy of pod must not be
// allowed yet: a member (pod itself on node, or a waiting sibling) holds a
// reservation on a node that no longer exists. "" when every node exists.
// It closes the race with watchNodeDeletions when quorum is reached just
// as a node goes away.
func (pl *Gang) reservedOnDeletedNode(pod *corev1.Pod, node string, v *groups.View) string {
	nodes := pl.handle.SharedInformerFactory().Core().V1().Nodes().Lister()
	gone := func(name string) bool {
		_, err := nodes.Get(name)
		return apierrors.IsNotFound(err)
	}
	if gone(node) {
		return fmt.Sprintf("node %s of member %s/%s was deleted; the gang retries as a unit", node, pod.Namespace, pod.Name)
	}
	if !v.Grouped {
		return ""
	}
	// The members come in no order; the first by name is reported, so the
	// message does not change from one try to the next.
	var first *corev1.Pod
	var firstNode string
	for _, m := range pl.groups.HierarchyMembersIn(v.Leaf(), groups.Assumed) {
		if m.UID == pod.UID {
			continue
		}
		if first != nil && (first.Namespace < m.Namespace || first.Namespace == m.Namespace && first.Name < m.Name) {
			continue
		}
		if wp := pl.handle.GetWaitingPod(m.UID); wp != nil && gone(wp.GetPod().Spec.NodeName) {
			first, firstNode = m, wp.GetPod().Spec.NodeName
		}
	}
	if first != nil {
		return fmt.Sprintf("node %s of member %s/%s was deleted; the gang retries as a unit", firstNode, first.Namespace, first.Name)
	}
	return ""
}
