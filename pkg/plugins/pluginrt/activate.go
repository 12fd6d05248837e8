package pluginrt

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
)

// Activate moves pods to the scheduling queue's active queue, which takes
// them keyed by namespace/name; nothing happens for none.
func Activate(h fwk.Handle, pods []*corev1.Pod) {
	if len(pods) == 0 {
		return
	}
	byName := make(map[string]*corev1.Pod, len(pods))
	for _, p := range pods {
		byName[p.Namespace+"/"+p.Name] = p
	}
	h.Activate(klog.Background(), byName)
}
