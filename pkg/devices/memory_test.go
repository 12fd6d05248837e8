package devices_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/phalanx-sched/phalanx/pkg/devices"
)

// retainedPerDevice bounds what the device model keeps between plans per
// device of the cluster, beyond the ResourceSlices the informer holds
// anyway: which devices of a slice match a class. Copying slices or
// keeping a view's per-node tables in the model would exceed it many
// times over (one view's per-node tables kept alive add about 42 bytes a device).
const retainedPerDevice = 48

// The model a scheduler keeps for 1,000 nodes × 8 devices, after plans
// have read every node's room and the plans are gone, holds less than
// retainedPerDevice bytes per device.
func TestModelRetainsLittlePerDevice(t *testing.T) {
	const nodes, perNode = 1000, 8
	slices := make([]*resourceapi.ResourceSlice, nodes)
	var allocated []structured.DeviceID
	for i := range slices {
		slices[i] = nodeSlice(fmt.Sprintf("node-%04d", i), perNode)
		allocated = append(allocated, structured.MakeDeviceID("gpu.example.com", fmt.Sprintf("node-%04d", i), "gpu-0"))
	}
	cls := classes{"gpu": class("gpu", `device.driver == "gpu.example.com"`)}
	plan := func(model *devices.Model) {
		v := model.View(context.Background(), devices.Source{
			Slices:    slices,
			Classes:   cls,
			Allocated: &structured.AllocatedState{AllocatedDevices: sets.New(allocated...)},
		})
		for i := range nodes {
			if total, used := v.Room(fmt.Sprintf("node-%04d", i), "gpu"); total != perNode || used != 1 {
				t.Fatalf("node-%04d: room %d, %d used; want %d, 1", i, total, used, perNode)
			}
		}
	}
	// A first model pays the CEL environment's one-time cost, which is
	// not the devices'.
	plan(devices.NewModel())
	before := heapInUse()
	model := devices.NewModel()
	for range 3 {
		plan(model)
	}
	after := heapInUse()
	// The slices and allocated devices are the informers'; only the model is measured.
	runtime.KeepAlive(model)
	runtime.KeepAlive(slices)
	runtime.KeepAlive(allocated)
	t.Logf("heap before %d after %d", before, after)
	per := float64(int64(after)-int64(before)) / float64(nodes*perNode)
	t.Logf("model retains %.1f bytes per device", per)
	if per > retainedPerDevice {
		t.Errorf("the device model retains %.1f bytes per device after its plans, more than %d", per, retainedPerDevice)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
