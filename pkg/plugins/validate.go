package plugins

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"

	"github.com/phalanx-sched/phalanx/pkg/plugins/dra"
	"github.com/phalanx-sched/phalanx/pkg/plugins/gang"
	"github.com/phalanx-sched/phalanx/pkg/plugins/preemption"
	"github.com/phalanx-sched/phalanx/pkg/plugins/topology"
)

// ValidateArgs checks the args of every Phalanx plugin in every profile of
// cfg as the plugins will read them when the scheduler starts, and names
// each error by its field path in the file (profiles[0].pluginConfig[1].args),
// as kube-scheduler's own validation names the fields it checks. The
// scheduler would refuse the same args, but only once it builds its
// profiles, with the plugin's name and no path.
func ValidateArgs(cfg *schedconfig.KubeSchedulerConfiguration) field.ErrorList {
	var errs field.ErrorList
	for i, prof := range cfg.Profiles {
		for j, pc := range prof.PluginConfig {
			path := field.NewPath("profiles").Index(i).Child("pluginConfig").Index(j).Child("args")
			var err error
			switch pc.Name {
			case gang.Name:
				err = gang.ValidateArgs(pc.Args)
			case topology.Name:
				err = topology.ValidateArgs(pc.Args)
			case preemption.Name:
				err = preemption.ValidateArgs(pc.Args)
			case dra.Name:
				err = dra.ValidateArgs(pc.Args)
			}
			if err != nil {
				errs = append(errs, field.Invalid(path, field.OmitValueType{}, err.Error()))
			}
		}
	}
	return errs
}
