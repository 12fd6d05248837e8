package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// A gang Job asks for preferred levels with an annotation; its PodGroup
// template gets them as schedulingConstraints.preferredTopology.
func TestJobPreferredTopologyAnnotation(t *testing.T) {
	job := gangJob("train", ptr.To[int32](4),
		TopologyKeyAnnotation, "topology.kubernetes.io/zone",
		PreferredTopologyAnnotation, "topology.phalanx.dev/rack, topology.phalanx.dev/block")
	f := newFixture(t, job)
	require.NoError(t, f.c.jobs.syncJob(context.Background(), key("train")))
	assert.Equal(t, &v1alpha1.PodGroupSchedulingConstraints{
		Topology:          []v1alpha1.TopologyConstraint{{Key: "topology.kubernetes.io/zone"}},
		PreferredTopology: []v1alpha1.TopologyConstraint{{Key: "topology.phalanx.dev/rack"}, {Key: "topology.phalanx.dev/block"}},
	}, f.workload("train").Spec.PodGroupTemplates[0].SchedulingConstraints)

	t.Run("without a topology key", func(t *testing.T) {
		job := gangJob("solo", ptr.To[int32](2), PreferredTopologyAnnotation, "topology.phalanx.dev/rack")
		f := newFixture(t, job)
		require.NoError(t, f.c.jobs.syncJob(context.Background(), key("solo")))
		assert.Equal(t, &v1alpha1.PodGroupSchedulingConstraints{
			PreferredTopology: []v1alpha1.TopologyConstraint{{Key: "topology.phalanx.dev/rack"}},
		}, f.workload("solo").Spec.PodGroupTemplates[0].SchedulingConstraints)
	})
}

func TestJobPreferredTopologyMistakesNameTheAnnotation(t *testing.T) {
	for name, tc := range map[string]struct {
		annotations []string
		want        string
	}{
		"an empty level": {[]string{PreferredTopologyAnnotation, "topology.phalanx.dev/rack,"},
			`metadata.annotations[scheduling.phalanx.dev/preferred-topology]: Required value`},
		"a level twice": {[]string{PreferredTopologyAnnotation, "topology.phalanx.dev/rack,topology.phalanx.dev/rack"},
			`metadata.annotations[scheduling.phalanx.dev/preferred-topology]: Duplicate value: "topology.phalanx.dev/rack"`},
		"the topology key itself": {[]string{TopologyKeyAnnotation, "topology.phalanx.dev/rack", PreferredTopologyAnnotation, "topology.phalanx.dev/rack"},
			`metadata.annotations[scheduling.phalanx.dev/preferred-topology]: Invalid value: "topology.phalanx.dev/rack": a preferred topology level cannot be the required key`},
	} {
		t.Run(name, func(t *testing.T) {
			job := gangJob("train", ptr.To[int32](4), tc.annotations...)
			f := newFixture(t, job)
			require.NoError(t, f.c.jobs.syncJob(context.Background(), key("train")))
			assert.Empty(t, writes(f.phalanx.Actions()))
			events := f.drainEvents()
			assert.True(t, hasEvent(events, "Warning", EventInvalidGang, tc.want), "events: %v", events)
		})
	}
}
