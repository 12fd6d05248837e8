package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/utils/ptr"

	"github.com/phalanx-sched/phalanx/pkg/devices"
	"github.com/phalanx-sched/phalanx/tools/bench/report"
	"github.com/phalanx-sched/phalanx/tools/bench/schedperf"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// This file holds the operations of upstream's dra workloads: objects of
// any kind from templates (createAny), claims allocated without pods
// (allocResourceClaims), pods kept in a steady state, and measured windows
// opened and closed by operations of their own.

// workloadExtraGates are the gates a workload asks for beyond the
// sandbox's own workload gates (which the sandbox sets itself, and which a
// Phalanx scheduler must run with off): for the dra workloads, DRA's
// alpha and beta gates, for the API server and both schedulers alike.
func workloadExtraGates(gates map[string]bool) map[string]bool {
	out := map[string]bool{}
	for k, v := range gates {
		if _, ours := sandbox.UpstreamWorkloadGates[k]; ours || k == "WorkloadWithJob" {
			continue
		}
		out[k] = v
	}
	return out
}

// workloadAPIs are the API versions a workload's objects may be written
// in beyond the defaults: upstream's runner serves every resource.k8s.io
// version under DRA (some of its templates are v1beta2).
func workloadAPIs(gates map[string]bool) []string {
	if !gates["DynamicResourceAllocation"] {
		return nil
	}
	return []string{"resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha3"}
}

// createAnyRetry bounds how long createAny retries an object the API
// server refuses, as upstream's runner does for kinds not served yet.
const createAnyRetry = 20 * time.Second

func (r *replay) createAny(ctx context.Context, s schedperf.Step) error {
	if r.mapper == nil {
		r.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(r.cl.Client.Discovery()))
		var err error
		if r.dynamic, err = dynamic.NewForConfig(r.cl.Config); err != nil {
			return err
		}
	}
	if s.Namespace != "" {
		if err := r.ensureNamespace(ctx, s.Namespace); err != nil {
			return err
		}
	}
	for _, obj := range s.Objects {
		gvk := obj.GroupVersionKind()
		mapping, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s: %w", gvk, err)
		}
		namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
		if namespaced != (s.Namespace != "") {
			return fmt.Errorf("%s %s: namespace %q for a resource of scope %s", gvk.Kind, obj.GetName(), s.Namespace, mapping.Scope.Name())
		}
		client := dynamic.ResourceInterface(r.dynamic.Resource(mapping.Resource))
		if namespaced {
			client = r.dynamic.Resource(mapping.Resource).Namespace(s.Namespace)
		}
		deadline := time.Now().Add(createAnyRetry)
		for {
			_, err = client.Create(ctx, obj.DeepCopy(), metav1.CreateOptions{FieldValidation: "Strict"})
			if err == nil || time.Now().After(deadline) || apierrors.IsAlreadyExists(err) || apierrors.IsInvalid(err) {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
		if err != nil {
			return fmt.Errorf("create %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
	return nil
}

// allocClaims allocates the unallocated claims of ns (every namespace when
// empty) as upstream's runner does, so that a workload starts on a partly
// used cluster: one claim after another, each on the first node, in a
// random order, on which the allocator (upstream's, through pkg/devices)
// fits it, written at once and counted for the next. Device taint rules
// are not applied (none of the workloads that allocate this way has one).
func (r *replay) allocClaims(ctx context.Context, ns string) error {
	claims, err := r.cl.Client.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list claims: %w", err)
	}
	all, err := r.cl.Client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list claims: %w", err)
	}
	nodeList, err := r.cl.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	sliceList, err := r.cl.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list slices: %w", err)
	}
	classList, err := r.cl.Client.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list device classes: %w", err)
	}
	state := &structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for i := range all.Items {
		if a := all.Items[i].Status.Allocation; a != nil {
			countAllocated(state, a)
		}
	}
	slices := make([]*resourceapi.ResourceSlice, len(sliceList.Items))
	for i := range sliceList.Items {
		slices[i] = &sliceList.Items[i]
	}
	view := devices.NewModel().View(ctx, devices.Source{
		Slices:    slices,
		Classes:   classLister(classList.Items),
		Allocated: state,
		Features:  dynamicresources.AllocatorFeatures(feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)),
	})
	nodes := make([]*corev1.Node, len(nodeList.Items))
	for i := range nodeList.Items {
		nodes[i] = &nodeList.Items[i]
	}
	// A fixed seed: runs of one workload start from the same cluster.
	rng := rand.New(rand.NewSource(1))
	allocated := 0
	for i := range claims.Items {
		claim := &claims.Items[i]
		if claim.Status.Allocation != nil {
			continue
		}
		var result *resourceapi.AllocationResult
		for _, k := range rng.Perm(len(nodes)) {
			results, err := view.Allocate(nodes[k], []*resourceapi.ResourceClaim{claim})
			if err != nil {
				return err
			}
			if len(results) == 1 {
				result = &results[0]
				break
			}
		}
		if result == nil {
			return fmt.Errorf("claim %s/%s fits on no node", claim.Namespace, claim.Name)
		}
		claim = claim.DeepCopy()
		claim.Status.Allocation = result
		if _, err := r.cl.Client.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("allocate claim %s/%s: %w", claim.Namespace, claim.Name, err)
		}
		countAllocated(state, result)
		allocated++
	}
	r.logf("allocated %d ResourceClaims without pods", allocated)
	return nil
}

// countAllocated adds an allocation's devices to state, as the scheduler
// counts them: whole devices, or shares of a device with consumable
// capacity and what they consume.
func countAllocated(state *structured.AllocatedState, a *resourceapi.AllocationResult) {
	for _, d := range a.Devices.Results {
		if d.AdminAccess != nil && *d.AdminAccess {
			continue
		}
		id := structured.MakeDeviceID(d.Driver, d.Pool, d.Device)
		if d.ShareID == nil {
			state.AllocatedDevices.Insert(id)
			continue
		}
		state.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, d.ShareID))
		if d.ConsumedCapacity != nil {
			state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, d.ConsumedCapacity))
		}
	}
}

// classLister serves DeviceClasses from a list.
type classLister []resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, len(l))
	for i := range l {
		out[i] = &l[i]
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	for i := range l {
		if l[i].Name == name {
			return &l[i], nil
		}
	}
	return nil, apierrors.NewNotFound(resourceapi.Resource("deviceclasses"), name)
}

// window is a measured stretch of a workload: pods of its namespaces
// scheduled from its start, sampled every second for upstream's
// SchedulingThroughput.
type window struct {
	start      time.Time
	namespaces []string
	base       int
	sampler    *report.ThroughputSampler
	done       chan struct{}
	finished   chan struct{}
}

// openWindow starts the workload's measured window (one per workload).
func (r *replay) openWindow(namespaces []string) error {
	if r.measured {
		return errors.New("a second measured operation: only one is supported per workload")
	}
	r.measured = true
	w := &window{start: time.Now(), namespaces: namespaces, sampler: &report.ThroughputSampler{Interval: time.Second},
		done: make(chan struct{}), finished: make(chan struct{})}
	w.base = r.scheduledEvents(namespaces)
	go func() {
		defer close(w.finished)
		tick := time.NewTicker(w.sampler.Interval)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case now := <-tick.C:
				w.sampler.Observe(now, r.scheduledEvents(namespaces)-w.base)
			}
		}
	}()
	r.window = w
	return nil
}

func (r *replay) scheduledEvents(namespaces []string) int {
	n := 0
	for _, ns := range namespaces {
		n += r.pods.scheduledEvents(ns)
	}
	return n
}

// closeWindow ends the measured window. With complete, its pods/s is the
// pods scheduled in it ÷ its length; measured, when not negative, replaces
// the workload's measured pod count (a steady state or a window of
// operations knows it only now).
func (r *replay) closeWindow(complete bool, measured int) {
	w := r.window
	if w == nil {
		return
	}
	r.window = nil
	close(w.done)
	<-w.finished
	r.res.DurationSeconds = time.Since(w.start).Seconds()
	r.res.Throughput = w.sampler.Summary()
	scheduled := r.scheduledEvents(w.namespaces) - w.base
	if measured >= 0 {
		r.res.MeasuredPods = measured
	}
	if complete && r.res.DurationSeconds > 0 {
		r.res.PodsPerSecond = float64(scheduled) / r.res.DurationSeconds
	}
}

// steady keeps s.Pods' count of pods pending in s.Namespace for
// s.Duration: each pod seen scheduled is deleted and another created, as
// upstream's runner does, so that the scheduler always has work on a
// cluster at the same utilisation. The pods are not judged at the end
// (the last ones are left pending by design).
func (r *replay) steady(ctx context.Context, s schedperf.Step) (int, error) {
	if err := parallel(min(podCreators, max(len(s.Pods), 1)), len(s.Pods), func(i int) error {
		if _, err := r.cl.Client.CoreV1().Pods(s.Namespace).Create(ctx, s.Pods[i].DeepCopy(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create pod %d in %s: %w", i, s.Namespace, err)
		}
		return nil
	}); err != nil {
		return 0, err
	}
	end := time.NewTimer(s.Duration)
	defer end.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	handled := map[string]bool{}
	next, scheduled := len(s.Pods), 0
	for {
		select {
		case <-ctx.Done():
			return scheduled, ctx.Err()
		case <-r.arm.exited():
			return scheduled, r.arm.exitError()
		case <-end.C:
			r.res.Stop = "all scheduled"
			return scheduled, nil
		case <-tick.C:
		}
		for _, name := range r.pods.scheduledPods(s.Namespace) {
			if handled[name] {
				continue
			}
			handled[name] = true
			scheduled++
			err := r.cl.Client.CoreV1().Pods(s.Namespace).Delete(ctx, name, metav1.DeleteOptions{
				GracePeriodSeconds: ptr.To(int64(0)), PropagationPolicy: ptr.To(metav1.DeletePropagationBackground),
			})
			if err != nil && !apierrors.IsNotFound(err) {
				return scheduled, fmt.Errorf("delete scheduled pod %s/%s: %w", s.Namespace, name, err)
			}
			p, err := s.NewPod(next)
			if err != nil {
				return scheduled, err
			}
			next++
			if _, err := r.cl.Client.CoreV1().Pods(s.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				return scheduled, fmt.Errorf("create pod %d in %s: %w", next-1, s.Namespace, err)
			}
		}
	}
}

// scheduledPods lists the names of ns's pods that are scheduled now.
func (t *podTracker) scheduledPods(ns string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, p := range t.pods {
		if p.Namespace == ns && p.Spec.NodeName != "" {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// checkPerfDevices adds the DRA part of the placement check over every
// namespace (pods' names are qualified by the check, their namespaces
// kept).
func checkPerfDevices(ctx context.Context, cl *sandbox.Cluster, pods []*corev1.Pod, v *report.Verdict) error {
	claims, err := cl.Client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list claims for the placement check: %w", err)
	}
	if len(claims.Items) == 0 {
		return nil
	}
	return checkListedDevices(ctx, cl.Client, claims.Items, pods, v)
}
