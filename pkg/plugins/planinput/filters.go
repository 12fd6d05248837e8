package planinput

import (
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// modelled are the Filter plugins whose verdicts the planner computes
// itself or takes from a probe of the pod shapes that need one. Any other
// Filter plugin in the profile could refuse any pod, so every shape is
// probed then.
var modelled = map[string]bool{
	names.NodeUnschedulable: true, names.NodeName: true, names.TaintToleration: true,
	names.NodeAffinity: true, names.NodePorts: true, names.NodeResourcesFit: true,
	names.VolumeRestrictions: true, names.NodeVolumeLimits: true, names.VolumeBinding: true,
	names.VolumeZone: true, names.PodTopologySpread: true, names.InterPodAffinity: true,
	names.DynamicResources: true, pluginrt.TopologyName: true,
}

// UnknownFilters reports whether the profile behind h runs a Filter plugin
// outside modelled.
func UnknownFilters(h fwk.Handle) bool {
	lister, ok := h.(interface{ ListPlugins() *config.Plugins })
	if !ok {
		return true
	}
	ps := lister.ListPlugins()
	if ps == nil {
		return false
	}
	for _, p := range ps.Filter.Enabled {
		if !modelled[p.Name] {
			return true
		}
	}
	return false
}
