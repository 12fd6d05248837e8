package plugins

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/phalanx-sched/phalanx/config"
	"github.com/phalanx-sched/phalanx/pkg/plugins/gang"
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
			for _, pc := range prof.PluginConfig {
				found[pc.Name]++
			}
		}
	}
	for _, name := range []string{gang.Name, topology.Name} {
		assert.NotZero(t, found[name], "no shipped profile configures %s", name)
	}
}
