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
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
	"github.com/phalanx-sched/phalanx/pkg/reservation"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = pluginrt.TopologyName

// Args configure the plugin.
//
//	pluginConfig:
//	- name: PhalanxTopology
//	  args:
//	    domainPolicy: BestFit     # BestFit | WorstFit | FirstFit
//	    planTTLSeconds: 30
type Args struct {
	// DomainPolicy picks among feasible domains. BestFit (default) takes the
	// one left fullest, which keeps big domains whole for big gangs.
	DomainPolicy string `json:"domainPolicy,omitempty"`
	// PlanTTLSeconds bounds how long a plan is trusted. Default 30.
	PlanTTLSeconds int64 `json:"planTTLSeconds,omitempty"`
	// Reservation holds a domain for a gang that waited too long, with
	// backfill (pkg/reservation). Absent: off.
	Reservation *reservation.Args `json:"reservation,omitempty"`
}

// DecodeArgs reads and validates the args, applying defaults.
func DecodeArgs(obj runtime.Object) (Args, placement.Options, error) {
	args := Args{}
	if obj != nil {
		if err := frameworkruntime.DecodeInto(obj, &args); err != nil {
			return args, placement.Options{}, fmt.Errorf("decode %s args: %w", Name, err)
		}
	}
	opts := placement.Options{}
	switch args.DomainPolicy {
	case "", "BestFit":
		args.DomainPolicy, opts.DomainPolicy = "BestFit", placement.BestFit
	case "WorstFit":
		opts.DomainPolicy = placement.WorstFit
	case "FirstFit":
		opts.DomainPolicy = placement.FirstFit
	default:
		return args, opts, fmt.Errorf("%s args: domainPolicy %q is not supported: use BestFit, WorstFit or FirstFit", Name, args.DomainPolicy)
	}
	if args.PlanTTLSeconds == 0 {
		args.PlanTTLSeconds = 30
	}
	if args.PlanTTLSeconds < 1 || args.PlanTTLSeconds > 600 {
		return args, opts, fmt.Errorf("%s args: planTTLSeconds=%d is out of range: use 1 to 600", Name, args.PlanTTLSeconds)
	}
	if args.Reservation != nil {
		if err := args.Reservation.Default(); err != nil {
			return args, opts, fmt.Errorf("%s args: %w", Name, err)
		}
	}
	return args, opts, nil
}

// A failed plan answers for the group's other members while the snapshot
// is unchanged, so a gang that cannot fit costs one planning run per change
// of the cluster, not one per member. infeasibleReuse caps that as a safety.
const infeasibleReuse = 10 * time.Second

// fingerprint changes whenever any node's state in the snapshot changes:
// node generations only grow, so their sum moves with every update.
type fingerprint struct {
	nodes int
	gens  int64
	// devices is the device epoch (watchDevices).
	devices uint64
}

func (t *Topology) fingerprintOf(infos []fwk.NodeInfo) fingerprint {
	f := fingerprint{nodes: len(infos), devices: t.deviceEpoch.Load()}
	for _, ni := range infos {
		f.gens += ni.GetGeneration()
	}
	return f
}

type plan struct {
	created time.Time
	// rev is the hierarchy revision the plan was made at; an infeasible
	// plan answers only for that revision.
	rev         uint64
	snapshot    fingerprint
	assignments map[string]string // pod key -> node
	// allocated names the shared claims (namespace/name) the plan
	// allocated (shared.go).
	allocated map[string]bool
	domains   map[string]string // group key string -> domain value
	// levels are the domains of the device attribute levels the plan
	// used, per key and node (planinput.DeviceDomains): Filter reads a
	// node's domain of such a key there, not in its labels.
	levels     map[string]map[string]string
	nominated  []*corev1.Pod
	infeasible *placement.Infeasible
	// pinned are, for an infeasible plan, the domains the hierarchy's
	// placed members already occupy (pinnedDomains), found once from the
	// tree the plan was made from. The plan only answers while the
	// snapshot is unchanged, and a member reserved or bound changes it.
	pinned map[string]string
}

// Topology implements the planning extension points.
type Topology struct {
	handle fwk.Handle
	groups *groups.Fed
	status *groupstatus.Writer
	args   Args
	opts   placement.Options
	// deviceEpoch moves with device changes (watchDevices).
	deviceEpoch atomic.Uint64
	// allocatedShared is set once this plugin allocated a shared claim
	// (shared.go): until then no claim needs freeing.
	allocatedShared atomic.Bool
	// orphans frees, once, what was allocated for groups deleted while
	// no Phalanx scheduler ran.
	orphans sync.Once

	mu    sync.Mutex
	plans map[groups.Key]*plan
	nodes planinput.SnapshotNodes
	// rejected remembers, per hierarchy root, the planned nodes the
	// profile's Filter refused members on, so no plan repeats them.
	rejected map[groups.Key]map[string]map[string]rejection

	prober    *probe.Prober
	antiTerms *planinput.TermMemo
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
	args, opts, err := DecodeArgs(obj)
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
		prober:         planinput.NewProber(h),
		antiTerms:      &planinput.TermMemo{},
		unknownFilters: sync.OnceValue(func() []string { return planinput.UnknownFilters(h) }),
		nsLister:       h.SharedInformerFactory().Core().V1().Namespaces().Lister(),
		podLister:      h.SharedInformerFactory().Core().V1().Pods().Lister(),
	}
	t.runCtx = ctx
	t.promises = pluginrt.PromisesOf(inst)
	if args.Reservation != nil {
		t.resv = newReserver(t, *args.Reservation, h.SharedInformerFactory().Core().V1().Nodes().Lister())
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

// usablePlan returns the stored plan for root when it can answer for pod.
func (t *Topology) usablePlan(root groups.Key, key string) *plan {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.plans[root]
	if p == nil {
		return nil
	}
	age := time.Since(p.created)
	if p.infeasible != nil {
		// A group change drops the plan (groupChanged), but a plan made
		// from the hierarchy as it was just before can be stored after
		// that; reused, it would refuse the gang at its old size until
		// the cluster changes.
		rev, known := t.groups.HierarchyRevision(root)
		infos, err := t.handle.SnapshotSharedLister().NodeInfos().List()
		if err == nil && known && rev == p.rev && age < infeasibleReuse && t.fingerprintOf(infos) == p.snapshot {
			return p
		}
		return nil
	}
	if age > time.Duration(t.args.PlanTTLSeconds)*time.Second {
		return nil
	}
	node, ok := p.assignments[key]
	if !ok {
		return nil
	}
	if _, err := t.handle.SnapshotSharedLister().NodeInfos().Get(node); err != nil {
		return nil
	}
	return p
}

func (t *Topology) replan(ctx context.Context, root groups.Key) (*plan, *fwk.Status) {
	logger := klog.FromContext(ctx)
	// Read before the tree, so the plan never claims a newer revision than
	// the hierarchy it was made from.
	rev, _ := t.groups.HierarchyRevision(root)
	tree, err := t.groups.TreeOf(root)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	infos, err := t.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("list snapshot nodes: %w", err))
	}
	// Read before planning, as the revision is: a device change while
	// the plan is made must make the plan stale, not be taken as seen.
	seen := t.fingerprintOf(infos)
	cons := t.constraints(ctx, root, infos)
	opts := t.opts
	if t.resv != nil {
		if t.resv.book.HeldNodes() > 0 {
			cons.Closed = func(rep *corev1.Pod) map[string]string { return t.resv.closed(root, rep) }
		}
		if t.resv.wantsExplain(tree) {
			opts.ExplainDomains = explainDomainsForReservation
		}
	}
	input, members, err := planinput.BuildInput(tree, cons)
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("plan group %s: %w", root, err))
	}
	opts.Extra = cons.Extra()
	opts.Domains = cons.DeviceDomains(ctx, tree, input)
	table, reserved, err := t.nodes.Table(infos, t.handle.NominatedPodsForNode, members)
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("prepare snapshot nodes: %w", err))
	}
	t.unusable.report(t.handle.EventRecorder(), table, t.snapshotNode)
	start := time.Now()
	result, err := table.Plan(input, reserved, opts)
	planDuration.Observe(time.Since(start).Seconds())
	p := &plan{created: time.Now(), rev: rev, snapshot: seen, levels: opts.Domains}
	var inf *placement.Infeasible
	switch {
	case errors.As(err, &inf):
		p.infeasible = inf
		p.pinned = t.pinnedDomains(tree)
		// Shared claims allocated for an earlier plan keep the group in
		// their reach; when that no longer fits, free them (unless a
		// member uses them) so the next plan may choose anew.
		t.releaseShared(ctx, root, tree)
		logger.V(3).Info("Group cannot be placed", "group", root, "reason", inf.Reason)
		t.reportInfeasible(tree, inf)
		if t.resv != nil {
			t.resv.consider(logger, tree, inf, infos)
		}
	case err != nil:
		return nil, fwk.AsStatus(fmt.Errorf("plan group %s: %w", root, err))
	default:
		if p.allocated, err = t.allocateShared(ctx, root, cons, result.Assignments); err != nil {
			return nil, fwk.AsStatus(fmt.Errorf("plan group %s: %w", root, err))
		}
		planinput.KeepStatusNominations(input, tree, result)
		p.assignments = result.Assignments
		p.domains = result.Domains
		p.nominated = planinput.Nominate(logger, t.handle, tree, result.Assignments, true)
		t.promise(p)
		if stale := planinput.StaleStatusNominations(tree, result.Assignments); len(stale) > 0 {
			go t.correctStatusNominations(t.runCtx, stale)
		}
		t.reportChoices(logger, tree, result.Choices)
		logger.V(4).Info("Planned group", "group", root, "pods", len(result.Assignments), "domains", result.Domains)
	}
	t.mu.Lock()
	old := t.plans[root]
	t.plans[root] = p
	t.mu.Unlock()
	if old != nil {
		t.unnominate(old, p)
	}
	return p, nil
}

// unnominate drops nominations of an old plan that a new plan does not
// repeat.
func (t *Topology) unnominate(old, replacement *plan) {
	for _, pod := range old.nominated {
		if replacement != nil {
			if _, still := replacement.assignments[planinput.PodKey(pod)]; still {
				continue
			}
		}
		t.handle.DeleteNominatedPodIfExists(pod)
		t.promises.Withdraw(pod.UID, pluginrt.PlanPromise)
	}
}

// promise records p's node for each member it nominated that the
// scheduling queue has not filed yet: filing it, the queue drops the
// nomination (it takes the one the pod's status carries), and the room
// would go to the next pod. The gang plugin nominates it again each cycle
// until the queue has filed it. A member keeping a node after a failed
// binding has its promise moved to where this plan puts it.
func (t *Topology) promise(p *plan) {
	if t.promises == nil {
		return
	}
	for _, pod := range p.nominated {
		node := p.assignments[planinput.PodKey(pod)]
		if !t.groups.Queued(pod.UID) {
			t.promises.Promise(pod, node, pluginrt.PlanPromise)
		} else {
			t.promises.Move(pod.UID, node)
		}
	}
}

// correctStatusNominations makes the API's nominatedNodeName of members an
// earlier preemption nominated agree with their plan. The queue refiles a
// pod's nomination from its status on every update, so a stale one would
// come back at the member's next failed attempt and hold a node the plan
// gave a sibling, which then fails its Filter, and nothing requeues either.
func (t *Topology) correctStatusNominations(ctx context.Context, stale []planinput.StatusNomination) {
	if ctx == nil {
		ctx = context.Background()
	}
	logger := klog.FromContext(ctx)
	client := t.handle.ClientSet()
	for _, s := range stale {
		status := s.Pod.Status.DeepCopy()
		status.NominatedNodeName = s.Node
		if err := schedutil.PatchPodStatus(ctx, client, s.Pod.Name, s.Pod.Namespace, &s.Pod.Status, status); err != nil && !apierrors.IsNotFound(err) {
			logger.Error(err, "Could not correct a stale nominated node", "pod", klog.KObj(s.Pod), "node", s.Node)
		}
	}
}

// drop forgets root's plan, e.g. when a planned node turned out not to fit.
func (t *Topology) drop(root groups.Key) {
	t.mu.Lock()
	old := t.plans[root]
	delete(t.plans, root)
	t.mu.Unlock()
	if old != nil {
		t.unnominate(old, nil)
	}
}

func (t *Topology) reportInfeasible(tree *groups.Tree, inf *placement.Infeasible) {
	var find func(*groups.Tree) *groups.Tree
	find = func(tr *groups.Tree) *groups.Tree {
		if tr.Key.String() == inf.Group {
			return tr
		}
		for _, ch := range tr.Children {
			if f := find(ch); f != nil {
				return f
			}
		}
		return nil
	}
	target := find(tree)
	if target == nil {
		target = tree
	}
	reason := v1alpha1.ReasonUnschedulable
	if inf.Invalid {
		// The group's own definition contradicts the nodes: no capacity
		// will help until one of them changes.
		reason = v1alpha1.ReasonInvalid
	}
	cond := groupstatus.Condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, reason, inf.Reason)
	t.status.Set(target.Key, cond)
	if target.Key != tree.Key {
		t.status.Set(tree.Key, cond)
	}
}

// reportChoices tells every group with preferred topology levels where
// the plan put it and, after a fallback, why, in a PreferredTopology
// condition. Groups without an object (scheduler-plugins', whose API has
// no conditions) have it in the scheduler's log only.
func (t *Topology) reportChoices(logger klog.Logger, tree *groups.Tree, choices map[string]placement.Choice) {
	if len(choices) == 0 {
		return
	}
	var walk func(*groups.Tree)
	walk = func(tr *groups.Tree) {
		if c, ok := choices[tr.Key.String()]; ok {
			logger.V(3).Info("Preferred topology", "group", tr.Key, "preferred", c.Preferred, "choice", c.Message)
			status, reason := metav1.ConditionTrue, v1alpha1.ReasonPreferred
			if !c.Preferred {
				status, reason = metav1.ConditionFalse, v1alpha1.ReasonFellBack
			}
			t.status.Set(tr.Key, groupstatus.Condition(v1alpha1.PodGroupPreferredTopology, status, reason, c.Message))
		}
		for _, ch := range tr.Children {
			walk(ch)
		}
	}
	walk(tree)
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
