package gang

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	"github.com/phalanx-sched/phalanx/pkg/controller"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

var jobsResource = batchv1.SchemeGroupVersion.WithResource("jobs")

// jobHolds keeps the pods of gang Jobs out of scheduling until
// phalanx-controller has attached them to their PodGroup. The scheduling
// gate in the Job's pod template does the same, but a user who forgets it
// would otherwise see the scheduler place the pods one by one as they
// appear, before the controller labels them: a partial gang. The gate
// cannot be added for them later (a Job's pod template is immutable, and a
// pod's gates can only be removed), so the scheduler is the one place that
// sees every such pod before it binds.
//
// Only Job metadata is watched: the annotation is all that matters, and a
// cluster's Jobs with their pod templates would cost far more memory.
type jobHolds struct {
	jobs  cache.GenericLister
	clock clock.WithDelayedExecution
	// activate moves a held pod back through PreEnqueue.
	activate func(*corev1.Pod)
}

func newJobHolds(ctx context.Context, cfg *restclient.Config, h fwk.Handle) (*jobHolds, error) {
	client, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("metadata client: %w", err)
	}
	factory := metadatainformer.NewSharedInformerFactory(client, 0)
	inf := factory.ForResource(jobsResource)
	// managedFields are most of a Job's metadata and never read here.
	if err := inf.Informer().SetTransform(func(obj interface{}) (interface{}, error) {
		if m, ok := obj.(metav1.Object); ok {
			m.SetManagedFields(nil)
		}
		return obj, nil
	}); err != nil {
		return nil, err
	}
	j := &jobHolds{jobs: inf.Lister(), clock: clock.RealClock{}, activate: func(pod *corev1.Pod) {
		h.Activate(klog.Background(), map[string]*corev1.Pod{pod.Namespace + "/" + pod.Name: pod})
	}}
	// A held pod is re-examined when its Job appears or its annotations
	// change (the controller labelling the pod re-examines it anyway).
	activate := func(obj interface{}) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			return
		}
		pods, err := h.SharedInformerFactory().Core().V1().Pods().Lister().Pods(m.GetNamespace()).
			List(labels.SelectorFromSet(labels.Set{batchv1.JobNameLabel: m.GetName()}))
		if err != nil || len(pods) == 0 {
			return
		}
		byName := make(map[string]*corev1.Pod, len(pods))
		for _, p := range pods {
			if p.Spec.NodeName == "" {
				byName[p.Namespace+"/"+p.Name] = p
			}
		}
		h.Activate(klog.Background(), byName)
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: activate,
		UpdateFunc: func(old, cur interface{}) {
			o, okO := old.(metav1.Object)
			n, okN := cur.(metav1.Object)
			if okO && okN && o.GetAnnotations()[controller.GangAnnotation] == n.GetAnnotations()[controller.GangAnnotation] {
				return
			}
			activate(cur)
		},
		DeleteFunc: activate,
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for gvr, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			return nil, fmt.Errorf("sync %v metadata informer: may the scheduler list and watch jobs.batch?", gvr)
		}
	}
	return j, nil
}

// reason says why pod must wait for phalanx-controller, "" when it need not.
func (j *jobHolds) reason(pod *corev1.Pod) string {
	owner := metav1.GetControllerOf(pod)
	if owner == nil || owner.Kind != "Job" {
		return ""
	}
	if gv, err := schema.ParseGroupVersion(owner.APIVersion); err != nil || gv.Group != batchv1.GroupName {
		return ""
	}
	if _, grouped, _ := groups.Attach(pod); grouped {
		return ""
	}
	obj, err := j.jobs.ByNamespace(pod.Namespace).Get(owner.Name)
	var job metav1.Object
	if err == nil {
		job, _ = obj.(metav1.Object)
	}
	if job == nil {
		// The Job's arrival activates its held pods, but it may arrive
		// between this lookup and the queue parking the pod, and that
		// activation would find nothing to move: look again shortly.
		j.clock.AfterFunc(time.Second, func() { j.activate(pod) })
	}
	return jobHoldReason(owner, job)
}

// jobHoldReason decides for an unattached pod controlled by owner; job is
// the Job as the scheduler last saw it, nil if it has not seen it. A Job
// not seen yet holds its pods too: its pods can reach the scheduler before
// the Job does, and guessing "not a gang" would let them bind alone.
func jobHoldReason(owner *metav1.OwnerReference, job metav1.Object) string {
	if job == nil {
		return fmt.Sprintf("waiting for the scheduler to see Job %s, to know whether it is a gang", owner.Name)
	}
	if job.GetUID() != owner.UID {
		// The pod of an earlier Job of that name; the garbage collector
		// removes it, and the current Job's gang is not its business.
		return ""
	}
	if job.GetAnnotations()[controller.GangAnnotation] != "true" {
		return ""
	}
	return fmt.Sprintf("waiting for %s to attach the pod to PodGroup %s of gang Job %s",
		controller.ControllerName, controller.JobPodGroupName(owner.Name), owner.Name)
}
