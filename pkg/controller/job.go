package controller

import (
	"context"
	"fmt"
	"maps"
	"sync"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	batchinformers "k8s.io/client-go/informers/batch/v1"
	"k8s.io/client-go/kubernetes"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/generated/clientset/versioned"
	schedinformers "github.com/phalanx-sched/phalanx/pkg/generated/informers/externalversions/scheduling/v1alpha1"
	listers "github.com/phalanx-sched/phalanx/pkg/generated/listers/scheduling/v1alpha1"
)

// Event reasons on Jobs.
const (
	EventInvalidGang      = "InvalidGang"
	EventWorkloadConflict = "WorkloadConflict"
	EventWorkloadCreated  = "WorkloadCreated"
	EventGangNotGated     = "GangNotGated"
	EventGatedWithoutGang = "GatedWithoutGang"
	EventMinCountChanged  = "MinCountChanged"
)

// jobController is the batch/v1 Job integration. Its job loop keeps a gang
// Job's Workload (and the minCount of its PodGroup) in line with the Job;
// its pod loop attaches the Job's pods to the PodGroup and releases them to
// the scheduler.
type jobController struct {
	jobLoop loop
	podLoop loop

	kube      kubernetes.Interface
	client    versioned.Interface
	jobs      batchlisters.JobLister
	workloads listers.WorkloadLister
	podGroups listers.PodGroupLister
	pods      cache.Indexer
	recorder  record.EventRecorder

	// warned remembers per Job which once-only warnings were given, so a
	// problem shared by a thousand pods is one Event, not a thousand.
	warnedMu sync.Mutex
	warned   map[types.UID]map[string]bool
}

func newJobController(kube kubernetes.Interface, client versioned.Interface, jobs batchinformers.JobInformer,
	workloads schedinformers.WorkloadInformer, podGroups schedinformers.PodGroupInformer,
	pods cache.SharedIndexInformer, recorder record.EventRecorder) (*jobController, error) {
	c := &jobController{
		kube:      kube,
		client:    client,
		jobs:      jobs.Lister(),
		workloads: workloads.Lister(),
		podGroups: podGroups.Lister(),
		pods:      pods.GetIndexer(),
		recorder:  recorder,
		warned:    map[types.UID]map[string]bool{},
	}
	c.jobLoop = newLoop("job", c.syncJob)
	c.podLoop = newLoop("job-pods", c.syncPod)

	if _, err := jobs.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { c.jobChanged(obj.(*batchv1.Job)) },
		UpdateFunc: func(old, cur interface{}) {
			o, n := old.(*batchv1.Job), cur.(*batchv1.Job)
			// The Job controller writes status all the time; only the spec
			// (parallelism), the annotations and the count of succeeded
			// pods (which shrinks the gang) matter here.
			if o.Generation != n.Generation || !maps.Equal(o.Annotations, n.Annotations) || o.Status.Succeeded != n.Status.Succeeded {
				c.jobChanged(n)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if job, ok := obj.(*batchv1.Job); ok {
				c.warnedMu.Lock()
				delete(c.warned, job.UID)
				c.warnedMu.Unlock()
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("add Job handler: %w", err)
	}

	workloadChanged := func(obj interface{}) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		w, ok := obj.(*v1alpha1.Workload)
		if !ok {
			return
		}
		if ref := w.Spec.ControllerRef; ref != nil && ref.Kind == jobKind.Kind && ref.APIGroup == jobKind.Group {
			c.jobLoop.enqueue(w.Namespace, ref.Name)
		}
	}
	if _, err := workloads.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: workloadChanged,
		UpdateFunc: func(old, cur interface{}) {
			if old.(*v1alpha1.Workload).Generation != cur.(*v1alpha1.Workload).Generation {
				workloadChanged(cur)
			}
		},
		DeleteFunc: workloadChanged,
	}); err != nil {
		return nil, fmt.Errorf("add Workload handler: %w", err)
	}

	// A Job's PodGroup appearing is what releases its pods; a PodGroup
	// whose minCount someone else changed gets it back in line. The Job's
	// Workload, hence its name, is known from spec.workloadRef.
	podGroupChanged := func(pg *v1alpha1.PodGroup, pods bool) {
		ref := pg.Spec.WorkloadRef
		if ref == nil || ref.TemplateName != v1alpha1.JobTemplateName {
			return
		}
		c.jobLoop.enqueue(pg.Namespace, ref.WorkloadName)
		if pods {
			c.enqueuePodsOfJob(pg.Namespace, ref.WorkloadName)
		}
	}
	if _, err := podGroups.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { podGroupChanged(obj.(*v1alpha1.PodGroup), true) },
		UpdateFunc: func(old, cur interface{}) {
			if old.(*v1alpha1.PodGroup).Generation != cur.(*v1alpha1.PodGroup).Generation {
				podGroupChanged(cur.(*v1alpha1.PodGroup), false)
			}
		},
	}); err != nil {
		return nil, fmt.Errorf("add PodGroup handler: %w", err)
	}

	podChanged := func(obj interface{}) {
		pod := podFromObj(obj)
		if pod == nil || !podNeedsRelease(pod) {
			return
		}
		// Most Jobs are not gangs: an unlabelled pod of such a Job needs
		// nothing, and is dropped here rather than costing a reconcile on
		// every one of its status updates. A gated one is reconciled, to
		// warn that nothing will remove its gate.
		if !hasGate(pod) {
			name, _ := jobOfPod(pod)
			if job, err := c.jobs.Jobs(pod.Namespace).Get(name); err == nil {
				if on, _ := gangRequested(job); !on {
					return
				}
			}
		}
		c.podLoop.enqueue(pod.Namespace, pod.Name)
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    podChanged,
		UpdateFunc: func(_, cur interface{}) { podChanged(cur) },
	}); err != nil {
		return nil, fmt.Errorf("add Pod handler: %w", err)
	}
	return c, nil
}

func (c *jobController) jobChanged(job *batchv1.Job) {
	c.jobLoop.enqueue(job.Namespace, job.Name)
	// A Job that just opted in may already have gated pods waiting.
	c.enqueuePodsOfJob(job.Namespace, job.Name)
}

func (c *jobController) enqueuePodsOfJob(namespace, job string) {
	objs, err := c.pods.ByIndex(podsByJobIndex, cache.ObjectName{Namespace: namespace, Name: job}.String())
	if err != nil {
		return
	}
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok && podNeedsRelease(pod) {
			c.podLoop.enqueue(pod.Namespace, pod.Name)
		}
	}
}

// podNeedsRelease is the cheap pre-check of the pod loop: a live pod of a
// Job that still has the gang gate or lacks the pod-group label.
func podNeedsRelease(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || podFinished(pod) {
		return false
	}
	if _, ok := jobOfPod(pod); !ok {
		return false
	}
	_, labelled := pod.Labels[v1alpha1.PodGroupLabel]
	return hasGate(pod) || !labelled
}

func podFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// warnOnce records a Warning on job the first time reason comes up for it.
func (c *jobController) warnOnce(job *batchv1.Job, reason, msg string) {
	c.warnedMu.Lock()
	seen := c.warned[job.UID]
	if seen == nil {
		seen = map[string]bool{}
		c.warned[job.UID] = seen
	}
	first := !seen[reason]
	seen[reason] = true
	c.warnedMu.Unlock()
	if first {
		c.recorder.Event(job, corev1.EventTypeWarning, reason, msg)
	}
}

// syncJob makes sure a gang Job has its Workload, that the Workload
// reflects the Job's annotations, and that the PodGroup's minCount follows
// the Job. It never rewrites what a group cannot change.
func (c *jobController) syncJob(ctx context.Context, key cache.ObjectName) error {
	job, err := c.jobs.Jobs(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if job.DeletionTimestamp != nil {
		return nil
	}
	on, ferr := gangRequested(job)
	if ferr != nil {
		c.recorder.Event(job, corev1.EventTypeWarning, EventInvalidGang,
			fmt.Sprintf("the Job is not scheduled as a gang: %v", ferr))
		return nil
	}
	if !on {
		return nil
	}

	existing, err := c.workloads.Workloads(job.Namespace).Get(job.Name)
	switch {
	case apierrors.IsNotFound(err):
		existing = nil
	case err != nil:
		return err
	case !metav1.IsControlledBy(existing, job):
		c.recorder.Event(job, corev1.EventTypeWarning, EventWorkloadConflict, fmt.Sprintf(
			"Workload %s already exists and is not controlled by this Job, so the Job's gang cannot be set up and its gated pods stay pending: delete or rename that Workload",
			existing.Name))
		return nil
	}

	g := readJobGang(job)
	if !g.ready() {
		return nil
	}
	desired, errs := desiredJobWorkload(ctx, job, g, existing)
	if len(errs) > 0 {
		return c.reportInvalid(ctx, job, existing, errs)
	}
	if existing == nil {
		return c.createWorkload(ctx, job, withJobMinCount(job, desired))
	}
	if _, err := setWorkloadCondition(ctx, c.client, existing, metav1.Condition{
		Type: ConditionJobConfigValid, Status: metav1.ConditionTrue, Reason: ReasonValid,
		Message: "the Job's gang annotations are valid",
	}); err != nil {
		return fmt.Errorf("set %s condition on Workload %s/%s: %w", ConditionJobConfigValid, existing.Namespace, existing.Name, err)
	}
	want, ok := gangMinCount(desired)
	if !ok {
		return nil
	}
	return c.syncMinCount(ctx, job, existing, jobPodsStillToRun(job, want))
}

// withJobMinCount returns a copy of w whose gang is sized by what the Job
// still has to run (a Job may become a gang after some of its pods
// succeeded).
func withJobMinCount(job *batchv1.Job, w *v1alpha1.Workload) *v1alpha1.Workload {
	w = w.DeepCopy()
	for i := range w.Spec.PodGroupTemplates {
		if t := &w.Spec.PodGroupTemplates[i]; t.Name == v1alpha1.JobTemplateName && t.SchedulingPolicy.Gang != nil {
			t.SchedulingPolicy.Gang.MinCount = jobPodsStillToRun(job, t.SchedulingPolicy.Gang.MinCount)
		}
	}
	return w
}

// reportInvalid tells the user what is wrong. With no Workload yet there is
// only the Job to tell; with one, its JobConfigValid condition says it too,
// and the Event is given only when the condition changes.
func (c *jobController) reportInvalid(ctx context.Context, job *batchv1.Job, existing *v1alpha1.Workload, errs field.ErrorList) error {
	msg := fmt.Sprintf("invalid gang settings: %s", errs.ToAggregate())
	if existing == nil {
		c.recorder.Event(job, corev1.EventTypeWarning, EventInvalidGang,
			msg+"; no Workload was created, so the Job's gated pods stay pending until this is fixed")
		return nil
	}
	changed, err := setWorkloadCondition(ctx, c.client, existing, metav1.Condition{
		Type: ConditionJobConfigValid, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonInvalid, Message: msg,
	})
	if err != nil {
		return fmt.Errorf("set %s condition on Workload %s/%s: %w", ConditionJobConfigValid, existing.Namespace, existing.Name, err)
	}
	if changed {
		c.recorder.Event(job, corev1.EventTypeWarning, EventInvalidGang, msg+"; the existing PodGroup keeps its settings")
	}
	return nil
}

func (c *jobController) createWorkload(ctx context.Context, job *batchv1.Job, w *v1alpha1.Workload) error {
	if _, err := c.client.SchedulingV1alpha1().Workloads(w.Namespace).Create(ctx, w, metav1.CreateOptions{FieldManager: v1alpha1.ControllerName}); err != nil {
		// AlreadyExists means our cache is behind: retry once it caught up.
		return fmt.Errorf("create Workload %s/%s for Job: %w", w.Namespace, w.Name, err)
	}
	pg := JobPodGroupName(job.Name)
	minCount, _ := gangMinCount(w)
	klog.FromContext(ctx).V(2).Info("Created Workload for gang Job", "job", klog.KObj(job), "podGroup", pg, "minCount", minCount)
	c.recorder.Event(job, corev1.EventTypeNormal, EventWorkloadCreated,
		fmt.Sprintf("created Workload %s; the Job's pods join PodGroup %s, a gang of %d", w.Name, pg, minCount))
	if !templateGated(job) && job.Spec.Template.Labels[v1alpha1.PodGroupLabel] != pg {
		c.recorder.Event(job, corev1.EventTypeWarning, EventGangNotGated, fmt.Sprintf(
			"the pod template has neither the scheduling gate %s nor the label %s=%s: phalanx-scheduler holds the pods until they are attached to the gang, but a pod left to any other scheduler can be scheduled on its own: add spec.template.spec.schedulingGates: [{name: %s}]",
			GangSchedulingGate, v1alpha1.PodGroupLabel, pg, GangSchedulingGate))
	}
	return nil
}

func templateGated(job *batchv1.Job) bool {
	for _, g := range job.Spec.Template.Spec.SchedulingGates {
		if g.Name == GangSchedulingGate {
			return true
		}
	}
	return false
}

// syncMinCount moves the gang size of the Workload's template and of the
// existing PodGroup to want. The PodGroup is patched directly because the
// Workload controller never rewrites existing groups; minCount is the one
// field of a PodGroup's spec that may change.
func (c *jobController) syncMinCount(ctx context.Context, job *batchv1.Job, w *v1alpha1.Workload, want int32) error {
	if have, ok := gangMinCount(w); ok && have != want {
		updated := w.DeepCopy()
		for i := range updated.Spec.PodGroupTemplates {
			if t := &updated.Spec.PodGroupTemplates[i]; t.Name == v1alpha1.JobTemplateName && t.SchedulingPolicy.Gang != nil {
				t.SchedulingPolicy.Gang.MinCount = want
			}
		}
		if _, err := c.client.SchedulingV1alpha1().Workloads(w.Namespace).Update(ctx, updated, metav1.UpdateOptions{FieldManager: v1alpha1.ControllerName}); err != nil {
			return fmt.Errorf("update minCount of Workload %s/%s to %d: %w", w.Namespace, w.Name, want, err)
		}
	}

	pg, err := c.podGroups.PodGroups(w.Namespace).Get(JobPodGroupName(job.Name))
	if apierrors.IsNotFound(err) {
		// Not created yet; it will be made from the updated template.
		return nil
	}
	if err != nil {
		return err
	}
	gang := pg.Spec.SchedulingPolicy.Gang
	if !metav1.IsControlledBy(pg, w) || gang == nil || gang.MinCount == want {
		return nil
	}
	patch := fmt.Appendf(nil, `{"spec":{"schedulingPolicy":{"gang":{"minCount":%d}}}}`, want)
	if _, err := c.client.SchedulingV1alpha1().PodGroups(pg.Namespace).Patch(ctx, pg.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: v1alpha1.ControllerName}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("patch minCount of PodGroup %s/%s to %d: %w", pg.Namespace, pg.Name, want, err)
	}
	c.recorder.Event(job, corev1.EventTypeNormal, EventMinCountChanged,
		fmt.Sprintf("PodGroup %s minCount changed from %d to %d", pg.Name, gang.MinCount, want))
	return nil
}
