// Package topology places a whole group at once. When the first member of
// a group without a valid plan reaches PreFilter, the plugin runs the pure
// planner (pkg/placement) over the scheduler's snapshot for every pending
// member of the hierarchy, top-down through its topology domains. Every
// member's PreFilter then narrows the nodes to its planned one, so the
// framework's Filter runs on one node instead of all of them, and the
// planned capacity is nominated so other pods do not take it.
//
// A gang that cannot be placed as a whole fails here, before any member
// reserves anything: that is what keeps two big gangs from each grabbing
// half a cluster. A plan whose node fails the real Filter is dropped and the
// group re-plans instead of binding part of itself.
package topology

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = pluginrt.TopologyName

// Topology implements the planning extension points.
type Topology struct {
	handle fwk.Handle
	groups *groupcache.Fed
	status *groupstatus.Writer
	args   pluginArgs
	opts   placement.Options
	// deviceEpoch moves with device changes (watchDevices).
	deviceEpoch atomic.Uint64
	// allocatedShared is set once this plugin allocated a shared claim
	// (shared.go): until then no claim needs freeing.
	allocatedShared atomic.Bool
	// orphans frees, once, what was allocated for groups deleted while
	// no Phalanx scheduler ran.
	orphans sync.Once
	// reservesForPodGroups says whether the profile runs
	// PhalanxDynamicResources, which reserves a scheduling.k8s.io
	// PodGroup's claims for the PodGroup (shared.go).
	reservesForPodGroups func() bool

	mu    sync.Mutex
	plans map[groups.Key]*plan
	nodes planinput.SnapshotNodes
	// rejected remembers, per hierarchy root, the planned nodes the
	// profile's Filter refused members on, so no plan repeats them.
	rejected map[groups.Key]map[string]map[string]rejection
	// ranks remembers, per root, the node of each ranked member by leaf
	// and rank (ranks.go).
	ranks map[groups.Key]map[string]string

	prober *probe.Prober
	// viewProber probes the diagnostics' framework (PlanInput).
	viewProber planinput.ViewProber
	antiTerms  *planinput.TermMemo
	// unknownFilters names the profile's filters Phalanx does not model.
	unknownFilters func() []string
	nsLister       corelisters.NamespaceLister
	// podLister is looked up once (ensureMember runs every PreFilter);
	// nil in tests that build the plugin by hand.
	podLister corelisters.PodLister

	// unusable warns about nodes the planner leaves out (nodewarn.go).
	unusable nodeWarnings

	// eventPod is the pod the queue's last pod-added hint was about.
	eventPod groups.EventPod
	// resv holds domains for gangs that waited too long; nil when off.
	resv *reserver
	// runCtx is the plugin's context, for the reservation sweep.
	runCtx context.Context
	// promises keeps the plans' nodes of members the queue had not filed
	// yet when they were nominated (pluginrt.Promises).
	promises *pluginrt.Promises
}

var (
	_ fwk.PreFilterPlugin   = &Topology{}
	_ fwk.FilterPlugin      = &Topology{}
	_ fwk.PostFilterPlugin  = &Topology{}
	_ fwk.ReservePlugin     = &Topology{}
	_ fwk.EnqueueExtensions = &Topology{}
)

// Factory returns the plugin's factory for the scheduler that rt serves.
func Factory(rt *pluginrt.Runtime) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return newTopology(ctx, obj, h, rt)
	}
}

func newTopology(ctx context.Context, obj runtime.Object, h fwk.Handle, rt *pluginrt.Runtime) (fwk.Plugin, error) {
	args, opts, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	inst, err := rt.Instance(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	fed, w := inst.Groups, inst.Status
	t := &Topology{
		handle: h, groups: fed, status: w, args: args, opts: opts,
		plans:          map[groups.Key]*plan{},
		rejected:       map[groups.Key]map[string]map[string]rejection{},
		ranks:          map[groups.Key]map[string]string{},
		prober:         planinput.NewProber(h),
		antiTerms:      &planinput.TermMemo{},
		unknownFilters: sync.OnceValue(func() []string { return planinput.UnknownFilters(h) }),
		nsLister:       h.SharedInformerFactory().Core().V1().Namespaces().Lister(),
		podLister:      h.SharedInformerFactory().Core().V1().Pods().Lister(),
	}
	t.runCtx = ctx
	t.promises = pluginrt.PromisesOf(inst)
	t.reservesForPodGroups = func() bool {
		_, ok := rt.Plugin(h, pluginrt.DynamicResourcesName)
		return ok
	}
	if args.Reservation != nil {
		t.resv = newReserver(t, *args.Reservation, h.SharedInformerFactory().Core().V1().Nodes().Lister(),
			func() pluginrt.Protections { return rt.Protections(h) })
		fed.SubscribeGone(t.resv.forget)
	}
	fed.Subscribe(t.groupChanged)
	fed.SubscribeGone(t.forgetGroup)
	t.watchDevices(h)
	rt.Register(ctx, h, t)
	return t, nil
}

// groupChanged drops the plan of a hierarchy whose group objects changed
// (minCount, parent links): the plan was made for the old definition.
func (t *Topology) groupChanged(k groups.Key, object bool) {
	if !object {
		return
	}
	root, ok := t.groups.RootOf(k)
	if !ok {
		root = k
	}
	t.drop(root)
	if root != k {
		t.drop(k)
	}
}

// Name returns the plugin name.
func (*Topology) Name() string { return Name }

// rootOf returns the root of the pod's hierarchy as the cache has it now,
// from the leaf the cycle's View parsed.
func (t *Topology) rootOf(state fwk.CycleState, pod *corev1.Pod) (groups.Key, bool) {
	v := t.groups.ViewFor(state, pod)
	if !v.Grouped {
		return groups.Key{}, false
	}
	return t.groups.RootOf(v.Leaf())
}

// PreFilter narrows a member to its planned node, planning the group first
// when needed.
func (t *Topology) PreFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if probe.Is(state) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if t.resv != nil {
		t.resv.run(t.runCtx)
	}
	t.orphans.Do(func() { go t.releaseOrphans(t.runCtx) })
	v := t.groups.ViewFor(state, pod)
	if !v.Resolved() {
		if t.resv != nil && t.resv.book.HeldNodes() > 0 {
			// Filter must run for plain pods: held nodes.
			return nil, nil
		}
		return nil, fwk.NewStatus(fwk.Skip)
	}
	root := v.Root()
	t.ensureMember(pod)
	key := planinput.PodKey(pod)
	p := t.usablePlan(root, key)
	if p == nil {
		var st *fwk.Status
		if p, st = t.replan(ctx, root); st != nil {
			return nil, st
		}
		if usesAny(pod, p.allocated) {
			// The profile's DynamicResources PreFilter may have read the
			// claim unallocated earlier in this cycle; its next cycle reads
			// the allocation the plan just wrote.
			t.handle.Activate(klog.FromContext(ctx), map[string]*corev1.Pod{pod.Namespace + "/" + pod.Name: pod})
			state.Write(retryKey, retryMarker{})
			return nil, fwk.NewStatus(fwk.Unschedulable, "allocated the ResourceClaims the group's members share; trying again with them")
		}
	}
	if p.infeasible != nil {
		writeDomains(state, p.pinned, nil)
		return nil, fwk.NewStatus(fwk.Unschedulable, p.infeasible.Reason)
	}
	writeDomains(state, p.domains, p.levels)
	node, ok := p.assignments[key]
	if !ok {
		pluginrt.MarkSurplus(state)
		msg := fmt.Sprintf("no room for member %s in its group's domain: %d members placed by the plan", pod.Name, len(p.assignments))
		leaf := v.Leaf()
		if info, ok := t.groups.Get(leaf); ok && info.Bound == 0 {
			t.status.Set(leaf, groupstatus.Condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonUnschedulable, msg))
		}
		return nil, fwk.NewStatus(fwk.Unschedulable, msg)
	}
	return &fwk.PreFilterResult{NodeNames: sets.New(node)}, nil
}

// Filter keeps a member inside its group's domains, as PreFilter found them
// (see domainStateKey), else as the stored plan has them: defence in depth
// for members scheduled while their plan changed, and the guard that keeps
// pod-level preemption inside the group's domain.
func (t *Topology) Filter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	if probe.Is(state) {
		return nil
	}
	v := t.groups.ViewFor(state, pod)
	if t.resv != nil {
		var root groups.Key
		if v.Resolved() {
			root = v.Root()
		}
		if st := t.resv.filter(pod, root, v.Resolved(), ni.Node().Name); st != nil {
			return st
		}
	}
	if !v.Resolved() {
		return nil
	}
	ch := v.Chain
	domains, levels := readDomains(state)
	if domains == nil {
		t.mu.Lock()
		p := t.plans[ch.Root().Key]
		t.mu.Unlock()
		if p == nil || p.infeasible != nil {
			return nil
		}
		domains, levels = p.domains, p.levels
	}
	node := ni.Node()
	for _, g := range ch {
		name := g.Key.String()
		domain, ok := domains[name]
		if !ok || g.TopologyKey == "" {
			continue
		}
		value := node.Labels[g.TopologyKey]
		if byNode, device := levels[g.TopologyKey]; device {
			value = byNode[node.Name]
		}
		if value != domain {
			return fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
				fmt.Sprintf("node is outside %s's domain %s=%s", g.Key, g.TopologyKey, domain))
		}
	}
	return nil
}

// PostFilter drops the plan of a member that could not be placed: the
// snapshot moved on, and the group must re-plan as a whole. When the
// profile's Filter refused the member on its planned node for something
// the plan did not see, the node is remembered for the member's shape, so
// the next plan does not repeat the rejection.
func (t *Topology) PostFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	if pluginrt.Surplus(state) {
		// The plan stands: it did not count on this member.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if _, err := state.Read(retryKey); err == nil {
		// The plan stands: the member only retries with the claims it
		// allocated.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if root, ok := t.rootOf(state, pod); ok {
		t.mu.Lock()
		p := t.plans[root]
		t.mu.Unlock()
		if p != nil && p.infeasible == nil {
			if node, planned := p.assignments[planinput.PodKey(pod)]; planned {
				t.recordRejection(ctx, root, pod, node, p.assignments, statuses.Get(node))
			}
			t.drop(root)
		}
	}
	return nil, fwk.NewStatus(fwk.Unschedulable)
}

// PreFilterExtensions are not needed: plans are computed against the
// snapshot and preemption re-plans.
func (*Topology) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Reserve does nothing: the reservation is the framework's.
func (*Topology) Reserve(context.Context, fwk.CycleState, *corev1.Pod, string) *fwk.Status {
	return nil
}

// Unreserve drops the plan: a member failed after reserving, so the gang
// retries as a unit and must not trust room computed before.
func (t *Topology) Unreserve(_ context.Context, state fwk.CycleState, pod *corev1.Pod, _ string) {
	if root, ok := t.rootOf(state, pod); ok {
		t.drop(root)
	}
}

// EventsToRegister lists events that can make room for a group the
// planner rejected.
func (t *Topology) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}},
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add}, QueueingHintFn: t.podAdded},
		// Devices: a member's claim created or freed, devices published or
		// a class changed can make a group plannable that was not.
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.UpdatePodGeneratedResourceClaim}, QueueingHintFn: claimsMatter},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceClaim, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: claimsMatter},
		{Event: fwk.ClusterEvent{Resource: fwk.ResourceSlice, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: claimsMatter},
		{Event: fwk.ClusterEvent{Resource: fwk.DeviceClass, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: claimsMatter},
	}, nil
}

// claimsMatter queues, on a device event, only members that use
// ResourceClaims: no other plan counts devices.
func claimsMatter(_ klog.Logger, pod *corev1.Pod, _, _ interface{}) (fwk.QueueingHint, error) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// podAdded queues a rejected member for a pod that is bound (it may
// satisfy the member's pod affinity or even out a spread) or that joins
// the member's own hierarchy (a new member, perhaps smaller, changes the
// plan). A pending pod of another hierarchy takes no room and changes no
// plan of this one; thousands are created with every burst of gangs, and
// each would otherwise send every rejected member back to be planned.
func (t *Topology) podAdded(_ klog.Logger, pod *corev1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
	other, ok := newObj.(*corev1.Pod)
	if !ok || other.Spec.NodeName != "" || other.UID == pod.UID {
		return fwk.Queue, nil
	}
	if other.Namespace != pod.Namespace || !t.groups.SameHierarchy(&t.eventPod, pod, other) {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}
