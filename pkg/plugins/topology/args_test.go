package topology

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	schedconfig "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/scheme"

	"github.com/phalanx-sched/phalanx/config"
)

// TestShippedProfilesArgsDecode: the args every profile in config/ gives
// the plugin are ones it starts with.
func TestShippedProfilesArgsDecode(t *testing.T) {
	found := 0
	for file, data := range map[string][]byte{"second-scheduler.yaml": config.SecondScheduler, "replace-default.yaml": config.ReplaceDefault, "gang-only.yaml": config.GangOnly} {
		obj, _, err := scheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
		require.NoError(t, err, file)
		for _, prof := range obj.(*schedconfig.KubeSchedulerConfiguration).Profiles {
			for _, pc := range prof.PluginConfig {
				if pc.Name == Name {
					found++
					_, _, err := decodeArgs(pc.Args)
					assert.NoError(t, err, "%s: profile %s", file, prof.SchedulerName)
				}
			}
		}
	}
	assert.NotZero(t, found, "no shipped profile configures %s", Name)
}
