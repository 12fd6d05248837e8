package devices_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/pkg/devices"
)

type classes map[string]*resourceapi.DeviceClass

func (c classes) List() ([]*resourceapi.DeviceClass, error) {
	var out []*resourceapi.DeviceClass
	for _, v := range c {
		out = append(out, v)
	}
	return out, nil
}

func (c classes) Get(name string) (*resourceapi.DeviceClass, error) {
	if v, ok := c[name]; ok {
		return v, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Group: "resource.k8s.io", Resource: "deviceclasses"}, name)
}

func class(name, expr string) *resourceapi.DeviceClass {
	return &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}}
}

// nodeSlice publishes devices on node: gpus of driver gpu.example.com, each
// with a "nvlink" attribute naming its half of the node (0 or 1).
func nodeSlice(node string, gpus int) *resourceapi.ResourceSlice {
	s := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpus", UID: types.UID(node + "-gpus"), Generation: 1},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   "gpu.example.com",
			Pool:     resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
			NodeName: ptr.To(node),
		},
	}
	for i := range gpus {
		s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{
			Name:       fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"nvlink": {IntValue: ptr.To(int64(i * 2 / gpus))}},
		})
	}
	return s
}

func claim(name string, req resourceapi.ExactDeviceRequest, constraints ...resourceapi.DeviceConstraint) *resourceapi.ResourceClaim {
	// As the API server defaults them.
	req.AllocationMode = resourceapi.DeviceAllocationModeExactCount
	if req.Count == 0 {
		req.Count = 1
	}
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests:    []resourceapi.DeviceRequest{{Name: "gpus", Exactly: &req}},
			Constraints: constraints,
		}},
	}
}

func node(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
}

func view(slices []*resourceapi.ResourceSlice, allocated ...structured.DeviceID) *devices.View {
	cls := classes{
		"gpu": class("gpu", `device.driver == "gpu.example.com"`),
		"nic": class("nic", `device.driver == "nic.example.com"`),
	}
	return devices.NewModel().View(context.Background(), devices.Source{
		Slices:    slices,
		Classes:   cls,
		Allocated: &structured.AllocatedState{AllocatedDevices: sets.New(allocated...)},
		Features:  structured.Features{},
	})
}

func TestRoomCountsNodeLocalDevicesOfAClass(t *testing.T) {
	v := view([]*resourceapi.ResourceSlice{nodeSlice("n1", 8), nodeSlice("n2", 4)},
		structured.MakeDeviceID("gpu.example.com", "n1", "gpu-0"), structured.MakeDeviceID("gpu.example.com", "n1", "gpu-5"))
	total, used := v.Room("n1", "gpu")
	assert.Equal(t, [2]int64{8, 2}, [2]int64{total, used}, "n1: 8 GPUs, 2 allocated")
	total, used = v.Room("n2", "gpu")
	assert.Equal(t, [2]int64{4, 0}, [2]int64{total, used})
	total, _ = v.Room("n1", "nic")
	assert.Zero(t, total, "no device of another class matches")
	total, _ = v.Room("n1", "missing")
	assert.Zero(t, total, "a class that does not exist matches nothing")
	assert.True(t, v.Countable("gpu"))
	assert.True(t, v.Simple("n1"))
}

// Room scans a pool's few allocated devices and looks a large pool's up
// in the allocated set: both ways count the same.
func TestRoomCountsAllocatedDevicesOfSmallAndLargePools(t *testing.T) {
	for _, allocated := range []int{1, 8, 33, 40} {
		var ids []structured.DeviceID
		for i := range allocated {
			ids = append(ids, structured.MakeDeviceID("gpu.example.com", "n1", fmt.Sprintf("gpu-%d", i)))
		}
		// Devices of another node's pool with the same names are not n1's.
		ids = append(ids, structured.MakeDeviceID("gpu.example.com", "n2", "gpu-41"))
		total, used := view([]*resourceapi.ResourceSlice{nodeSlice("n1", 48), nodeSlice("n2", 48)}, ids...).Room("n1", "gpu")
		assert.Equal(t, [2]int64{48, int64(allocated)}, [2]int64{total, used}, "%d allocated", allocated)
	}
}

func TestFitsAllocatesMemberAfterMember(t *testing.T) {
	two := claim("two", resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: 2})
	sameLink := claim("pair", resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: 2},
		resourceapi.DeviceConstraint{Requests: []string{"gpus"}, MatchAttribute: ptr.To(resourceapi.FullyQualifiedName("gpu.example.com/nvlink"))})
	half := claim("half", resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: 1,
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.attributes["gpu.example.com"].nvlink == 0`}}}})
	for _, tc := range []struct {
		name      string
		claims    []*resourceapi.ResourceClaim
		allocated []structured.DeviceID
		max, want int
	}{
		{name: "members of two GPUs each: four on eight GPUs", claims: []*resourceapi.ResourceClaim{two}, max: 10, want: 4},
		{name: "the bound stops the count", claims: []*resourceapi.ResourceClaim{two}, max: 3, want: 3},
		{name: "allocated devices are taken", claims: []*resourceapi.ResourceClaim{two}, max: 10, want: 3,
			allocated: []structured.DeviceID{structured.MakeDeviceID("gpu.example.com", "n1", "gpu-0")}},
		{name: "a selector narrows the devices: half of them match", claims: []*resourceapi.ResourceClaim{half}, max: 10, want: 4},
		{name: "pairs on one NVLink half: one device taken in each half leaves one pair per half", claims: []*resourceapi.ResourceClaim{sameLink}, max: 10, want: 2,
			allocated: []structured.DeviceID{structured.MakeDeviceID("gpu.example.com", "n1", "gpu-0"), structured.MakeDeviceID("gpu.example.com", "n1", "gpu-4")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := view([]*resourceapi.ResourceSlice{nodeSlice("n1", 8)}, tc.allocated...)
			n, err := v.Fits("shape", node("n1"), tc.claims, tc.max)
			require.NoError(t, err)
			assert.Equal(t, tc.want, n)
			total, used := v.Room("n1", "gpu")
			assert.Equal(t, int64(8), total)
			assert.Equal(t, int64(len(tc.allocated)), used, "Fits leaves the allocated state as it found it")
		})
	}
}

func TestFitsIsKeptUntilTheNodesDevicesChange(t *testing.T) {
	m := devices.NewModel()
	cls := classes{"gpu": class("gpu", `device.driver == "gpu.example.com"`)}
	one := claim("one", resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: 1})
	src := func(allocated ...structured.DeviceID) devices.Source {
		return devices.Source{Slices: []*resourceapi.ResourceSlice{nodeSlice("n1", 2)}, Classes: cls,
			Allocated: &structured.AllocatedState{AllocatedDevices: sets.New(allocated...)}}
	}
	n, err := m.View(context.Background(), src()).Fits("shape", node("n1"), []*resourceapi.ResourceClaim{one}, 5)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	n, err = m.View(context.Background(), src(structured.MakeDeviceID("gpu.example.com", "n1", "gpu-1"))).Fits("shape", node("n1"), []*resourceapi.ResourceClaim{one}, 5)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "a device allocated since is counted, not the remembered answer")
}

func TestDemandSortsClaims(t *testing.T) {
	own := claim("own", resourceapi.ExactDeviceRequest{DeviceClassName: "gpu", Count: 2})
	shared := claim("channel", resourceapi.ExactDeviceRequest{DeviceClassName: "nic"})
	allocated := claim("done", resourceapi.ExactDeviceRequest{DeviceClassName: "gpu"})
	allocated.Status.Allocation = &resourceapi.AllocationResult{NodeSelector: &corev1.NodeSelector{}}
	selective := claim("sel", resourceapi.ExactDeviceRequest{DeviceClassName: "gpu",
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "true"}}}})

	d := devices.DemandOf([]*resourceapi.ResourceClaim{own, shared, allocated}, func(c *resourceapi.ResourceClaim) bool { return c.Name == "channel" })
	assert.Equal(t, map[string]int64{"gpu": 2}, d.Counts)
	assert.True(t, d.Exact, "plain counts decide")
	assert.Equal(t, []*resourceapi.ResourceClaim{own}, d.PerMember)
	assert.Equal(t, []*resourceapi.ResourceClaim{shared}, d.Shared)
	assert.Len(t, d.Pinned, 1)

	d = devices.DemandOf([]*resourceapi.ResourceClaim{selective}, func(*resourceapi.ResourceClaim) bool { return false })
	assert.False(t, d.Exact, "a request selector needs the allocator")

	other := own.DeepCopy()
	other.Name, other.UID = "own-2", "own-2"
	never := func(*resourceapi.ResourceClaim) bool { return false }
	assert.Equal(t, devices.DemandOf([]*resourceapi.ResourceClaim{own}, never).Key(), devices.DemandOf([]*resourceapi.ResourceClaim{other}, never).Key(),
		"members with claims of their own from one template share a shape")
}

func TestSharedPoolsAreNotCountedPerNode(t *testing.T) {
	pool := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "rack-gpus", UID: "rack-gpus", Generation: 1},
		Spec: resourceapi.ResourceSliceSpec{
			Driver: "gpu.example.com", Pool: resourceapi.ResourcePool{Name: "rack", ResourceSliceCount: 1},
			AllNodes: ptr.To(true),
			Devices:  []resourceapi.Device{{Name: "net-gpu"}},
		},
	}
	v := view([]*resourceapi.ResourceSlice{nodeSlice("n1", 2), pool})
	assert.False(t, v.Countable("gpu"), "a GPU any node may reach cannot be counted per node")
	assert.True(t, v.Countable("nic"))
	one := claim("one", resourceapi.ExactDeviceRequest{DeviceClassName: "gpu"})
	n, err := v.Fits("shape", node("n1"), []*resourceapi.ResourceClaim{one}, 5)
	require.NoError(t, err)
	assert.Equal(t, 3, n, "the allocator uses the node's two GPUs and the shared one")
}

func TestAttributeValuesOfANode(t *testing.T) {
	withClique := func(s *resourceapi.ResourceSlice, values ...string) *resourceapi.ResourceSlice {
		for i := range s.Spec.Devices {
			s.Spec.Devices[i].Attributes["gpu.example.com/clique"] = resourceapi.DeviceAttribute{StringValue: ptr.To(values[i%len(values)])}
		}
		return s
	}
	nic := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "n1-nic", UID: "n1-nic", Generation: 1},
		Spec: resourceapi.ResourceSliceSpec{Driver: "nic.example.com", Pool: resourceapi.ResourcePool{Name: "n1", ResourceSliceCount: 1}, NodeName: ptr.To("n1"),
			Devices: []resourceapi.Device{{Name: "nic-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"gpu.example.com/clique": {StringValue: ptr.To("other")}}}}},
	}
	channel := &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "channels", UID: "channels", Generation: 1},
		Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com", Pool: resourceapi.ResourcePool{Name: "c9", ResourceSliceCount: 1},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"n3"}}}}}},
			Devices: []resourceapi.Device{{Name: "channel-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"clique": {StringValue: ptr.To("c9")}}}}},
	}
	v := view([]*resourceapi.ResourceSlice{withClique(nodeSlice("n1", 4), "c1"), withClique(nodeSlice("n2", 4), "c1", "c2"), nodeSlice("n3", 2), nic, channel})
	assert.Equal(t, []string{"c1"}, v.AttributeValues(node("n1"), "gpu.example.com/clique", []string{"gpu"}), "the NIC is of another class")
	assert.ElementsMatch(t, []string{"c1", "other"}, v.AttributeValues(node("n1"), "gpu.example.com/clique", nil), "without classes every device counts")
	assert.ElementsMatch(t, []string{"c1", "c2"}, v.AttributeValues(node("n2"), "gpu.example.com/clique", []string{"gpu"}))
	assert.Equal(t, []string{"c9"}, v.AttributeValues(node("n3"), "gpu.example.com/clique", []string{"gpu"}),
		"a shared slice offers n3 a device whose attribute is published in the driver's own domain; n3's GPUs have none")
	assert.Empty(t, v.AttributeValues(node("n4"), "gpu.example.com/clique", []string{"gpu"}))
	assert.Equal(t, []string{"0", "1"}, v.AttributeValues(node("n3"), "gpu.example.com/nvlink", []string{"gpu"}), "integers as text")
}
