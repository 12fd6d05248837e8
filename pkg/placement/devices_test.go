package placement_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// draRack is a rack of nodes with plenty of cpu whose devices of class
// gpu.example.com come through Options.Extra: free[i] of total on node i.
func draRack(rack string, total int64, free ...int64) ([]placement.Node, map[string]placement.ExtraRoom) {
	class := placement.DeviceResource("gpu.example.com")
	var nodes []placement.Node
	extra := map[string]placement.ExtraRoom{}
	for i, f := range free {
		n := mkNode(fmt.Sprintf("%s-n%d", rack, i), placement.Resources{cpu: 64000}, at("z", rack))
		nodes = append(nodes, n)
		extra[n.Name] = placement.ExtraRoom{
			Allocatable: placement.Resources{class: total},
			Requested:   placement.Resources{class: total - f},
		}
	}
	return nodes, extra
}

func deviceShape(count int64) placement.Shape {
	return placement.Shape{Requests: placement.Resources{cpu: 1000, placement.DeviceResource("gpu.example.com"): count}}
}

func TestDevicesCountLikeAnyResource(t *testing.T) {
	t.Run("a gang of one-device members gets one member per free device, several per node where several are free", func(t *testing.T) {
		nodes, extra := draRack("r1", 2, 2, 1, 0, 1)
		plan, err := placement.PlanGroup(nodes, withKey(gang("g", 4, 4, deviceShape(1)), rackKey), placement.Options{Extra: extra})
		require.NoError(t, err)
		perNode := map[string]int{}
		for _, n := range plan.Assignments {
			perNode[n]++
		}
		assert.Equal(t, map[string]int{"r1-n0": 2, "r1-n1": 1, "r1-n3": 1}, perNode)
	})

	t.Run("a gang the rack's devices cannot hold names the class and the shortfall", func(t *testing.T) {
		nodes, extra := draRack("r1", 1, 1, 1, 0)
		_, err := placement.PlanGroup(nodes, withKey(gang("g", 4, 4, deviceShape(1)), rackKey), placement.Options{Extra: extra})
		var inf *placement.Infeasible
		require.ErrorAs(t, err, &inf)
		assert.Equal(t, "r1", inf.BestDomain)
		assert.Equal(t, 2, inf.Fits)
		assert.Contains(t, inf.Reason, "short 2 devices of class gpu.example.com")
	})

	t.Run("nodes Extra does not list have no devices", func(t *testing.T) {
		nodes, extra := draRack("r1", 1, 1, 1)
		delete(extra, "r1-n1")
		_, err := placement.PlanGroup(nodes, gang("g", 2, 2, deviceShape(1)), placement.Options{Extra: extra})
		var inf *placement.Infeasible
		require.ErrorAs(t, err, &inf)
		assert.Contains(t, inf.Reason, "short 1 device of class gpu.example.com")
	})

	t.Run("preemption counts the devices its victims free", func(t *testing.T) {
		nodes, extra := draRack("r1", 1, 0, 0)
		victims := []placement.Victim{
			{Key: "low-0", Node: "r1-n0", Priority: 1, Requests: placement.Resources{cpu: 1000, placement.DeviceResource("gpu.example.com"): 1}},
			{Key: "other-class", Node: "r1-n1", Priority: 1, Requests: placement.Resources{cpu: 1000, placement.DeviceResource("nic.example.com"): 1}},
		}
		res, err := placement.FindVictims(nodes, victims, gang("g", 1, 1, deviceShape(1)), 100, placement.PreemptOptions{Options: placement.Options{Extra: extra}})
		require.NoError(t, err)
		assert.Equal(t, []string{"low-0"}, res.Victims)
	})
}
