package gang

import (
	"context"
	"fmt"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/utils/clock"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/workloadbuilder"
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
//
// A pod whose Job the scheduler has not seen is looked at again a few
// times, with backoff (jobLookFirst, doubling, jobLooks times): the Job's
// arrival activates its held pods, but it may arrive between PreEnqueue's
// lookup and the queue parking the pod, and that activation would find
// nothing to move. After the last look the pod stays held, and only the
// Job's arrival (or the pod's deletion: the garbage collector deletes the
// pods of a Job that is gone) moves it; a Warning event says so. Looking
// until the pod is collected would cost a timer and a PreEnqueue per pod
// every second, for pods that may never run.
type jobHolds struct {
	jobs  cache.GenericLister
	clock clock.WithDelayedExecution
	// activate moves a held pod back through PreEnqueue; it runs on the
	// timer's goroutine, without the lock.
	activate func(*corev1.Pod)
	// warn records an event on pod (nil: none).
	warn func(pod *corev1.Pod, reason, msg string)

	mu sync.Mutex
	// unseen are the pods whose Job PreEnqueue did not find, by UID.
	unseen map[types.UID]*unseenJob
}

// unseenJob is the looks at one pod whose Job has not been seen.
type unseenJob struct {
	since  time.Time // when PreEnqueue first missed the Job
	looks  int       // looks done
	armed  bool      // a look is pending
	warned bool
}

const (
	// jobLookFirst is the delay of the first look; each next one doubles.
	jobLookFirst = time.Second
	// jobLooks is how many looks a pod gets: about four minutes in all.
	jobLooks = 8
)

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
	j := &jobHolds{jobs: inf.Lister(), clock: clock.RealClock{},
		activate: func(pod *corev1.Pod) {
			h.Activate(klog.Background(), map[string]*corev1.Pod{pod.Namespace + "/" + pod.Name: pod})
		},
		warn: func(pod *corev1.Pod, reason, msg string) {
			h.EventRecorder().Eventf(pod, nil, corev1.EventTypeWarning, reason, "Scheduling", msg)
		},
	}
	if _, err := h.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				j.forget(pod.UID)
			}
		},
	}); err != nil {
		return nil, err
	}
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
			if okO && okN && o.GetAnnotations()[v1alpha1.GangAnnotation] == n.GetAnnotations()[v1alpha1.GangAnnotation] {
				return
			}
			activate(cur)
		},
		DeleteFunc: activate,
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	// Not the metadata factory's own wait, which polls every 100ms: this
	// runs while the scheduler builds its profiles, before its own
	// informers start, so a poll's slack delays every start's first gang.
	syncCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if !cache.WaitFor(syncCtx, "", inf.Informer().HasSyncedChecker()) {
		return nil, fmt.Errorf("sync %v metadata informer: may the scheduler list and watch jobs.batch?", jobsResource)
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
	msg := jobHoldReason(owner, job)
	if job == nil {
		return msg + j.lookAgain(pod)
	}
	j.forget(pod.UID)
	return msg
}

// lookAgain arms the next look at pod, whose Job was not found, unless one
// is pending or the looks are over. It returns what to add to the pod's
// message once they are.
func (j *jobHolds) lookAgain(pod *corev1.Pod) string {
	j.mu.Lock()
	if j.unseen == nil {
		j.unseen = map[types.UID]*unseenJob{}
	}
	u := j.unseen[pod.UID]
	if u == nil {
		u = &unseenJob{since: j.clock.Now()}
		j.unseen[pod.UID] = u
	}
	if u.looks < jobLooks {
		if !u.armed {
			u.armed = true
			j.clock.AfterFunc(jobLookFirst<<u.looks, func() { j.looked(pod.UID, pod) })
		}
		j.mu.Unlock()
		return ""
	}
	warn := !u.warned
	u.warned = true
	suffix := fmt.Sprintf("; not seen after %d looks over %s, so the pod waits for the Job to appear (the garbage collector deletes the pods of a Job that is gone)",
		u.looks, j.clock.Since(u.since).Round(time.Second))
	j.mu.Unlock()
	if warn && j.warn != nil {
		j.warn(pod, "JobNotSeen", jobHoldReason(metav1.GetControllerOf(pod), nil)+suffix)
	}
	return suffix
}

// looked counts a look at the pod uid and activates it, unless it was
// forgotten meanwhile.
func (j *jobHolds) looked(uid types.UID, pod *corev1.Pod) {
	j.mu.Lock()
	u := j.unseen[uid]
	if u != nil {
		u.armed = false
		u.looks++
	}
	j.mu.Unlock()
	if u != nil {
		j.activate(pod)
	}
}

// forget drops what is remembered of the pod uid's looks: its Job was
// found, or it is gone.
func (j *jobHolds) forget(uid types.UID) {
	j.mu.Lock()
	delete(j.unseen, uid)
	j.mu.Unlock()
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
	if job.GetAnnotations()[v1alpha1.GangAnnotation] != "true" {
		return ""
	}
	return fmt.Sprintf("waiting for %s to attach the pod to PodGroup %s of gang Job %s",
		v1alpha1.ControllerName, workloadbuilder.GroupName(owner.Name, v1alpha1.JobTemplateName), owner.Name)
}
