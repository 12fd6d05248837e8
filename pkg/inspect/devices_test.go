package inspect

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/debugapi"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

func TestDeviceResourceNamesAgree(t *testing.T) {
	assert.Equal(t, corev1.ResourceName(debugapi.DeviceResourcePrefix+"gpu.example.com"), placement.DeviceResource("gpu.example.com"),
		"kubectl phalanx words the planner's device resources by this prefix")
}

func TestDeviceRoomPerDomain(t *testing.T) {
	gpu := placement.DeviceResource("gpu.example.com")
	var infos []fwk.NodeInfo
	for _, n := range []struct{ name, rack string }{{"a1", "r1"}, {"a2", "r1"}, {"b1", "r2"}, {"b2", "r2"}} {
		ni := framework.NewNodeInfo()
		ni.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name, Labels: map[string]string{"rack": n.rack}}})
		infos = append(infos, ni)
	}
	opts := placement.Options{
		Extra: map[string]placement.ExtraRoom{
			"a1": {Allocatable: placement.Resources{gpu: 2}, Requested: placement.Resources{gpu: 1}},
			"a2": {Allocatable: placement.Resources{gpu: 2}, Requested: placement.Resources{}},
			"b1": {Allocatable: placement.Resources{gpu: 2}, Requested: placement.Resources{gpu: 2}},
			// b2 has no devices of the class.
		},
		Domains: map[string]map[string]string{"device.phalanx.dev/gpu.example.com/clique": {"a1": "c1", "b1": "c1", "a2": "c2"}},
	}
	g := &placement.Group{Name: "g", TopologyKey: "rack", PreferredKeys: []string{"device.phalanx.dev/gpu.example.com/clique"}}
	assert.Equal(t, []debugapi.DomainDevices{
		{Key: "rack", Domain: "r1", Class: "gpu.example.com", Free: 3, Total: 4},
		{Key: "rack", Domain: "r2", Class: "gpu.example.com", Free: 0, Total: 2},
		{Key: "device.phalanx.dev/gpu.example.com/clique", Domain: "c1", Class: "gpu.example.com", Free: 1, Total: 4},
		{Key: "device.phalanx.dev/gpu.example.com/clique", Domain: "c2", Class: "gpu.example.com", Free: 2, Total: 2},
	}, deviceRoom(g, infos, opts))
	assert.Equal(t, []debugapi.DomainDevices{{Class: "gpu.example.com", Free: 3, Total: 6}},
		deviceRoom(&placement.Group{Name: "g"}, infos, opts), "no level: the whole cluster")
	assert.Nil(t, deviceRoom(g, infos, placement.Options{}), "a group that claims no counted devices shows none")
}
