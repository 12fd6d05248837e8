package report

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func draPod(name, node string) *corev1.Pod {
	p := pod(name, node, "100m")
	p.Namespace, p.UID = "ns", types.UID("uid-"+name)
	tmpl, claim := "gpu", name+"-gpu"
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
	p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: &claim}}
	return p
}

// claimFor is pod's claim, allocated devices of pool and reserved for the
// pod unless reserved is false.
func claimFor(p *corev1.Pod, pool string, reserved bool, devices ...string) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: *p.Status.ResourceClaimStatuses[0].ResourceClaimName}}
	if len(devices) == 0 {
		return c
	}
	alloc := &resourceapi.AllocationResult{}
	for _, d := range devices {
		alloc.Devices.Results = append(alloc.Devices.Results, resourceapi.DeviceRequestAllocationResult{Request: "gpus", Driver: "gpu.test", Pool: pool, Device: d})
	}
	c.Status.Allocation = alloc
	if reserved {
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: p.Name, UID: p.UID}}
	}
	return c
}

func nodeSlice(node string) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.test", Pool: resourceapi.ResourcePool{Name: node}, NodeName: &node}}
}

func TestCheckDevices(t *testing.T) {
	slices := []*resourceapi.ResourceSlice{nodeSlice("n1"), nodeSlice("n2")}
	a, b := draPod("a", "n1"), draPod("b", "n1")
	pending := draPod("pending", "")

	t.Run("claims allocated on the pods' node, reserved for them, no device twice", func(t *testing.T) {
		v := Verdict{}
		CheckDevices(&v, []*corev1.Pod{a, b, pending}, []*resourceapi.ResourceClaim{
			claimFor(a, "n1", true, "dev-0", "dev-1"), claimFor(b, "n1", true, "dev-2"), claimFor(pending, "", false),
		}, slices)
		assert.Zero(t, v.DeviceViolations, "%v", v.Problems)
		assert.True(t, v.OK())
	})
	t.Run("a device in two claims", func(t *testing.T) {
		v := Verdict{}
		CheckDevices(&v, []*corev1.Pod{a, b}, []*resourceapi.ResourceClaim{
			claimFor(a, "n1", true, "dev-0"), claimFor(b, "n1", true, "dev-0"),
		}, slices)
		assert.Equal(t, 1, v.DeviceViolations, "%v", v.Problems)
		assert.False(t, v.OK())
	})
	t.Run("a claim allocated on another node's devices", func(t *testing.T) {
		v := Verdict{}
		CheckDevices(&v, []*corev1.Pod{a}, []*resourceapi.ResourceClaim{claimFor(a, "n2", true, "dev-0")}, slices)
		assert.Equal(t, 1, v.DeviceViolations)
		assert.Contains(t, v.Problems[0], "of node n2")
	})
	t.Run("a bound pod whose claim is not allocated, not reserved, or never made", func(t *testing.T) {
		unmade := draPod("unmade", "n2")
		unmade.Status.ResourceClaimStatuses = nil
		v := Verdict{}
		CheckDevices(&v, []*corev1.Pod{a, b, unmade}, []*resourceapi.ResourceClaim{
			claimFor(a, "", false), claimFor(b, "n1", false, "dev-3"),
		}, slices)
		assert.Equal(t, 3, v.DeviceViolations, "%v", v.Problems)
	})
}

// An extended resource a DeviceClass serves is allocated as a claim on a
// node that does not advertise it, and is not counted against the node;
// on a node that advertises it, it is.
func TestCheckWithDeviceBackedResources(t *testing.T) {
	gpu := corev1.ResourceName("example.com/gpu")
	name := string(gpu)
	classes := []*resourceapi.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: "gpu"}, Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: &name}}}
	backed := DeviceBackedResources(classes)
	assert.True(t, backed[gpu])
	assert.True(t, backed["deviceclass.resource.kubernetes.io/gpu"], "the implicit name of every class")

	p := pod("p", "n1", "100m")
	p.Spec.Containers[0].Resources.Requests[gpu] = resource.MustParse("2")
	n1 := node("n1", "")
	assert.Equal(t, 1, Check(nil, []*corev1.Node{n1}, []*corev1.Pod{p}).OvercommittedNodes, "without classes, a request the node lacks overcommits it")
	assert.Zero(t, CheckWithDevices(nil, []*corev1.Node{n1}, []*corev1.Pod{p}, backed).OvercommittedNodes, "served by devices")
	n1.Status.Allocatable[gpu] = resource.MustParse("1")
	assert.Equal(t, 1, CheckWithDevices(nil, []*corev1.Node{n1}, []*corev1.Pod{p}, backed).OvercommittedNodes, "the node's own extended resource is counted")
}
