package plugins

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/phalanx-sched/phalanx/config"
	"github.com/phalanx-sched/phalanx/pkg/plugins/dra"
	"github.com/phalanx-sched/phalanx/pkg/plugins/gang"
	"github.com/phalanx-sched/phalanx/pkg/plugins/podaffinity"
	"github.com/phalanx-sched/phalanx/pkg/plugins/topology"
)

// TestShippedProfilesArgsValidate: the args every profile in config/ gives
// a Phalanx plugin are ones it starts with, and the shipped profiles
// configure both the gang and the topology plugin.
func TestShippedProfilesArgsValidate(t *testing.T) {
	found := map[string]int{}
	for file, data := range map[string][]byte{"second-scheduler.yaml": config.SecondScheduler, "replace-default.yaml": config.ReplaceDefault, "gang-only.yaml": config.GangOnly} {
		obj, _, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
		require.NoError(t, err, file)
		cfg := obj.(*schedconfig.KubeSchedulerConfiguration)
		assert.Empty(t, ValidateArgs(cfg), file)
		for _, prof := range cfg.Profiles {
			assert.True(t, enabled(prof.Plugins.MultiPoint, podaffinity.Name), "%s runs %s", file, podaffinity.Name)
			assert.False(t, enabled(prof.Plugins.MultiPoint, "InterPodAffinity"), "%s runs InterPodAffinity", file)
			for _, pc := range prof.PluginConfig {
				found[pc.Name]++
			}
		}
	}
	for _, name := range []string{gang.Name, topology.Name} {
		assert.NotZero(t, found[name], "no shipped profile configures %s", name)
	}
}

// TestPodGroupClaimReservationProfile: config.WithPodGroupClaimReservation
// swaps DynamicResources for PhalanxDynamicResources in every profile of a
// shipped configuration, and the plugin's args are DynamicResources' own,
// checked as kube-scheduler checks them, with the field path named.
func TestPodGroupClaimReservationProfile(t *testing.T) {
	data, err := config.WithPodGroupClaimReservation(config.ReplaceDefault)
	require.NoError(t, err)
	data, err = config.WithPluginArg(data, dra.Name, "filterTimeout", "5s")
	require.NoError(t, err)
	obj, _, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	require.NoError(t, err)
	cfg := obj.(*schedconfig.KubeSchedulerConfiguration)
	assert.Empty(t, ValidateArgs(cfg))
	require.NotEmpty(t, cfg.Profiles)
	for _, prof := range cfg.Profiles {
		var enabled, disabled []string
		for _, p := range prof.Plugins.MultiPoint.Enabled {
			enabled = append(enabled, p.Name)
		}
		for _, p := range prof.Plugins.MultiPoint.Disabled {
			disabled = append(disabled, p.Name)
		}
		assert.Contains(t, enabled, dra.Name, prof.SchedulerName)
		assert.NotContains(t, enabled, "DynamicResources", prof.SchedulerName)
		assert.Contains(t, disabled, "DynamicResources", prof.SchedulerName)
	}

	for arg, value := range map[string]any{"filterTimeout": "-1s", "filterTimout": "5s"} {
		bad, err := config.WithPluginArg(config.SecondScheduler, dra.Name, arg, value)
		require.NoError(t, err)
		obj, _, err := scheme.Codecs.UniversalDecoder().Decode(bad, nil, nil)
		require.NoError(t, err)
		errs := ValidateArgs(obj.(*schedconfig.KubeSchedulerConfiguration))
		require.Len(t, errs, 1, arg)
		assert.Contains(t, errs[0].Error(), "profiles[0].pluginConfig[", arg)
		assert.Contains(t, errs[0].Error(), dra.Name, arg)
	}
}

// A profile that enables PhalanxDynamicResources beside the default
// DynamicResources is refused, naming the plugin to disable.
func TestBothDRAPluginsRefused(t *testing.T) {
	both := strings.Replace(string(config.SecondScheduler), "      - name: PhalanxGang\n", "      - name: PhalanxGang\n      - name: PhalanxDynamicResources\n", 1)
	require.NotEqual(t, string(config.SecondScheduler), both)
	obj, _, err := scheme.Codecs.UniversalDecoder().Decode([]byte(both), nil, nil)
	require.NoError(t, err)
	errs := ValidateArgs(obj.(*schedconfig.KubeSchedulerConfiguration))
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), "profiles[0].plugins.multiPoint.enabled")
	assert.Contains(t, errs[0].Error(), "disable DynamicResources")
}

func decodeConfig(t *testing.T, data []byte) *schedconfig.KubeSchedulerConfiguration {
	t.Helper()
	obj, _, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	require.NoError(t, err)
	return obj.(*schedconfig.KubeSchedulerConfiguration)
}

// A profile that enables PhalanxInterPodAffinity beside InterPodAffinity
// is refused with a message naming both.
func TestBothInterPodAffinityPluginsRefused(t *testing.T) {
	both := strings.Replace(string(config.SecondScheduler), "      - name: InterPodAffinity\n", "", 1)
	require.NotEqual(t, string(config.SecondScheduler), both)
	errs := ValidateArgs(decodeConfig(t, []byte(both)))
	require.Len(t, errs, 1)
	assert.Contains(t, errs[0].Error(), "profiles[0].plugins.multiPoint.enabled")
	assert.Contains(t, errs[0].Error(), "PhalanxInterPodAffinity runs in place of InterPodAffinity: disable InterPodAffinity")
}

// PhalanxInterPodAffinity takes InterPodAffinity's args under its own
// name, checked as kube-scheduler checks them; args left under
// InterPodAffinity, which no plugin would read, are refused.
func TestInterPodAffinityArgs(t *testing.T) {
	ok, err := config.WithPluginArg(config.SecondScheduler, podaffinity.Name, "hardPodAffinityWeight", 5)
	require.NoError(t, err)
	ok, err = config.WithPluginArg(ok, podaffinity.Name, "ignorePreferredTermsOfExistingPods", true)
	require.NoError(t, err)
	assert.Empty(t, ValidateArgs(decodeConfig(t, ok)))

	for _, c := range []struct {
		plugin, arg string
		value       any
		want        string
	}{
		{podaffinity.Name, "hardPodAffinityWeight", 500, "hardPodAffinityWeight"},
		{podaffinity.Name, "hardPodAfinityWeight", 5, "unknown field"},
		{"InterPodAffinity", "hardPodAffinityWeight", 5, "name this entry PhalanxInterPodAffinity"},
	} {
		bad, err := config.WithPluginArg(config.SecondScheduler, c.plugin, c.arg, c.value)
		require.NoError(t, err)
		errs := ValidateArgs(decodeConfig(t, bad))
		require.Len(t, errs, 1, c.arg)
		assert.Contains(t, errs[0].Error(), "profiles[0].pluginConfig[", c.arg)
		assert.Contains(t, errs[0].Error(), c.want, c.arg)
	}
}
