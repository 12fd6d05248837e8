package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"
	xversioned "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"
	xlisters "sigs.k8s.io/scheduler-plugins/pkg/generated/listers/scheduling/v1alpha1"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// xDiscoveryInterval is how often the controller asks the API server
// whether it serves scheduler-plugins' PodGroups: a CRD installed later is
// picked up within it, one removed is let go within it.
const xDiscoveryInterval = 30 * time.Second

// podsByXPodGroupIndex indexes pods by the scheduler-plugins PodGroup their
// scheduling.x-k8s.io/pod-group label names, in their namespace.
const podsByXPodGroupIndex = "phalanx.dev/x-pod-group"

func indexPodsByXPodGroup(obj interface{}) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if pg := pod.Labels[xv1alpha1.PodGroupLabel]; pg != "" {
		return []string{cache.ObjectName{Namespace: pod.Namespace, Name: pg}.String()}, nil
	}
	return nil, nil
}

// xStatusController keeps the status of scheduler-plugins'
// scheduling.x-k8s.io PodGroups as scheduler-plugins' own PodGroup
// controller does (phase, running, succeeded, failed, occupiedBy), so the
// operators and tools that read it (Kubeflow's, KubeRay, the Spark
// operator, kubectl's printer columns) see the same story when Phalanx
// replaces scheduler-plugins. It runs only while the API server serves
// the CRD, so phalanx-controller runs unchanged where it is absent.
type xStatusController struct {
	client  xversioned.Interface
	disc    discovery.DiscoveryInterface
	pods    cache.Indexer
	delay   time.Duration
	workers int
	every   time.Duration
	now     func() time.Time

	mu  sync.Mutex
	run *xRun
}

// xRun is the controller while the CRD is served: its informer, lister and
// work queue, stopped together when the CRD goes away.
type xRun struct {
	loop
	lister xlisters.PodGroupLister
	cancel context.CancelFunc
}

func newXStatusController(client xversioned.Interface, disc discovery.DiscoveryInterface, pods cache.SharedIndexInformer, delay time.Duration, workers int) (*xStatusController, error) {
	c := &xStatusController{client: client, disc: disc, pods: pods.GetIndexer(), delay: delay, workers: workers, every: xDiscoveryInterval, now: time.Now}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) { c.podChanged(podFromObj(obj)) },
		UpdateFunc: func(old, cur interface{}) {
			o, n := podFromObj(old), podFromObj(cur)
			if o == nil || n == nil || o.Status.Phase != n.Status.Phase || o.Labels[xv1alpha1.PodGroupLabel] != n.Labels[xv1alpha1.PodGroupLabel] {
				c.podChanged(o, n)
			}
		},
		DeleteFunc: func(obj interface{}) { c.podChanged(podFromObj(obj)) },
	}); err != nil {
		return nil, fmt.Errorf("add Pod handler: %w", err)
	}
	return c, nil
}

func (c *xStatusController) current() *xRun {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.run
}

// podChanged schedules a recount of the groups the pod left and joined.
func (c *xStatusController) podChanged(pods ...*corev1.Pod) {
	r := c.current()
	if r == nil {
		return
	}
	for _, pod := range pods {
		if pod == nil {
			continue
		}
		if pg := pod.Labels[xv1alpha1.PodGroupLabel]; pg != "" {
			r.queue.AddAfter(cache.ObjectName{Namespace: pod.Namespace, Name: pg}, c.delay)
		}
	}
}

// start follows discovery until ctx ends: the first look is made before it
// returns, so a cluster that serves the CRD has the controller running
// once the controllers report started.
func (c *xStatusController) start(ctx context.Context) {
	c.sync(ctx)
	go func() {
		t := time.NewTicker(c.every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				c.stop()
				return
			case <-t.C:
				c.sync(ctx)
			}
		}
	}()
}

func (c *xStatusController) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.run != nil {
		c.run.cancel()
		c.run = nil
	}
}

// served asks discovery whether scheduler-plugins' PodGroups are served;
// known is false when the API server did not answer.
func (c *xStatusController) served() (served, known bool) {
	list, err := c.disc.ServerResourcesForGroupVersion(xv1alpha1.SchemeGroupVersion.String())
	if err != nil {
		return false, apierrors.IsNotFound(err)
	}
	for _, r := range list.APIResources {
		if r.Name == "podgroups" {
			return true, true
		}
	}
	return false, true
}

func (c *xStatusController) sync(ctx context.Context) {
	served, known := c.served()
	if !known {
		return
	}
	running := c.current() != nil
	switch {
	case served && !running:
		if err := c.begin(ctx); err != nil {
			klog.FromContext(ctx).Info("scheduler-plugins PodGroup status: not started; trying again later", "err", err)
		}
	case !served && running:
		c.stop()
		klog.FromContext(ctx).Info("The API server stopped serving scheduling.x-k8s.io PodGroups; their status is no longer kept")
	}
}

// begin starts an informer, a lister and workers for the PodGroups.
func (c *xStatusController) begin(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(ctx)
	// Built by hand rather than from the module's generated factory, which
	// predates client-go's streaming list and cannot tell a reflector that
	// a client (a test's fake) lacks it.
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.client.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.client.SchedulingV1alpha1().PodGroups(metav1.NamespaceAll).Watch(ctx, o)
		},
	}, c.client), &xv1alpha1.PodGroup{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	r := &xRun{lister: xlisters.NewPodGroupLister(inf.GetIndexer()), cancel: cancel}
	r.loop = newLoop("x-podgroup-status", r.syncFor(c))
	enqueue := func(obj interface{}) {
		if key, err := cache.ObjectToName(obj); err == nil {
			r.queue.Add(key)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		// Every update: a spec change (minMember) moves the phase, and a
		// status written by someone else is put back.
		UpdateFunc: func(_, obj interface{}) { enqueue(obj) },
	}); err != nil {
		cancel()
		return err
	}
	go inf.RunWithContext(runCtx)
	syncCtx, stop := context.WithTimeout(runCtx, 2*time.Minute)
	defer stop()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		cancel()
		return fmt.Errorf("the scheduling.x-k8s.io PodGroup informer did not sync")
	}
	r.start(runCtx, c.workers)
	c.mu.Lock()
	c.run = r
	c.mu.Unlock()
	klog.FromContext(ctx).Info("Keeping the status of scheduling.x-k8s.io PodGroups")
	return nil
}

func (r *xRun) syncFor(c *xStatusController) func(context.Context, cache.ObjectName) error {
	return func(ctx context.Context, key cache.ObjectName) error {
		pg, err := r.lister.PodGroups(key.Namespace).Get(key.Name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		objs, err := c.pods.ByIndex(podsByXPodGroupIndex, key.String())
		if err != nil {
			return err
		}
		pods := make([]*corev1.Pod, 0, len(objs))
		for _, obj := range objs {
			pods = append(pods, obj.(*corev1.Pod))
		}
		want := XPodGroupStatus(pg, pods, c.now())
		if sameXStatus(want, pg.Status) {
			return nil
		}
		return c.write(ctx, pg, want)
	}
}

// XPodGroupStatus is the status scheduler-plugins' PodGroup controller
// (v0.34.7) converges to for pg and its pods (those of pg's namespace
// labelled scheduling.x-k8s.io/pod-group: <pg>), in any phase:
//
//   - a new group is Pending;
//   - Pending becomes Scheduling once at least minMember pods exist, and
//     occupiedBy names the owners of one of them (namespace/owner, sorted,
//     comma-separated), if it has owners;
//   - from then on running, succeeded and failed count the pods in those
//     phases, and the phase is Pending again while fewer than minMember
//     pods exist, else Scheduling while running + succeeded < minMember,
//     else Running; Failed once a pod failed and failed + running +
//     succeeded >= minMember; Finished once succeeded >= minMember;
//   - Finished and Failed are final.
//
// scheduler-plugins advances one step per reconcile and relies on its own
// status write to trigger the next; the fixed point of those steps is
// computed here at once. scheduleStartTime, declared but never set by
// scheduler-plugins, is set when the group first enters Scheduling (its
// members exist and the scheduler starts trying them).
func XPodGroupStatus(pg *xv1alpha1.PodGroup, pods []*corev1.Pod, now time.Time) xv1alpha1.PodGroupStatus {
	sorted := append([]*corev1.Pod(nil), pods...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	st := *pg.Status.DeepCopy()
	for range 8 {
		next := xStep(st, pg.Spec.MinMember, sorted, now)
		if sameXStatus(next, st) {
			break
		}
		st = next
	}
	return st
}

// xStep is one reconcile of scheduler-plugins' PodGroup controller.
func xStep(st xv1alpha1.PodGroupStatus, minMember int32, pods []*corev1.Pod, now time.Time) xv1alpha1.PodGroupStatus {
	switch st.Phase {
	case xv1alpha1.PodGroupFinished, xv1alpha1.PodGroupFailed:
	case "":
		st.Phase = xv1alpha1.PodGroupPending
	case xv1alpha1.PodGroupPending:
		if len(pods) >= int(minMember) {
			st.Phase = xv1alpha1.PodGroupScheduling
			if st.ScheduleStartTime.IsZero() {
				st.ScheduleStartTime = metav1.NewTime(now.Truncate(time.Second))
			}
			if len(pods) > 0 {
				if owners := occupiedBy(pods[0]); owners != "" {
					st.OccupiedBy = owners
				}
			}
		}
	default:
		st.Running, st.Succeeded, st.Failed = 0, 0, 0
		for _, p := range pods {
			switch p.Status.Phase {
			case corev1.PodRunning:
				st.Running++
			case corev1.PodSucceeded:
				st.Succeeded++
			case corev1.PodFailed:
				st.Failed++
			}
		}
		if len(pods) < int(minMember) {
			st.Phase = xv1alpha1.PodGroupPending
			break
		}
		if st.Succeeded+st.Running < minMember {
			st.Phase = xv1alpha1.PodGroupScheduling
		} else {
			st.Phase = xv1alpha1.PodGroupRunning
		}
		if st.Failed != 0 && st.Failed+st.Running+st.Succeeded >= minMember {
			st.Phase = xv1alpha1.PodGroupFailed
		}
		if st.Succeeded >= minMember {
			st.Phase = xv1alpha1.PodGroupFinished
		}
	}
	return st
}

// occupiedBy names the owners of pod as scheduler-plugins does: each as
// namespace/name, sorted, comma-separated; "" without owners.
func occupiedBy(pod *corev1.Pod) string {
	refs := make([]string, 0, len(pod.OwnerReferences))
	for _, ref := range pod.OwnerReferences {
		refs = append(refs, pod.Namespace+"/"+ref.Name)
	}
	sort.Strings(refs)
	return strings.Join(refs, ",")
}

func sameXStatus(a, b xv1alpha1.PodGroupStatus) bool {
	return a.Phase == b.Phase && a.OccupiedBy == b.OccupiedBy && a.Running == b.Running &&
		a.Succeeded == b.Succeeded && a.Failed == b.Failed && a.ScheduleStartTime.Equal(&b.ScheduleStartTime)
}

// write sets the status with a JSON merge patch of the status subresource
// that names every field it keeps (zeros included, so a counter can fall
// back to 0) and no resourceVersion.
func (c *xStatusController) write(ctx context.Context, pg *xv1alpha1.PodGroup, want xv1alpha1.PodGroupStatus) error {
	status := map[string]interface{}{
		"phase":     want.Phase,
		"running":   want.Running,
		"succeeded": want.Succeeded,
		"failed":    want.Failed,
	}
	if want.OccupiedBy != "" {
		status["occupiedBy"] = want.OccupiedBy
	}
	if !want.ScheduleStartTime.IsZero() {
		status["scheduleStartTime"] = want.ScheduleStartTime
	}
	data, err := json.Marshal(map[string]interface{}{"status": status})
	if err != nil {
		return err
	}
	_, err = c.client.SchedulingV1alpha1().PodGroups(pg.Namespace).Patch(ctx, pg.Name, types.MergePatchType, data,
		metav1.PatchOptions{FieldManager: v1alpha1.ControllerName}, "status")
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("write status of PodGroup.scheduling.x-k8s.io %s/%s: %w", pg.Namespace, pg.Name, err)
	}
	return nil
}
