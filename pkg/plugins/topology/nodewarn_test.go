package topology

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

func drain(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestUnusableNodesAreReportedOnceNotPerPlan(t *testing.T) {
	huge := int64(5) << 60
	overflowed := placement.Node{Name: "node-huge", MaxPods: 110, PodCount: 2,
		Allocatable: placement.Resources{corev1.ResourceMemory: 64 << 30},
		Requested:   placement.Resources{corev1.ResourceMemory: huge + huge}}
	healthy := placement.Node{Name: "node-ok", MaxPods: 110, Allocatable: placement.Resources{corev1.ResourceMemory: 64 << 30}}
	table, err := placement.NewNodeTable([]placement.Node{overflowed, healthy})
	require.NoError(t, err)
	nodeObj := func(name string) *corev1.Node { return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}} }

	clock := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	w := &nodeWarnings{now: func() time.Time { return clock }}
	recorder := events.NewFakeRecorder(100)

	w.report(recorder, table, nodeObj)
	first := drain(recorder)
	t.Run("the first plan warns on the node, naming the resource", func(t *testing.T) {
		require.Len(t, first, 1)
		assert.Contains(t, first[0], "Warning "+reasonNodeTotalsOverflow)
		assert.Contains(t, first[0], "requested memory is negative")
	})

	for range 50 {
		w.report(recorder, table, nodeObj)
	}
	t.Run("later plans do not warn again", func(t *testing.T) {
		assert.Empty(t, drain(recorder))
	})

	clock = clock.Add(unusableWarnInterval)
	w.report(recorder, table, nodeObj)
	t.Run("a node still broken after the interval is reported again", func(t *testing.T) {
		assert.Len(t, drain(recorder), 1)
	})

	fixed := overflowed
	fixed.Requested = placement.Resources{}
	require.NoError(t, table.Update(fixed))
	w.report(recorder, table, nodeObj)
	require.NoError(t, table.Update(overflowed))
	w.report(recorder, table, nodeObj)
	t.Run("a node that breaks again after being fixed is reported at once", func(t *testing.T) {
		assert.Len(t, drain(recorder), 1)
	})
}
