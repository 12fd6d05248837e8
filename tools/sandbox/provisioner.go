package sandbox

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/pkg/provisioning/autoscalingv1"
)

// StandInProvisioner configures the sandbox's stand-in for a cluster
// autoscaler's atomic provisioning class. It is not the autoscaler: it
// answers ProvisioningRequests of class
// best-effort-atomic-scale-up.autoscaling.x-k8s.io the way that class is
// documented to (all the nodes the request's pods need, or none), with
// nodes of one configured shape, and writes the conditions the autoscaler
// writes. Unlike the autoscaler, which keeps looking for capacity until
// the request's ValidUntilSeconds, it fails a request it cannot fulfil at
// once.
type StandInProvisioner struct {
	// CPU, Memory, Pods and GPUs are each added node's capacity; defaults
	// 32, 256Gi, 110 and 0.
	CPU, Memory string
	Pods, GPUs  int
	// Labels are set on every added node (for example a rack, so a gang
	// with a topology constraint can land on them).
	Labels map[string]string
	// MaxNodes is how many nodes it adds in all; a request that needs
	// more than are left fails (Failed=True) and adds none.
	MaxNodes int
	// Delay is how long it takes to "create" the nodes of a request.
	Delay time.Duration
}

// StandInNodeLabel ("true") marks the nodes the stand-in provisioner
// added; their names carry the request's namespace and name.
const StandInNodeLabel = "sandbox.phalanx.dev/stand-in-provisioned"

// installProvisioningCRD installs the copy of the autoscaler's
// ProvisioningRequest CRD and waits until discovery lists it, which is
// what phalanx-controller checks before it watches requests.
func installProvisioningCRD(ctx context.Context, cfg *restclient.Config, kube kubernetes.Interface) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(autoscalingv1.CRD, crd); err != nil {
		return fmt.Errorf("decode the ProvisioningRequest CRD: %w", err)
	}
	if err := installCRDObjects(ctx, cfg, []*apiextensionsv1.CustomResourceDefinition{crd}); err != nil {
		return err
	}
	gv := autoscalingv1.Group + "/" + autoscalingv1.Version
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := kube.Discovery().ServerResourcesForGroupVersion(gv)
		if err != nil {
			return false, nil
		}
		for _, r := range list.APIResources {
			if r.Name == autoscalingv1.Resource {
				return true, nil
			}
		}
		return false, nil
	})
}

// standIn is the running stand-in provisioner.
type standIn struct {
	cfg      StandInProvisioner
	kube     kubernetes.Interface
	requests dynamic.NamespaceableResourceInterface
	queue    workqueue.TypedRateLimitingInterface[cache.ObjectName]
	lister   cache.GenericLister

	mu    sync.Mutex
	added int
}

// startStandInProvisioner runs the stand-in until ctx ends.
func startStandInProvisioner(ctx context.Context, cfg *restclient.Config, kube kubernetes.Interface, opts StandInProvisioner) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	s := &standIn{
		cfg:      opts,
		kube:     kube,
		requests: dyn.Resource(autoscalingv1.GroupVersionResource),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "sandbox_stand_in_provisioner"}),
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := factory.ForResource(autoscalingv1.GroupVersionResource)
	s.lister = inf.Lister()
	add := func(obj interface{}) {
		if key, err := cache.ObjectToName(obj); err == nil {
			s.queue.Add(key)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, o interface{}) { add(o) }}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return fmt.Errorf("stand-in provisioner: cache did not sync")
	}
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
		factory.Shutdown()
	}()
	go func() {
		for {
			key, quit := s.queue.Get()
			if quit {
				return
			}
			if err := s.provision(ctx, key); err != nil && ctx.Err() == nil {
				klog.FromContext(ctx).V(2).Info("Stand-in provisioner retries", "request", key, "err", err)
				s.queue.AddRateLimited(key)
			} else {
				s.queue.Forget(key)
			}
			s.queue.Done(key)
		}
	}()
	return nil
}

// provision answers one request once: Accepted, then Provisioned=True
// after adding every node, or Provisioned=False and Failed=True adding
// none.
func (s *standIn) provision(ctx context.Context, key cache.ObjectName) error {
	obj, err := s.lister.ByNamespace(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	pr, err := autoscalingv1.FromUnstructured(obj.(*unstructured.Unstructured))
	if err != nil {
		return err
	}
	if pr.Spec.ProvisioningClassName != autoscalingv1.ClassBestEffortAtomicScaleUp ||
		meta.FindStatusCondition(pr.Status.Conditions, autoscalingv1.Provisioned) != nil ||
		meta.IsStatusConditionTrue(pr.Status.Conditions, autoscalingv1.Failed) {
		return nil
	}
	now := metav1.Now()
	cond := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&pr.Status.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: now, ObservedGeneration: pr.Generation,
		})
	}
	cond(autoscalingv1.Accepted, metav1.ConditionTrue, autoscalingv1.ReasonAccepted, "ProvisioningRequest is accepted by the stand-in provisioner")

	need, err := s.nodesFor(ctx, pr)
	if err != nil {
		return err
	}
	s.mu.Lock()
	left := s.cfg.MaxNodes - s.added
	fits := need <= left
	if fits {
		s.added += need
	}
	s.mu.Unlock()
	if !fits {
		msg := fmt.Sprintf("the request needs %d nodes and the stand-in provisioner may add %d more", need, max(left, 0))
		cond(autoscalingv1.Provisioned, metav1.ConditionFalse, autoscalingv1.ReasonCapacityIsNotFound, msg)
		cond(autoscalingv1.Failed, metav1.ConditionTrue, autoscalingv1.ReasonCapacityIsNotFound, msg)
		return s.writeStatus(ctx, pr)
	}
	if s.cfg.Delay > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.cfg.Delay):
		}
	}
	if err := CreateNodes(ctx, s.kube, s.nodes(pr, need)); err != nil {
		return err
	}
	cond(autoscalingv1.Provisioned, metav1.ConditionTrue, autoscalingv1.ReasonCapacityIsProvisioned, "Capacity is provisioned by the stand-in provisioner")
	return s.writeStatus(ctx, pr)
}

func (s *standIn) writeStatus(ctx context.Context, pr *autoscalingv1.ProvisioningRequest) error {
	u, err := autoscalingv1.ToUnstructured(pr)
	if err != nil {
		return err
	}
	_, err = s.requests.Namespace(pr.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: "stand-in-provisioner"})
	return err
}

func (s *standIn) capacity() corev1.ResourceList {
	c := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(orDefault(s.cfg.CPU, "32")),
		corev1.ResourceMemory: resource.MustParse(orDefault(s.cfg.Memory, "256Gi")),
		corev1.ResourcePods:   *resource.NewQuantity(int64(orDefaultInt(s.cfg.Pods, 110)), resource.DecimalSI),
	}
	if s.cfg.GPUs > 0 {
		c[GPUResource] = *resource.NewQuantity(int64(s.cfg.GPUs), resource.DecimalSI)
	}
	return c
}

// nodesFor packs each pod set on nodes of the configured shape, as many
// of its pods per node as every resource allows, and returns the nodes
// needed; a request one of whose pods fits on no such node needs more
// than any maximum.
func (s *standIn) nodesFor(ctx context.Context, pr *autoscalingv1.ProvisioningRequest) (int, error) {
	capacity := s.capacity()
	total := 0
	for _, ps := range pr.Spec.PodSets {
		t, err := s.kube.CoreV1().PodTemplates(pr.Namespace).Get(ctx, ps.PodTemplateRef.Name, metav1.GetOptions{})
		if err != nil {
			return 0, fmt.Errorf("read PodTemplate %s: %w", ps.PodTemplateRef.Name, err)
		}
		req := resourcehelper.PodRequests(&corev1.Pod{Spec: t.Template.Spec}, resourcehelper.PodResourcesOptions{})
		perNode := int64(capacity.Pods().Value())
		for name, q := range req {
			if q.IsZero() {
				continue
			}
			have, ok := capacity[name]
			if !ok {
				return math.MaxInt32, nil
			}
			perNode = min(perNode, have.MilliValue()/q.MilliValue())
		}
		if perNode <= 0 {
			return math.MaxInt32, nil
		}
		total += int((int64(ps.Count) + perNode - 1) / perNode)
	}
	return total, nil
}

func (s *standIn) nodes(pr *autoscalingv1.ProvisioningRequest, n int) []*corev1.Node {
	out := make([]*corev1.Node, n)
	for i := range out {
		name := fmt.Sprintf("stand-in-%s-%s-%d", pr.Namespace, pr.Name, i)
		labels := map[string]string{HostnameLabel: name, StandInNodeLabel: "true"}
		for k, v := range s.cfg.Labels {
			labels[k] = v
		}
		out[i] = NewNode(name, labels, s.capacity())
	}
	return out
}
