package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
	schedinformers "github.com/phalanx-sched/phalanx/pkg/generated/informers/externalversions/scheduling/v1alpha1"
	listers "github.com/phalanx-sched/phalanx/pkg/generated/listers/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/provisioning"
	"github.com/phalanx-sched/phalanx/pkg/provisioning/autoscalingv1"
)

// ProvisioningOptions turn on ProvisioningRequests for whole gangs
// (provisioning.go): a PodGroup annotated scheduling.phalanx.dev/provisioning:
// atomic (or made for a Workload or gang Job so annotated) whose members all name one of SchedulerNames gets one request of
// the autoscaler's atomic class while the scheduler finds no room for it.
type ProvisioningOptions struct {
	// Client reads and writes ProvisioningRequests (autoscaling.x-k8s.io/v1,
	// which the API server must serve).
	Client dynamic.Interface
	// SchedulerNames are the scheduler profiles whose gangs may ask; a
	// group with a member of another profile never does.
	SchedulerNames []string
	// After is how long a gang must have been short of capacity before it
	// asks; default 10s, so a gang the scheduler is still planning (or
	// one that other pods' departure is about to make room for) does not.
	After time.Duration
	// Backoff spaces attempts after a request failed or its capacity
	// lapsed; default provisioning.DefaultBackoff.
	Backoff provisioning.Backoff
}

const (
	defaultProvisioningAfter = 10 * time.Second
	requestsByGroupIndex     = "phalanx.dev/provisioning-for"
)

// provisioningController keeps, for every opted-in gang short of capacity,
// one ProvisioningRequest and its PodTemplates, owned by the PodGroup so
// that the garbage collector removes them with it; marks the gang's pending
// members as the request's consumers; and tells the group, in its
// CapacityRequested condition, what the autoscaler answered.
type provisioningController struct {
	loop
	kube       kubernetes.Interface
	phalanx    versioned.Interface
	requests   dynamic.NamespaceableResourceInterface
	podGroups  listers.PodGroupLister
	workloads  listers.WorkloadLister
	jobs       batchlisters.JobLister
	pods       cache.Indexer
	reqIndex   cache.Indexer
	factory    dynamicinformer.DynamicSharedInformerFactory
	reqSynced  cache.InformerSynced
	schedulers map[string]bool
	after      time.Duration
	backoff    provisioning.Backoff
	recorder   record.EventRecorder
	now        func() time.Time
}

func newProvisioningController(kube kubernetes.Interface, phalanx versioned.Interface, podGroups schedinformers.PodGroupInformer,
	workloads schedinformers.WorkloadInformer, jobs batchinformers.JobInformer,
	pods cache.SharedIndexInformer, recorder record.EventRecorder, opts ProvisioningOptions) (*provisioningController, error) {
	if opts.Client == nil {
		return nil, fmt.Errorf("provisioning: no client for %s", autoscalingv1.GroupVersionResource)
	}
	if len(opts.SchedulerNames) == 0 {
		return nil, fmt.Errorf("provisioning: no scheduler names: name the profiles whose gangs may ask")
	}
	if err := servesProvisioningRequests(kube); err != nil {
		return nil, err
	}
	if opts.After <= 0 {
		opts.After = defaultProvisioningAfter
	}
	if opts.Backoff.Initial <= 0 || opts.Backoff.Max <= 0 {
		opts.Backoff = provisioning.DefaultBackoff
	}
	c := &provisioningController{
		kube:       kube,
		phalanx:    phalanx,
		requests:   opts.Client.Resource(autoscalingv1.GroupVersionResource),
		podGroups:  podGroups.Lister(),
		workloads:  workloads.Lister(),
		jobs:       jobs.Lister(),
		pods:       pods.GetIndexer(),
		schedulers: map[string]bool{},
		after:      opts.After,
		backoff:    opts.Backoff,
		recorder:   recorder,
		now:        time.Now,
	}
	for _, s := range opts.SchedulerNames {
		c.schedulers[s] = true
	}
	c.loop = newLoop("provisioning", c.sync)

	// Only our own requests are watched: the label selects them.
	c.factory = dynamicinformer.NewFilteredDynamicSharedInformerFactory(opts.Client, 0, metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.LabelSelector = provisioning.ForLabel
	})
	reqs := c.factory.ForResource(autoscalingv1.GroupVersionResource).Informer()
	if err := reqs.AddIndexers(cache.Indexers{requestsByGroupIndex: func(obj interface{}) ([]string, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, nil
		}
		return []string{cache.ObjectName{Namespace: m.GetNamespace(), Name: m.GetLabels()[provisioning.ForLabel]}.String()}, nil
	}}); err != nil {
		return nil, fmt.Errorf("add ProvisioningRequest indexer: %w", err)
	}
	c.reqIndex = reqs.GetIndexer()
	c.reqSynced = reqs.HasSynced
	if _, err := reqs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.requestChanged,
		UpdateFunc: func(_, cur interface{}) { c.requestChanged(cur) },
		DeleteFunc: c.requestChanged,
	}); err != nil {
		return nil, fmt.Errorf("add ProvisioningRequest handler: %w", err)
	}
	if _, err := podGroups.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.groupChanged,
		UpdateFunc: func(_, cur interface{}) { c.groupChanged(cur) },
	}); err != nil {
		return nil, fmt.Errorf("add PodGroup handler: %w", err)
	}
	// The opt-in may sit on the Workload or the gang Job the group was
	// made for; annotating either later reconsiders the group.
	if _, err := workloads.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur interface{}) {
			o, n := old.(*v1alpha1.Workload), cur.(*v1alpha1.Workload)
			if o.Annotations[provisioning.GroupAnnotation] != n.Annotations[provisioning.GroupAnnotation] {
				c.workloadChanged(n.Namespace, n.Name)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("add Workload handler: %w", err)
	}
	if _, err := jobs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur interface{}) {
			o, n := old.(*batchv1.Job), cur.(*batchv1.Job)
			if o.Annotations[provisioning.GroupAnnotation] != n.Annotations[provisioning.GroupAnnotation] {
				c.enqueue(n.Namespace, JobPodGroupName(n.Name))
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("add Job handler: %w", err)
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { c.podChanged(podFromObj(obj)) },
		UpdateFunc: func(old, cur interface{}) {
			o, n := podFromObj(old), podFromObj(cur)
			// Binding, nomination and termination change what the gang
			// needs; the annotations this controller writes do not.
			if o == nil || n == nil || o.Spec.NodeName != n.Spec.NodeName || o.Status.NominatedNodeName != n.Status.NominatedNodeName ||
				(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) || podGroupOfPod(o) != podGroupOfPod(n) {
				c.podChanged(o)
				c.podChanged(n)
			}
		},
		DeleteFunc: func(obj interface{}) { c.podChanged(podFromObj(obj)) },
	}); err != nil {
		return nil, fmt.Errorf("add Pod handler: %w", err)
	}
	return c, nil
}

// servesProvisioningRequests fails when the API server does not serve
// the autoscaler's API: asking for requests nobody reads would be a
// silent no-op, and the informer would never sync.
func servesProvisioningRequests(kube kubernetes.Interface) error {
	gv := autoscalingv1.Group + "/" + autoscalingv1.Version
	list, err := kube.Discovery().ServerResourcesForGroupVersion(gv)
	if err != nil {
		return fmt.Errorf("provisioning: the API server does not serve %s (is the cluster autoscaler's ProvisioningRequest CRD installed?): %w", gv, err)
	}
	for _, r := range list.APIResources {
		if r.Name == autoscalingv1.Resource {
			return nil
		}
	}
	return fmt.Errorf("provisioning: %s has no %s", gv, autoscalingv1.Resource)
}

func (c *provisioningController) groupChanged(obj interface{}) {
	if pg, ok := obj.(*v1alpha1.PodGroup); ok && pg.Spec.SchedulingPolicy.Gang != nil {
		c.enqueue(pg.Namespace, pg.Name)
	}
}

// workloadChanged reconsiders the PodGroups made from the Workload.
func (c *provisioningController) workloadChanged(namespace, name string) {
	pgs, err := c.podGroups.PodGroups(namespace).List(labels.Everything())
	if err != nil {
		return
	}
	for _, pg := range pgs {
		if pg.Spec.WorkloadRef != nil && pg.Spec.WorkloadRef.WorkloadName == name {
			c.enqueue(pg.Namespace, pg.Name)
		}
	}
}

// mode is the group's provisioning mode: its own annotation, else its
// Workload's, else that Workload's gang Job's, the nearest one set wins.
// A gang Job's or a Workload's PodGroup is created by this controller, so
// its owner is where the user can say it before the group exists.
func (c *provisioningController) mode(pg *v1alpha1.PodGroup) string {
	if v, ok := pg.Annotations[provisioning.GroupAnnotation]; ok {
		return v
	}
	ref := pg.Spec.WorkloadRef
	if ref == nil {
		return ""
	}
	w, err := c.workloads.Workloads(pg.Namespace).Get(ref.WorkloadName)
	if err != nil || !metav1.IsControlledBy(pg, w) {
		return ""
	}
	if v, ok := w.Annotations[provisioning.GroupAnnotation]; ok {
		return v
	}
	owner := metav1.GetControllerOf(w)
	if owner == nil || owner.Kind != jobKind.Kind {
		return ""
	}
	job, err := c.jobs.Jobs(w.Namespace).Get(owner.Name)
	if err != nil || job.UID != owner.UID {
		return ""
	}
	return job.Annotations[provisioning.GroupAnnotation]
}

func (c *provisioningController) podChanged(pod *corev1.Pod) {
	if pod == nil || !c.schedulers[pod.Spec.SchedulerName] {
		return
	}
	if pg := podGroupOfPod(pod); pg != "" {
		c.enqueue(pod.Namespace, pg)
	}
}

func (c *provisioningController) requestChanged(obj interface{}) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if m, err := meta.Accessor(obj); err == nil {
		if g := m.GetLabels()[provisioning.ForLabel]; g != "" {
			c.enqueue(m.GetNamespace(), g)
		}
	}
}

func (c *provisioningController) start(ctx context.Context, workers int) error {
	c.factory.Start(ctx.Done())
	if !cache.WaitForNamedCacheSyncWithContext(ctx, c.reqSynced) {
		return fmt.Errorf("provisioning: ProvisioningRequest cache did not sync before the context ended")
	}
	c.loop.start(ctx, workers)
	go func() {
		<-ctx.Done()
		c.factory.Shutdown()
	}()
	return nil
}

// sync brings one group's request in line with its gang. Everything it
// decides is read from the API (the group's conditions, its members, its
// requests' conditions and attempt numbers), so a restarted controller
// picks up where the last one was.
func (c *provisioningController) sync(ctx context.Context, key cache.ObjectName) error {
	pg, err := c.podGroups.PodGroups(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		// The garbage collector removes what the group owned.
		return nil
	}
	if err != nil {
		return err
	}
	if pg.Spec.SchedulingPolicy.Gang == nil || c.mode(pg) != provisioning.ModeAtomic {
		return nil
	}
	gang, ours := c.gangOf(pg)
	if !ours {
		return nil
	}
	latest, err := c.latestRequest(pg)
	if err != nil {
		return err
	}
	logger := klog.FromContext(ctx).WithValues("podGroup", klog.KObj(pg))
	now := c.now()

	if latest == nil {
		ok, wait, why := provisioning.Short(gang, now, c.after)
		if !ok {
			if wait > 0 {
				c.queue.AddAfter(key, wait)
			}
			logger.V(5).Info("No ProvisioningRequest", "why", why)
			return nil
		}
		return c.request(ctx, pg, gang, 1)
	}

	phase, cond := provisioning.PhaseOf(latest.Status.Conditions)
	attempt := provisioning.Attempt(latest)
	switch phase {
	case provisioning.Waiting:
		if gang.Placed >= gang.MinCount {
			// The gang found room without the new nodes (other pods
			// left): the autoscaler need not add them.
			logger.V(2).Info("Gang placed before its ProvisioningRequest was provisioned; deleting it", "request", latest.Name)
			if err := c.deleteRequest(ctx, latest); err != nil {
				return err
			}
			return c.setCondition(ctx, pg, metav1.ConditionFalse, provisioning.ReasonNotNeeded,
				fmt.Sprintf("the gang was placed before ProvisioningRequest %s (attempt %d) was provisioned: the request was withdrawn", latest.Name, attempt))
		}
		if err := c.markConsumers(ctx, gang.Pending, latest.Name); err != nil {
			return err
		}
		msg := fmt.Sprintf("ProvisioningRequest %s (attempt %d) waits for the autoscaler", latest.Name, attempt)
		if cond != nil && cond.Message != "" {
			msg += ": " + cond.Reason + ": " + cond.Message
		}
		return c.setCondition(ctx, pg, metav1.ConditionTrue, provisioning.ReasonRequested, msg)
	case provisioning.Done:
		if err := c.markConsumers(ctx, gang.Pending, latest.Name); err != nil {
			return err
		}
		// The autoscaler's reason tells nodes added (CapacityIsProvisioned)
		// from room it found among the existing ones (CapacityIsFound).
		return c.setCondition(ctx, pg, metav1.ConditionTrue, provisioning.ReasonProvisioned,
			fmt.Sprintf("ProvisioningRequest %s (attempt %d) is provisioned: %s: %s", latest.Name, attempt, cond.Reason, cond.Message))
	}

	// Failed, or the capacity lapsed: try again after the backoff, if the
	// gang still needs it.
	retryAt := cond.LastTransitionTime.Add(c.backoff.After(attempt))
	reason, what := provisioning.ReasonFailed, "failed"
	if phase == provisioning.Lapsed {
		reason, what = provisioning.ReasonExpired, "lost its capacity"
	}
	msg := fmt.Sprintf("ProvisioningRequest %s (attempt %d) %s: %s: %s", latest.Name, attempt, what, cond.Reason, cond.Message)
	ok, wait, _ := provisioning.Short(gang, now, c.after)
	if ok || wait > 0 {
		msg += fmt.Sprintf("; attempt %d not before %s", attempt+1, retryAt.UTC().Format(time.RFC3339))
	}
	if err := c.setCondition(ctx, pg, metav1.ConditionFalse, reason, msg); err != nil {
		return err
	}
	if !ok {
		if wait > 0 {
			c.queue.AddAfter(key, wait)
		}
		return nil
	}
	if left := retryAt.Sub(now); left > 0 {
		c.queue.AddAfter(key, left)
		return nil
	}
	if err := c.request(ctx, pg, gang, attempt+1); err != nil {
		return err
	}
	return c.deleteRequest(ctx, latest)
}

// gangOf reads the group's members. ours is false when a member is
// scheduled by a profile that did not opt in: one member left to another
// scheduler's rules would make the request's count a guess.
func (c *provisioningController) gangOf(pg *v1alpha1.PodGroup) (g provisioning.Gang, ours bool) {
	objs, _ := c.pods.ByIndex(podsByPodGroupIndex, cache.ObjectName{Namespace: pg.Namespace, Name: pg.Name}.String())
	g = provisioning.Gang{
		Schedulable: meta.FindStatusCondition(pg.Status.Conditions, v1alpha1.PodGroupSchedulable),
		MinCount:    int(pg.Spec.SchedulingPolicy.Gang.MinCount),
	}
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if !ok || p.DeletionTimestamp != nil || podFinished(p) {
			continue
		}
		if !c.schedulers[p.Spec.SchedulerName] {
			return g, false
		}
		if p.Spec.NodeName != "" {
			g.Placed++
		} else {
			g.Pending = append(g.Pending, p)
		}
	}
	return g, len(objs) > 0
}

// latestRequest is the group's request of the highest attempt, among
// those it owns (a request of the same name owned by an earlier group of
// the same name is its garbage, not ours).
func (c *provisioningController) latestRequest(pg *v1alpha1.PodGroup) (*autoscalingv1.ProvisioningRequest, error) {
	objs, err := c.reqIndex.ByIndex(requestsByGroupIndex, cache.ObjectName{Namespace: pg.Namespace, Name: pg.Name}.String())
	if err != nil {
		return nil, err
	}
	var latest *autoscalingv1.ProvisioningRequest
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok || !ownedBy(u.GetOwnerReferences(), pg.UID) {
			continue
		}
		pr, err := autoscalingv1.FromUnstructured(u)
		if err != nil {
			return nil, err
		}
		if latest == nil || provisioning.Attempt(pr) > provisioning.Attempt(latest) {
			latest = pr
		}
	}
	return latest, nil
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	return slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return r.UID == uid })
}

func groupOwner(pg *v1alpha1.PodGroup) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: v1alpha1.SchemeGroupVersion.String(),
		Kind:       "PodGroup",
		Name:       pg.Name,
		UID:        pg.UID,
		Controller: ptrTo(true),
	}
}

func ptrTo[T any](v T) *T { return &v }

// request creates attempt's PodTemplates, then the request that names
// them (so the autoscaler never reads a request whose templates are
// missing), all owned by the group, and marks the pending members.
func (c *provisioningController) request(ctx context.Context, pg *v1alpha1.PodGroup, gang provisioning.Gang, attempt int) error {
	sets := provisioning.PodSets(gang.Pending)
	name := provisioning.RequestName(pg.Name, attempt)
	if len(sets) > provisioning.MaxPodSets {
		msg := fmt.Sprintf("not asking the autoscaler: the pending members have %d shapes and a ProvisioningRequest holds at most %d", len(sets), provisioning.MaxPodSets)
		c.recorder.Event(pg, corev1.EventTypeWarning, provisioning.ReasonFailed, msg)
		return c.setCondition(ctx, pg, metav1.ConditionFalse, provisioning.ReasonFailed, msg)
	}
	labels := map[string]string{provisioning.ForLabel: pg.Name}
	owner := []metav1.OwnerReference{groupOwner(pg)}
	pr := &autoscalingv1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: pg.Namespace, Labels: labels, OwnerReferences: owner,
			Annotations: map[string]string{provisioning.AttemptAnnotation: strconv.Itoa(attempt)},
		},
		Spec: autoscalingv1.ProvisioningRequestSpec{ProvisioningClassName: autoscalingv1.ClassBestEffortAtomicScaleUp},
	}
	total := int32(0)
	for i, s := range sets {
		tname := provisioning.TemplateName(name, i)
		t := &corev1.PodTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: tname, Namespace: pg.Namespace, Labels: labels, OwnerReferences: owner},
			Template:   s.Template,
		}
		if _, err := c.kube.CoreV1().PodTemplates(pg.Namespace).Create(ctx, t, metav1.CreateOptions{FieldManager: v1alpha1.ControllerName}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create PodTemplate %s: %w", tname, err)
		}
		pr.Spec.PodSets = append(pr.Spec.PodSets, autoscalingv1.PodSet{PodTemplateRef: autoscalingv1.Reference{Name: tname}, Count: s.Count})
		total += s.Count
	}
	u, err := autoscalingv1.ToUnstructured(pr)
	if err != nil {
		return err
	}
	if _, err := c.requests.Namespace(pg.Namespace).Create(ctx, u, metav1.CreateOptions{FieldManager: v1alpha1.ControllerName}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ProvisioningRequest %s: %w", name, err)
	}
	klog.FromContext(ctx).V(2).Info("Asked the autoscaler for a gang's nodes", "podGroup", klog.KObj(pg), "request", name, "attempt", attempt, "pods", total, "podSets", len(sets))
	c.recorder.Eventf(pg, corev1.EventTypeNormal, provisioning.ReasonRequested, "created ProvisioningRequest %s (attempt %d) for %d pending members in %d pod sets", name, attempt, total, len(sets))
	if err := c.markConsumers(ctx, gang.Pending, name); err != nil {
		return err
	}
	return c.setCondition(ctx, pg, metav1.ConditionTrue, provisioning.ReasonRequested,
		fmt.Sprintf("ProvisioningRequest %s (attempt %d) asks the autoscaler for room for %d pending members (%s)", name, attempt, total, describeSets(pr.Spec.PodSets)))
}

func describeSets(sets []autoscalingv1.PodSet) string {
	parts := make([]string, len(sets))
	for i, s := range sets {
		parts[i] = fmt.Sprintf("%d × %s", s.Count, s.PodTemplateRef.Name)
	}
	return strings.Join(parts, ", ")
}

// deleteRequest deletes a request and its PodTemplates (the group owns
// both, so without this they would stay until the group goes).
func (c *provisioningController) deleteRequest(ctx context.Context, pr *autoscalingv1.ProvisioningRequest) error {
	for _, s := range pr.Spec.PodSets {
		if err := c.kube.CoreV1().PodTemplates(pr.Namespace).Delete(ctx, s.PodTemplateRef.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	err := c.requests.Namespace(pr.Namespace).Delete(ctx, pr.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pr.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// markConsumers annotates the pending members as consumers of the
// request, in both the v1 and the older annotation names, so the
// autoscaler serves them through the request and not one by one.
func (c *provisioningController) markConsumers(ctx context.Context, pending []*corev1.Pod, request string) error {
	want := map[string]string{
		autoscalingv1.ConsumeAnnotation:       request,
		autoscalingv1.ClassAnnotation:         autoscalingv1.ClassBestEffortAtomicScaleUp,
		autoscalingv1.LegacyConsumeAnnotation: request,
		autoscalingv1.LegacyClassAnnotation:   autoscalingv1.ClassBestEffortAtomicScaleUp,
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": want}})
	if err != nil {
		return err
	}
	for _, p := range pending {
		marked := true
		for k, v := range want {
			if p.Annotations[k] != v {
				marked = false
			}
		}
		if marked {
			continue
		}
		_, err := c.kube.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: v1alpha1.ControllerName})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("mark pod %s as a consumer of %s: %w", p.Name, request, err)
		}
	}
	return nil
}

// setCondition writes the group's CapacityRequested condition. The
// scheduler writes the group's other conditions, so this is a
// read-modify-write of the status subresource that keeps them, retrying
// conflicts, never a patch of the whole list.
func (c *provisioningController) setCondition(ctx context.Context, cached *v1alpha1.PodGroup, status metav1.ConditionStatus, reason, msg string) error {
	if old := meta.FindStatusCondition(cached.Status.Conditions, provisioning.ConditionType); old != nil &&
		old.Status == status && old.Reason == reason && old.Message == msg {
		return nil
	}
	api := c.phalanx.SchedulingV1alpha1().PodGroups(cached.Namespace)
	current := cached
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if current == nil {
			fresh, err := api.Get(ctx, cached.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if fresh.UID != cached.UID {
				return nil
			}
			current = fresh
		}
		pg := current.DeepCopy()
		current = nil
		if !meta.SetStatusCondition(&pg.Status.Conditions, metav1.Condition{
			Type: provisioning.ConditionType, Status: status, Reason: reason, Message: msg, ObservedGeneration: pg.Generation,
		}) {
			return nil
		}
		_, err := api.UpdateStatus(ctx, pg, metav1.UpdateOptions{FieldManager: v1alpha1.ControllerName})
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
