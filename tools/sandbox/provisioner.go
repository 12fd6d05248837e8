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
	"k8s.io/apimachinery/pkg/types"
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
	// owed are the nodes promised to provisioned requests and not
	// registered yet, by request UID.
	owed map[types.UID]int
}

// startStandInProvisioner runs the stand-in until ctx ends.
func startStandInProvisioner(ctx context.Context, cfg *restclient.Config, kube kubernetes.Interface, opts StandInProvisioner) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	s := &standIn{
		cfg:      opts,
		owed:     map[types.UID]int{},
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

// provision answers one request as the atomic class does: Accepted; then
// the pods that fit the room existing nodes have left are taken out (the
// autoscaler simulates them there and scales up for the rest only); if
// none is left, Provisioned=True (CapacityIsFound); if the rest fits
// under the maximum, Provisioned=True (CapacityIsProvisioned), written, as
// the autoscaler writes it, once the scale-up is decided and before the
// nodes register, which they do Delay later; else Provisioned=False and
// Failed=True, and no node at all.
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
		meta.IsStatusConditionTrue(pr.Status.Conditions, autoscalingv1.Failed) {
		return nil
	}
	if meta.FindStatusCondition(pr.Status.Conditions, autoscalingv1.Provisioned) != nil {
		return s.addOwedNodes(ctx, pr)
	}
	now := metav1.Now()
	cond := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&pr.Status.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg, LastTransitionTime: now, ObservedGeneration: pr.Generation,
		})
	}
	cond(autoscalingv1.Accepted, metav1.ConditionTrue, autoscalingv1.ReasonAccepted, "ProvisioningRequest is accepted by the stand-in provisioner")

	sets, err := s.podSets(ctx, pr)
	if err != nil {
		return err
	}
	if err := s.takeExistingRoom(ctx, sets); err != nil {
		return err
	}
	need := nodesFor(sets, s.capacity())
	if need == 0 {
		cond(autoscalingv1.Provisioned, metav1.ConditionTrue, autoscalingv1.ReasonCapacityIsFound, "Capacity is found in the cluster")
		return s.writeStatus(ctx, pr)
	}
	s.mu.Lock()
	left := s.cfg.MaxNodes - s.added
	fits := need <= left
	if fits {
		s.added += need
		s.owed[pr.UID] = need
	}
	s.mu.Unlock()
	if !fits {
		msg := fmt.Sprintf("the request needs %d new nodes and the stand-in provisioner may add %d more", need, max(left, 0))
		cond(autoscalingv1.Provisioned, metav1.ConditionFalse, autoscalingv1.ReasonCapacityIsNotFound, msg)
		cond(autoscalingv1.Failed, metav1.ConditionTrue, autoscalingv1.ReasonCapacityIsNotFound, msg)
		return s.writeStatus(ctx, pr)
	}
	cond(autoscalingv1.Provisioned, metav1.ConditionTrue, autoscalingv1.ReasonCapacityIsProvisioned, "Capacity is provisioned by the stand-in provisioner")
	if err := s.writeStatus(ctx, pr); err != nil {
		s.mu.Lock()
		s.added -= need
		delete(s.owed, pr.UID)
		s.mu.Unlock()
		return err
	}
	return s.addOwedNodes(ctx, pr)
}

// addOwedNodes registers the nodes a provisioned request was promised and
// does not have yet.
func (s *standIn) addOwedNodes(ctx context.Context, pr *autoscalingv1.ProvisioningRequest) error {
	s.mu.Lock()
	n, owed := s.owed[pr.UID]
	s.mu.Unlock()
	if !owed {
		return nil
	}
	if s.cfg.Delay > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.cfg.Delay):
		}
	}
	var missing []*corev1.Node
	for _, node := range s.nodes(pr, n) {
		if _, err := s.kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			missing = append(missing, node)
		} else if err != nil {
			return err
		}
	}
	if err := CreateNodes(ctx, s.kube, missing); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.owed, pr.UID)
	s.mu.Unlock()
	return nil
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

// podSet is a pod set's per-pod requests and how many of its pods still
// need room.
type podSet struct {
	requests corev1.ResourceList
	left     int
}

func (s *standIn) podSets(ctx context.Context, pr *autoscalingv1.ProvisioningRequest) ([]*podSet, error) {
	var out []*podSet
	for _, ps := range pr.Spec.PodSets {
		t, err := s.kube.CoreV1().PodTemplates(pr.Namespace).Get(ctx, ps.PodTemplateRef.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read PodTemplate %s: %w", ps.PodTemplateRef.Name, err)
		}
		req := resourcehelper.PodRequests(&corev1.Pod{Spec: t.Template.Spec}, resourcehelper.PodResourcesOptions{})
		req[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
		out = append(out, &podSet{requests: req, left: int(ps.Count)})
	}
	return out, nil
}

// takeExistingRoom places pods of the sets, first fit, into what Ready
// nodes have left after the pods bound to them. It weighs resources only:
// the autoscaler runs the scheduler's filters in its simulation, which
// this stand-in does not.
func (s *standIn) takeExistingRoom(ctx context.Context, sets []*podSet) error {
	nodes, err := s.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	pods, err := s.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	used := map[string]corev1.ResourceList{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		u := used[p.Spec.NodeName]
		if u == nil {
			u = corev1.ResourceList{}
			used[p.Spec.NodeName] = u
		}
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		req[corev1.ResourcePods] = *resource.NewQuantity(1, resource.DecimalSI)
		for name, q := range req {
			sum := u[name]
			sum.Add(q)
			u[name] = sum
		}
	}
	for _, n := range nodes.Items {
		if !nodeReady(&n) || n.Spec.Unschedulable {
			continue
		}
		free := n.Status.Allocatable.DeepCopy()
		for name, q := range used[n.Name] {
			f := free[name]
			f.Sub(q)
			free[name] = f
		}
		for _, set := range sets {
			for set.left > 0 && fitsIn(set.requests, free) {
				for name, q := range set.requests {
					f := free[name]
					f.Sub(q)
					free[name] = f
				}
				set.left--
			}
		}
	}
	return nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func fitsIn(req, free corev1.ResourceList) bool {
	for name, q := range req {
		if q.IsZero() {
			continue
		}
		f, ok := free[name]
		if !ok || f.Cmp(q) < 0 {
			return false
		}
	}
	return true
}

// nodesFor packs the pods the sets still need room for onto new nodes of
// the configured shape, as many per node as every resource allows; a pod
// that fits on no such node makes the request need more than any maximum.
func nodesFor(sets []*podSet, capacity corev1.ResourceList) int {
	total := 0
	for _, set := range sets {
		if set.left == 0 {
			continue
		}
		perNode := int64(math.MaxInt64)
		for name, q := range set.requests {
			if q.IsZero() {
				continue
			}
			have, ok := capacity[name]
			if !ok {
				return math.MaxInt32
			}
			perNode = min(perNode, have.MilliValue()/q.MilliValue())
		}
		if perNode <= 0 {
			return math.MaxInt32
		}
		total += int((int64(set.left) + perNode - 1) / perNode)
	}
	return total
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
