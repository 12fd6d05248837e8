package plugins

import (
	"errors"

	"k8s.io/apimachinery/pkg/util/validation/field"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	"github.com/phalanx-sched/phalanx/pkg/plugins/dra"
	"github.com/phalanx-sched/phalanx/pkg/plugins/gang"
	"github.com/phalanx-sched/phalanx/pkg/plugins/podaffinity"
	"github.com/phalanx-sched/phalanx/pkg/plugins/preemption"
	"github.com/phalanx-sched/phalanx/pkg/plugins/topology"
)

// ValidateArgs checks the args of every Phalanx plugin in every profile of
// cfg as the plugins will read them when the scheduler starts, and names
// each error by its field path in the file (profiles[0].pluginConfig[1].args),
// as kube-scheduler's own validation names the fields it checks. The
// scheduler would refuse the same args, but only once it builds its
// profiles, with the plugin's name and no path.
//
// It also refuses a profile that runs a Phalanx plugin beside the upstream
// plugin it replaces (PhalanxDynamicResources and DynamicResources: each
// would allocate every claim; PhalanxInterPodAffinity and
// InterPodAffinity: every pod would be filtered and scored twice), which
// the framework would start without complaint, and a profile that gives
// args to InterPodAffinity while PhalanxInterPodAffinity runs in its
// place: the framework would pass them to no plugin.
func ValidateArgs(cfg *schedconfig.KubeSchedulerConfiguration) field.ErrorList {
	var errs field.ErrorList
	for i, prof := range cfg.Profiles {
		replaced := map[string]bool{}
		for _, r := range []struct{ ours, theirs string }{{dra.Name, names.DynamicResources}, {podaffinity.Name, names.InterPodAffinity}} {
			if prof.Plugins == nil || !enabled(prof.Plugins.MultiPoint, r.ours) {
				continue
			}
			replaced[r.theirs] = true
			if enabled(prof.Plugins.MultiPoint, r.theirs) {
				errs = append(errs, field.Invalid(field.NewPath("profiles").Index(i).Child("plugins", "multiPoint", "enabled"), r.ours,
					r.ours+" runs in place of "+r.theirs+": disable "+r.theirs+" in the profile"))
			}
		}
		for j, pc := range prof.PluginConfig {
			path := field.NewPath("profiles").Index(i).Child("pluginConfig").Index(j).Child("args")
			var err error
			switch pc.Name {
			case names.InterPodAffinity:
				if replaced[pc.Name] && !enabled(prof.Plugins.MultiPoint, pc.Name) {
					err = errors.New(podaffinity.Name + " runs in place of " + pc.Name + " and takes its args: name this entry " + podaffinity.Name)
				}
			case podaffinity.Name:
				err = podaffinity.ValidateArgs(pc.Args)
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

// enabled says whether set enables plugin (and does not disable it).
func enabled(set schedconfig.PluginSet, plugin string) bool {
	for _, p := range set.Disabled {
		if p.Name == plugin || p.Name == "*" {
			return false
		}
	}
	for _, p := range set.Enabled {
		if p.Name == plugin {
			return true
		}
	}
	return false
}
