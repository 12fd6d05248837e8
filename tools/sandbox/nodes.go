package sandbox

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Node labels the simulated nodes carry.
const (
	ZoneLabel     = "topology.kubernetes.io/zone"
	BlockLabel    = "topology.phalanx.dev/block"
	RackLabel     = "topology.phalanx.dev/rack"
	HostnameLabel = "kubernetes.io/hostname"
	// GPUResource is the extended resource simulated nodes offer.
	GPUResource corev1.ResourceName = "nvidia.com/gpu"
)

// Topology describes a block of identical simulated nodes:
// Zones × RacksPerZone × NodesPerRack.
type Topology struct {
	Zones        int
	RacksPerZone int
	NodesPerRack int
	// RacksPerBlock groups each zone's racks, in order, into blocks of this
	// many, labelled BlockLabel (zone-<z>-block-<b>); 0 labels no blocks.
	RacksPerBlock int
	// Per-node capacity.
	CPU    string // e.g. "32"
	Memory string // e.g. "256Gi"
	Pods   int
	GPUs   int
	// Prefix names nodes <prefix>z<zone>-r<rack>-n<node>; default "node".
	Prefix string
	// Labels are added to every node.
	Labels map[string]string
}

// DefaultTopology is the `make run` cluster: 2 zones × 4 racks × 4 nodes,
// racks in blocks of 2, so that preferred topology levels (rack, then
// block) can be tried on it.
func DefaultTopology() Topology {
	return Topology{Zones: 2, RacksPerZone: 4, RacksPerBlock: 2, NodesPerRack: 4, CPU: "32", Memory: "256Gi", Pods: 110, GPUs: 8}
}

// Size is the number of nodes the topology describes.
func (t Topology) Size() int { return t.Zones * t.RacksPerZone * t.NodesPerRack }

// Nodes renders the topology as Ready, untainted Node objects.
func (t Topology) Nodes() []*corev1.Node {
	prefix := t.Prefix
	if prefix == "" {
		prefix = "node"
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(orDefault(t.CPU, "32")),
		corev1.ResourceMemory: resource.MustParse(orDefault(t.Memory, "256Gi")),
		corev1.ResourcePods:   *resource.NewQuantity(int64(orDefaultInt(t.Pods, 110)), resource.DecimalSI),
	}
	if t.GPUs > 0 {
		capacity[GPUResource] = *resource.NewQuantity(int64(t.GPUs), resource.DecimalSI)
	}
	var nodes []*corev1.Node
	for z := 0; z < t.Zones; z++ {
		for r := 0; r < t.RacksPerZone; r++ {
			for n := 0; n < t.NodesPerRack; n++ {
				name := fmt.Sprintf("%s-z%d-r%d-n%d", prefix, z, r, n)
				labels := map[string]string{
					ZoneLabel:     fmt.Sprintf("zone-%d", z),
					RackLabel:     fmt.Sprintf("zone-%d-rack-%d", z, r),
					HostnameLabel: name,
				}
				if t.RacksPerBlock > 0 {
					labels[BlockLabel] = fmt.Sprintf("zone-%d-block-%d", z, r/t.RacksPerBlock)
				}
				for k, v := range t.Labels {
					labels[k] = v
				}
				nodes = append(nodes, NewNode(name, labels, capacity))
			}
		}
	}
	return nodes
}

// NewNode builds a Ready node with the given labels and capacity.
func NewNode(name string, labels map[string]string, capacity corev1.ResourceList) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{
			Capacity:    capacity.DeepCopy(),
			Allocatable: capacity.DeepCopy(),
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{{
				Type:   corev1.NodeReady,
				Status: corev1.ConditionTrue,
				Reason: "SandboxNode",
			}},
		},
	}
}

// CreateNodes creates nodes (and their status) with a bounded worker pool.
func CreateNodes(ctx context.Context, client kubernetes.Interface, nodes []*corev1.Node) error {
	const workers = 32
	work := make(chan *corev1.Node)
	errs := make(chan error, len(nodes))
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range work {
				if err := createNode(ctx, client, n); err != nil {
					errs <- err
				}
			}
		}()
	}
	for _, n := range nodes {
		work <- n
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

func createNode(ctx context.Context, client kubernetes.Interface, n *corev1.Node) error {
	created, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create node %s: %w", n.Name, err)
	}
	// Status is dropped on create; a kubelet would report it.
	created.Status = n.Status
	if _, err := client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("set status of node %s: %w", n.Name, err)
	}
	return nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func orDefaultInt(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}
