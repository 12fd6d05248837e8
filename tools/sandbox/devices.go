package sandbox

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"
)

// DeviceDriver is the sandbox's DRA driver: the name it publishes
// ResourceSlices under, and the DeviceClass that selects its devices.
const (
	DeviceDriver = "gpu.phalanx.dev"
	DeviceClass  = "gpu.phalanx.dev"
)

// Devices describes the devices a simulated driver publishes on each node.
type Devices struct {
	// Driver names the driver and the DeviceClass that selects its
	// devices; default DeviceDriver.
	Driver string
	// PerNode is how many devices every node gets.
	PerNode int
	// Attributes are added to every device of a node, computed from the
	// node: e.g. an NVLink clique from its rack label.
	Attributes func(node *corev1.Node, device int) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
}

// PublishDevices runs upstream's ResourceSlice controller
// (k8s.io/dynamic-resource-allocation/resourceslice), as a DRA driver's
// kubelet plugin does, once for every node: each node's slice lists its
// devices and is owned by the node, so it goes when the node goes. It also
// creates the DeviceClass that selects the driver's devices. It returns
// once every node's slice exists; the controllers stop with ctx.
func PublishDevices(ctx context.Context, client kubernetes.Interface, nodes []*corev1.Node, d Devices) error {
	if d.Driver == "" {
		d.Driver = DeviceDriver
	}
	if err := EnsureDeviceClass(ctx, client, d.Driver); err != nil {
		return err
	}
	syncDelay := 100 * time.Millisecond
	// The harness's own watch ends with the publishing; the controllers
	// keep theirs.
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	seen, err := watchSlices(wctx, client, d.Driver)
	if err != nil {
		return err
	}
	// A controller starts with an informer sync of its own: started one
	// after another they took a second per node, and thousands started
	// at once (a 5,000-node bench) timed etcd out on a two-core machine.
	// So a few start at a time, each slot waiting for its node's slice.
	slots := make(chan struct{}, publishers)
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		go func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			if err := publishNode(ctx, client, n, d, &syncDelay); err != nil {
				errs <- err
				return
			}
			errs <- seen.wait(wctx, n.Name)
		}()
	}
	// Each slot waited for its node's slice: all of them exist now.
	for range nodes {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// publishers is how many node publishers start at once.
const publishers = 32

// sliceWatch tells when a node's ResourceSlice of one driver exists.
type sliceWatch struct {
	mu    sync.Mutex
	nodes map[string]chan struct{}
}

func watchSlices(ctx context.Context, client kubernetes.Interface, driver string) (*sliceWatch, error) {
	w := &sliceWatch{nodes: map[string]chan struct{}{}}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "spec.driver=" + driver
	}))
	inf := factory.Resource().V1().ResourceSlices().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		if s, ok := obj.(*resourceapi.ResourceSlice); ok && s.Spec.NodeName != nil {
			w.signal(*s.Spec.NodeName)
		}
	}}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	return w, nil
}

func (w *sliceWatch) ch(node string) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.nodes[node]
	if !ok {
		c = make(chan struct{})
		w.nodes[node] = c
	}
	return c
}

func (w *sliceWatch) signal(node string) {
	c := w.ch(node)
	w.mu.Lock()
	defer w.mu.Unlock()
	// A slice's re-list or a second slice of the node signals again.
	select {
	case <-c:
	default:
		close(c)
	}
}

// wait returns once node's slice exists, or fails after two minutes.
func (w *sliceWatch) wait(ctx context.Context, node string) error {
	select {
	case <-w.ch(node):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("the ResourceSlice of node %s did not appear within 2 minutes", node)
	}
}

func publishNode(ctx context.Context, client kubernetes.Interface, n *corev1.Node, d Devices, syncDelay *time.Duration) error {
	{
		var devs []resourceapi.Device
		for i := range d.PerNode {
			dev := resourceapi.Device{Name: fmt.Sprintf("dev-%d", i), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"index": {IntValue: ptr.To(int64(i))},
			}}
			if d.Attributes != nil {
				for k, v := range d.Attributes(n, i) {
					dev.Attributes[k] = v
				}
			}
			devs = append(devs, dev)
		}
		err := startSlices(ctx, resourceslice.Options{
			DriverName: d.Driver,
			KubeClient: client,
			Owner:      &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID},
			Resources:  &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{n.Name: {Slices: []resourceslice.Slice{{Devices: devs}}}}},
			SyncDelay:  syncDelay,
		})
		if err != nil {
			return fmt.Errorf("publish devices of node %s: %w", n.Name, err)
		}
	}
	return nil
}

// startSlices runs one upstream ResourceSlice controller until ctx ends.
func startSlices(ctx context.Context, opts resourceslice.Options) error {
	ctrl, err := resourceslice.StartController(ctx, opts)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		ctrl.Stop()
	}()
	return nil
}

// EnsureDeviceClass creates the DeviceClass, named as the driver, that
// selects a sandbox driver's devices.
func EnsureDeviceClass(ctx context.Context, client kubernetes.Interface, driver string) error {
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: driver},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)},
		}}},
	}
	_, err := client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func waitForSlices(ctx context.Context, client kubernetes.Interface, driver string, want int) error {
	// A minute for a handful of nodes; thousands of publishers, each
	// starting an informer of its own, take longer on a shared machine.
	deadline := time.Now().Add(time.Minute + time.Duration(want)*50*time.Millisecond)
	for {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + driver})
		if err == nil && len(list.Items) >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ResourceSlices of %s: want %d, have %d (%v)", driver, want, len(list.Items), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// PublishDomainDevices publishes, for every value of a node label, a pool
// of perDomain devices that every node carrying that value reaches: a
// network-attached device, such as the channels of an NVLink domain that
// NVIDIA's DRA driver offers as a ComputeDomain. One claim allocated from
// such a pool serves pods on every node of the domain. The DeviceClass
// named as the driver selects them.
func PublishDomainDevices(ctx context.Context, client kubernetes.Interface, driver, labelKey string, values []string, perDomain int) error {
	if err := EnsureDeviceClass(ctx, client, driver); err != nil {
		return err
	}
	pools := map[string]resourceslice.Pool{}
	for _, v := range values {
		var devs []resourceapi.Device
		for i := range perDomain {
			devs = append(devs, resourceapi.Device{Name: fmt.Sprintf("channel-%d", i)})
		}
		pools[v] = resourceslice.Pool{
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
				Key: labelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{v},
			}}}}},
			Slices: []resourceslice.Slice{{Devices: devs}},
		}
	}
	syncDelay := 100 * time.Millisecond
	err := startSlices(ctx, resourceslice.Options{
		DriverName: driver,
		KubeClient: client,
		Resources:  &resourceslice.DriverResources{Pools: pools},
		SyncDelay:  &syncDelay,
	})
	if err != nil {
		return fmt.Errorf("publish devices of %s: %w", driver, err)
	}
	return waitForSlices(ctx, client, driver, len(values))
}
