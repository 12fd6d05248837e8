package config

import (
	"errors"
	"fmt"

	"sigs.k8s.io/yaml"
)

// WithPluginArg returns base, a KubeSchedulerConfiguration, with
// args.<arg> of plugin set to value in every profile; a profile without a
// pluginConfig entry for plugin gets one. Everything else is kept, so a
// tool can turn one plugin argument on for a run (phalanx-sim's scenario
// scheduler block, the bench's reservation cases) on top of exactly what
// users deploy.
func WithPluginArg(base []byte, plugin, arg string, value any) ([]byte, error) {
	return editProfiles(base, func(profile map[string]any) {
		entries, _ := profile["pluginConfig"].([]any)
		found := false
		for _, e := range entries {
			entry, ok := e.(map[string]any)
			if !ok || entry["name"] != plugin {
				continue
			}
			args, _ := entry["args"].(map[string]any)
			if args == nil {
				args = map[string]any{}
			}
			args[arg] = value
			entry["args"] = args
			found = true
		}
		if !found {
			entries = append(entries, map[string]any{"name": plugin, "args": map[string]any{arg: value}})
		}
		profile["pluginConfig"] = entries
	})
}

// WithPodGroupClaimReservation returns base, a KubeSchedulerConfiguration,
// with every profile running PhalanxDynamicResources instead of upstream's
// DynamicResources: claims of scheduling.k8s.io PodGroups are reserved for
// the PodGroup, so that more than 256 members may share one
// (docs/user-guide.md, "GPUs through DRA"). Everything else is kept.
func WithPodGroupClaimReservation(base []byte) ([]byte, error) {
	return editProfiles(base, func(profile map[string]any) {
		plugins, _ := profile["plugins"].(map[string]any)
		if plugins == nil {
			plugins = map[string]any{}
		}
		multiPoint, _ := plugins["multiPoint"].(map[string]any)
		if multiPoint == nil {
			multiPoint = map[string]any{}
		}
		for set, name := range map[string]string{"enabled": "PhalanxDynamicResources", "disabled": "DynamicResources"} {
			list, _ := multiPoint[set].([]any)
			multiPoint[set] = append(list, map[string]any{"name": name})
		}
		plugins["multiPoint"] = multiPoint
		profile["plugins"] = plugins
	})
}

// editProfiles returns base, a KubeSchedulerConfiguration, with edit
// applied to every profile as a generic mapping. Everything else is kept.
func editProfiles(base []byte, edit func(profile map[string]any)) ([]byte, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(base, &cfg); err != nil {
		return nil, fmt.Errorf("parse the scheduler configuration: %w", err)
	}
	profiles, _ := cfg["profiles"].([]any)
	if len(profiles) == 0 {
		return nil, errors.New("the scheduler configuration has no profiles")
	}
	for i, p := range profiles {
		profile, ok := p.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("profiles[%d] of the scheduler configuration is not a mapping", i)
		}
		edit(profile)
	}
	return yaml.Marshal(cfg)
}
