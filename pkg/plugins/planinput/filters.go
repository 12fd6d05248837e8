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
	names.DynamicResources: true, pluginrt.DynamicResourcesName: true, pluginrt.TopologyName: true,
	pluginrt.InterPodAffinityName: true,
}

// UnknownFilters names the Filter plugins the profile behind h runs outside
// modelled. A handle that cannot list its plugins gives a name no plugin
// has, so nothing is ever taken as skipped for it.
func UnknownFilters(h fwk.Handle) []string {
	lister, ok := h.(interface{ ListPlugins() *config.Plugins })
	if !ok {
		return []string{"(unknown profile)"}
	}
	ps := lister.ListPlugins()
	if ps == nil {
		return nil
	}
	var out []string
	for _, p := range ps.Filter.Enabled {
		if !modelled[p.Name] {
			out = append(out, p.Name)
		}
	}
	return out
}
