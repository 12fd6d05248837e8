package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/phalanx-sched/phalanx/tools/bench/report"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// GPUs gives a case's nodes GPUs and its measured pods a share of them,
// in one of two forms, so that a DRA case and its twin differ only in how
// the devices are described:
//
//   - DRA: every node's GPUs are devices of sandbox.DeviceDriver, published
//     as ResourceSlices by upstream's ResourceSlice controller, one per
//     node, as a driver's kubelet plugin does (sandbox.PublishDevices);
//     every pod claims PerPod of them through the ResourceClaimTemplate
//     gpuClaimTemplate, whose claims upstream's resourceclaim controller
//     creates (sandbox.Options.ClaimController);
//   - otherwise (the twin): nodes offer the extended resource
//     nvidia.com/gpu and pods request it.
type GPUs struct {
	PerNode, PerPod int
	DRA             bool
}

// gpuClaimTemplate names the ResourceClaimTemplate of a DRA case and the
// claim every measured pod makes from it.
const gpuClaimTemplate = "gpu"

// gpuClaimsReady bounds how long a precreated DRA case waits for the
// resourceclaim controller to make every pod's claim.
const gpuClaimsReady = 10 * time.Minute

func (c Case) dra() bool { return c.GPUs != nil && c.GPUs.DRA }

// extendedGPUs is how many nvidia.com/gpu a pod of the case requests (0
// for none).
func (c Case) extendedGPUs() int {
	if c.GPUs == nil || c.GPUs.DRA {
		return 0
	}
	return c.GPUs.PerPod
}

// addGPUs gives a measured pod its GPUs: a claim from the template, or the
// extended resource in requests and limits (an extended resource cannot
// be overcommitted, so the API server wants both and equal).
func (c Case) addGPUs(p *corev1.Pod) {
	switch {
	case c.GPUs == nil:
	case c.GPUs.DRA:
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: gpuClaimTemplate, ResourceClaimTemplateName: ptrTo(gpuClaimTemplate)}}
		p.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: gpuClaimTemplate}}
	default:
		n := *resource.NewQuantity(int64(c.GPUs.PerPod), resource.DecimalSI)
		p.Spec.Containers[0].Resources.Requests[sandbox.GPUResource] = n
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{sandbox.GPUResource: n}
	}
}

func ptrTo[T any](v T) *T { return &v }

// setUpDRA publishes every node's GPUs and creates the claim template in
// ns. The publishers run until the returned stop is called (before the
// cluster stops), as a driver keeps running beside its node.
func setUpDRA(ctx context.Context, cl *sandbox.Cluster, ns string, c Case) (stop func(), err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		if err != nil {
			cancel()
		}
	}()
	nodes, err := cl.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes to publish their devices: %w", err)
	}
	ptrs := make([]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		ptrs[i] = &nodes.Items[i]
	}
	if err := sandbox.PublishDevices(ctx, cl.Client, ptrs, sandbox.Devices{PerNode: c.GPUs.PerNode}); err != nil {
		return nil, err
	}
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: gpuClaimTemplate, Namespace: ns},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpus", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: sandbox.DeviceClass,
				AllocationMode:  resourceapi.DeviceAllocationModeExactCount,
				Count:           int64(c.GPUs.PerPod),
			}}},
		}}},
	}
	if _, err := cl.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create ResourceClaimTemplate: %w", err)
	}
	return cancel, nil
}

// waitForClaims waits until every pod of ns carries its claim's name in
// its status: the resourceclaim controller made the claim. A precreated
// DRA case waits for it before the scheduler starts, so that its window,
// like the twin's, starts with every object in place.
func waitForClaims(ctx context.Context, client kubernetes.Interface, ns string, want int) error {
	deadline := time.Now().Add(gpuClaimsReady)
	for {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		ready := 0
		if err == nil {
			for _, p := range pods.Items {
				if len(p.Status.ResourceClaimStatuses) == len(p.Spec.ResourceClaims) {
					ready++
				}
			}
			if ready >= want {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("claims of %d of %d pods made after %v (%v)", ready, want, gpuClaimsReady, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// claimAllocator is the bind ceiling's part of a DRA binding: before a pod
// is bound, its claim gets the delete-protection finalizer, then is
// allocated the devices the plan gives it and reserved for the pod in one
// status write: the two writes the DynamicResources plugin makes in
// PreBind. It finds each pod's claim through an
// informer (the claim's controller owner is its pod), since in a live run
// the claim is made after the pod.
type claimAllocator struct {
	client   kubernetes.Interface
	ns       string
	perPod   int
	informer cache.SharedIndexInformer
	stop     context.CancelFunc
	// slot is the index of a pod's first device on its node, from the plan.
	slot map[string]int
}

// byOwner indexes claims by the name of their controlling pod.
const byOwner = "owner"

func startClaimAllocator(ctx context.Context, client kubernetes.Interface, ns string, c Case, pods, nodes []string) (*claimAllocator, error) {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Resource().V1().ResourceClaims().Informer()
	if err := inf.AddIndexers(cache.Indexers{byOwner: func(obj any) ([]string, error) {
		claim, ok := obj.(*resourceapi.ResourceClaim)
		if !ok {
			return nil, nil
		}
		if ref := metav1.GetControllerOf(claim); ref != nil && ref.Kind == "Pod" {
			return []string{ref.Name}, nil
		}
		return nil, nil
	}}); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	a := &claimAllocator{client: client, ns: ns, perPod: c.GPUs.PerPod, informer: inf, stop: cancel, slot: map[string]int{}}
	used := map[string]int{}
	for i, p := range pods {
		a.slot[p] = used[nodes[i]] * c.GPUs.PerPod
		used[nodes[i]]++
	}
	for n, k := range used {
		if k*c.GPUs.PerPod > c.GPUs.PerNode {
			cancel()
			return nil, fmt.Errorf("the ceiling's plan puts %d pods of %d GPUs on node %s of %d GPUs", k, c.GPUs.PerPod, n, c.GPUs.PerNode)
		}
	}
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("ResourceClaim informer did not sync")
	}
	return a, nil
}

// allocate gives pod's claim its devices on node and reserves it for the
// pod, with no read of the API: the informer has the claim, and the
// claim's owner reference the pod's UID. It waits for the claim to exist
// (a live run's pods come before their claims).
func (a *claimAllocator) allocate(ctx context.Context, pod, node string) error {
	var claim *resourceapi.ResourceClaim
	for claim == nil {
		objs, _ := a.informer.GetIndexer().ByIndex(byOwner, pod)
		if len(objs) > 0 {
			claim = objs[0].(*resourceapi.ResourceClaim).DeepCopy()
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	owner := metav1.GetControllerOf(claim)
	// An allocated claim carries the delete-protection finalizer, so that
	// it is not deleted before its devices are freed; the finalizer is
	// metadata, the allocation status, so a binding needs both writes.
	if !slices.Contains(claim.Finalizers, resourceapi.Finalizer) {
		claim.Finalizers = append(claim.Finalizers, resourceapi.Finalizer)
		updated, err := a.client.ResourceV1().ResourceClaims(a.ns).Update(ctx, claim, metav1.UpdateOptions{})
		if err != nil {
			return err
		}
		claim = updated
	}
	var results []resourceapi.DeviceRequestAllocationResult
	for k := range a.perPod {
		results = append(results, resourceapi.DeviceRequestAllocationResult{
			Request: "gpus", Driver: sandbox.DeviceDriver, Pool: node, Device: fmt.Sprintf("dev-%d", a.slot[pod]+k),
		})
	}
	claim.Status.Allocation = &resourceapi.AllocationResult{
		Devices: resourceapi.DeviceAllocationResult{Results: results},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
			Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
		}}}}},
	}
	claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod, UID: owner.UID}}
	_, err := a.client.ResourceV1().ResourceClaims(a.ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
	return err
}

// checkDevices adds the DRA part of the placement check: every bound
// measured pod holds its claim, allocated on its node's devices, and no
// device is allocated twice.
func checkDevices(ctx context.Context, client kubernetes.Interface, ns string, pods []*corev1.Pod, v *report.Verdict) error {
	claims, err := client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list claims for the placement check: %w", err)
	}
	return checkListedDevices(ctx, client, claims.Items, pods, v)
}

// checkListedDevices is checkDevices over claims already listed: it reads
// the slices and judges the pods.
func checkListedDevices(ctx context.Context, client kubernetes.Interface, claims []resourceapi.ResourceClaim, pods []*corev1.Pod, v *report.Verdict) error {
	sl, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list slices for the placement check: %w", err)
	}
	cp := make([]*resourceapi.ResourceClaim, len(claims))
	for i := range claims {
		cp[i] = &claims[i]
	}
	sp := make([]*resourceapi.ResourceSlice, len(sl.Items))
	for i := range sl.Items {
		sp[i] = &sl.Items[i]
	}
	report.CheckDevices(v, pods, cp, sp)
	return nil
}
