package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	configv1 "k8s.io/kube-scheduler/config/v1"
	spv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// requiredVersion returns the version a go.mod requires of module, or "".
func requiredVersion(t *testing.T, goMod, module string) string {
	t.Helper()
	data, err := os.ReadFile(goMod)
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == module {
			return f[1]
		}
	}
	return ""
}

// The arm's binaries, the CRD shipped in manifests/components and the
// types this module links must all be one scheduler-plugins release.
func TestSchedulerPluginsVersionIsOneRelease(t *testing.T) {
	const mod = "sigs.k8s.io/scheduler-plugins"
	root := filepath.Join("..", "..")
	assert.Equal(t, SchedulerPluginsVersion, requiredVersion(t, filepath.Join(root, schedulerPluginsModule, "go.mod"), mod),
		"hack/scheduler-plugins builds the release the arm names")
	assert.Equal(t, SchedulerPluginsVersion, requiredVersion(t, filepath.Join(root, "go.mod"), mod),
		"the PodGroup types the harness creates are the same release")
	crd, err := os.ReadFile(filepath.Join(root, "manifests/components/scheduler-plugins-crd/scheduling.x-k8s.io_podgroups.yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(crd), mod+" "+SchedulerPluginsVersion, "the shipped CRD was copied from the same release")
}

func TestSchedulerPluginsConfigIsAValidV1Profile(t *testing.T) {
	var cfg configv1.KubeSchedulerConfiguration
	require.NoError(t, yaml.UnmarshalStrict(schedulerPluginsConfig(), &cfg))
	require.Len(t, cfg.Profiles, 1)
	p := cfg.Profiles[0]
	assert.Equal(t, schedulerPluginsSchedulerName, *p.SchedulerName)
	plugins := p.Plugins
	require.NotNil(t, plugins)
	for name, set := range map[string]configv1.PluginSet{
		"queueSort": plugins.QueueSort, "preFilter": plugins.PreFilter, "postFilter": plugins.PostFilter,
		"permit": plugins.Permit, "reserve": plugins.Reserve,
	} {
		require.Len(t, set.Enabled, 1, name)
		assert.Equal(t, "Coscheduling", set.Enabled[0].Name, name)
	}
	assert.Equal(t, []configv1.Plugin{{Name: "*"}}, plugins.QueueSort.Disabled, "Coscheduling replaces PrioritySort")

	full, err := schedulerConfig(schedulerPluginsConfig(), "/tmp/kubeconfig")
	require.NoError(t, err)
	require.NoError(t, yaml.UnmarshalStrict(full, &cfg))
	assert.Equal(t, "/tmp/kubeconfig", cfg.ClientConnection.Kubeconfig)
	assert.False(t, *cfg.LeaderElection.LeaderElect)
}

func TestSchedulerPluginsPodsAndCases(t *testing.T) {
	c := Case{Gangs: 2, PodsPerGang: 8, AntiAffinity: true, Zones: 1, RacksPerZone: 1, NodesPerRack: 10}
	p := benchPod(c, "gang-1-0", "gang-1", ArmSchedulerPlugins, "")
	assert.Equal(t, schedulerPluginsSchedulerName, p.Spec.SchedulerName)
	assert.Equal(t, "gang-1", p.Labels[spv1alpha1.PodGroupLabel], "joins its gang the scheduler-plugins way")
	assert.Equal(t, "scheduling.x-k8s.io/pod-group", spv1alpha1.PodGroupLabel)
	assert.NotContains(t, p.Labels, v1alpha1.PodGroupLabel)
	assert.Nil(t, p.Spec.SchedulingGroup)
	assert.Equal(t, benchPod(c, "gang-1-0", "gang-1", ArmUpstream, "").Spec.Affinity, p.Spec.Affinity, "the same anti-affinity as the other arms")

	assert.Equal(t, int32(8), schedulerPluginsPodGroup("gang-1", 8).Spec.MinMember)

	for _, c := range append(Cases(true), Cases(false)...) {
		why := schedulerPluginsUnsupported(c)
		if c.TopologyKey != "" {
			assert.NotEmpty(t, why, "%s needs a topology constraint", c.Name)
		} else {
			assert.Empty(t, why, "%s runs under scheduler-plugins", c.Name)
		}
	}
}

func TestParseArmsKnowsSchedulerPlugins(t *testing.T) {
	arms, err := ParseArms("phalanx,upstream,scheduler-plugins")
	require.NoError(t, err)
	assert.Equal(t, []Arm{ArmPhalanx, ArmUpstream, ArmSchedulerPlugins}, arms)
	_, err = ParseArms("coscheduling")
	assert.ErrorContains(t, err, "scheduler-plugins")
}
