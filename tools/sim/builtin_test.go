package sim

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	"sigs.k8s.io/yaml"
)

func TestBuiltinScenarios(t *testing.T) {
	all, err := Builtins()
	require.NoError(t, err)
	names := make([]string, len(all))
	for i, sc := range all {
		names[i] = sc.Name
	}
	assert.Equal(t, []string{"balloons", "deadlock", "dra", "elastic", "fallback", "kueue", "multilevel", "protected", "pytorchjob", "ranks", "starvation", "tfjob", "upstream"}, names)

	for _, sc := range all {
		t.Run(sc.Name+" is described and checks something in every phase", func(t *testing.T) {
			assert.NotEmpty(t, sc.Description)
			assert.Equal(t, "built-in", sc.Source)
			checks := 0
			for _, st := range sc.Steps {
				checks += len(st.Expect)
				if st.Wait != nil {
					checks++
				}
			}
			assert.GreaterOrEqual(t, checks, 2, "a scenario without checks cannot fail")
			assert.NotNil(t, sc.Steps[len(sc.Steps)-1].Wait, "the last step waits for the outcome it checks")
		})
	}

	t.Run("tfjob is the TFJob demo's label-pair gang of 1 PS and 4 two-GPU workers", func(t *testing.T) {
		sc := find(t, all, "tfjob")
		create := sc.Steps[0].Create
		require.NotNil(t, create)
		require.Len(t, create.objects, 1)
		assert.Equal(t, "Pod", create.objects[0].kind)
		assert.Equal(t, "tfjob-ps-0", create.objects[0].obj.GetName())
		require.Len(t, create.Gangs, 1)
		g := create.Gangs[0]
		assert.True(t, g.LabelPair)
		assert.Equal(t, 4, g.Size)
		assert.Equal(t, 5, g.minCount())
		assert.Equal(t, 2, g.GPUs)
		pods := g.pods()
		require.Len(t, pods, 4)
		assert.Equal(t, "tfjob-worker-3", pods[3].Name)
		assert.Equal(t, map[string]string{
			"pod-group.scheduling.sigs.k8s.io/name":          "tfjob",
			"pod-group.scheduling.sigs.k8s.io/min-available": "5",
		}, pods[0].Labels)
		assert.Nil(t, g.podGroup(), "a label-pair gang has no PodGroup object")
	})

	t.Run("pytorchjob creates the Training Operator's objects as the sample has them", func(t *testing.T) {
		sc := find(t, all, "pytorchjob")
		create := sc.Steps[0].Create
		require.NotNil(t, create)
		data, err := os.ReadFile(filepath.Join("..", "..", "manifests", "samples", "scheduler-plugins", "training-operator-pytorchjob.yaml"))
		require.NoError(t, err)
		var sample []inlineObject
		for i, doc := range strings.Split(string(data), "\n---\n") {
			raw, err := yaml.YAMLToJSON([]byte(doc))
			require.NoError(t, err)
			o, errs := decodeInline(raw, field.NewPath("sample").Index(i))
			require.Empty(t, errs)
			sample = append(sample, o)
		}
		require.Len(t, create.objects, len(sample))
		for i := range sample {
			assert.Equal(t, sample[i].kind, create.objects[i].kind)
			assert.Equal(t, sample[i].obj, create.objects[i].obj, "object %d is the sample's, unchanged", i)
		}
		pg, ok := create.objects[0].obj.(*xv1alpha1.PodGroup)
		require.True(t, ok, "the first object is scheduler-plugins' PodGroup")
		assert.Equal(t, int32(3), pg.Spec.MinMember)
	})

	t.Run("deadlock interleaves two whole-cluster gangs", func(t *testing.T) {
		sc := find(t, all, "deadlock")
		assert.True(t, sc.Steps[0].Create.Interleave)
		nodes := sc.Cluster.Zones * sc.Cluster.Racks * sc.Cluster.NodesPerRack
		for _, g := range sc.Steps[0].Create.Gangs {
			assert.Equal(t, nodes, g.Size, "each experiment needs the whole cluster")
		}
	})

	t.Run("dra claims GPUs through a template, and the compute gang shares one claim with no topology key", func(t *testing.T) {
		sc := find(t, all, "dra")
		require.NotNil(t, sc.Cluster.DRA)
		assert.Equal(t, 1, sc.Cluster.DRA.DevicesPerNode, "one GPU per node: a rack gang binds one pod per node")
		var trainer, compute *Gang
		for _, st := range sc.Steps {
			if st.Create == nil {
				continue
			}
			for i := range st.Create.Gangs {
				switch g := &st.Create.Gangs[i]; g.Name {
				case "trainer":
					trainer = g
				case "compute":
					compute = g
				}
			}
		}
		require.NotNil(t, trainer)
		require.NotNil(t, compute)
		assert.Equal(t, sc.Cluster.NodesPerRack, trainer.Size)
		assert.Empty(t, compute.TopologyKey, "only the shared claim keeps the compute gang in one rack")
		pod := compute.pods()[0]
		require.Len(t, pod.Spec.ResourceClaims, 2)
		assert.Equal(t, "gpu", *pod.Spec.ResourceClaims[0].ResourceClaimTemplateName)
		assert.Equal(t, "domain-channel", *pod.Spec.ResourceClaims[1].ResourceClaimName)
		assert.Len(t, pod.Spec.Containers[0].Resources.Claims, 2, "the container uses both claims")
	})

	t.Run("starvation offers more work than the cluster holds, with reservations on", func(t *testing.T) {
		sc := find(t, all, "starvation")
		require.NotNil(t, sc.Scheduler)
		require.NotNil(t, sc.Scheduler.Reservation)
		s := sc.Steps[0].Stream
		require.NotNil(t, s)
		nodes := sc.Cluster.Zones * sc.Cluster.Racks * sc.Cluster.NodesPerRack
		plan := s.schedule()
		var work time.Duration
		for _, a := range plan {
			work += a.runtime
		}
		arrivals := plan[len(plan)-1].at
		assert.Greater(t, work.Seconds()/arrivals.Seconds(), float64(nodes),
			"the stream's one-node jobs offer more node-seconds a second than there are nodes, so no rack empties on its own")
		var gang *Gang
		for _, st := range sc.Steps {
			if st.Create != nil && len(st.Create.Gangs) > 0 {
				gang = &st.Create.Gangs[0]
			}
		}
		require.NotNil(t, gang)
		assert.Equal(t, sc.Cluster.NodesPerRack, gang.Size, "the gang needs a whole rack")
		assert.Equal(t, RackLabel, resolveKey(gang.TopologyKey))
	})
}

func find(t *testing.T, all []*Scenario, name string) *Scenario {
	t.Helper()
	for _, sc := range all {
		if sc.Name == name {
			return sc
		}
	}
	require.Failf(t, "no scenario", "%s", name)
	return nil
}

func TestLoad(t *testing.T) {
	t.Run("all is every built-in scenario", func(t *testing.T) {
		got, err := Load("all")
		require.NoError(t, err)
		assert.Len(t, got, 13)
	})
	t.Run("a built-in name loads that scenario", func(t *testing.T) {
		got, err := Load("deadlock")
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, "deadlock", got[0].Name)
	})
	t.Run("a path loads the file and remembers it", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "mine.yaml")
		require.NoError(t, os.WriteFile(path, []byte(minimal), 0o600))
		got, err := Load(path)
		require.NoError(t, err)
		require.Len(t, got, 1)
		assert.Equal(t, "mine", got[0].Name)
		assert.Equal(t, path, got[0].Source)
	})
	t.Run("an unknown name lists the built-ins", func(t *testing.T) {
		_, err := Load("balloon")
		require.Error(t, err)
		assert.Contains(t, err.Error(), `"balloon" is neither a built-in scenario (balloons, deadlock, dra, elastic, fallback, kueue, multilevel, protected, pytorchjob, ranks, starvation, tfjob, upstream, or all) nor a file`)
	})
	t.Run("an invalid file names the file and the field", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "bad.yaml")
		require.NoError(t, os.WriteFile(path, []byte("name: bad\ncluster: {zones: 1, racks: 1, nodesPerRack: 1}\nsteps: []\n"), 0o600))
		_, err := Load(path)
		require.Error(t, err)
		assert.Contains(t, err.Error(), path+": invalid scenario bad:\n  steps: Required value")
	})
}

const minimal = `
name: mine
cluster: {zones: 1, racks: 1, nodesPerRack: 2}
steps:
- name: one gang
  create:
    gangs: [{name: g, size: 2}]
- name: it binds
  wait: {for: bound, group: g}
  expect: [{group: g, bound: 2}]
`
