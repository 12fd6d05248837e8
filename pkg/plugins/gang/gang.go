// Package gang is the all-or-nothing plugin: it holds a gang until its
// members exist (PreEnqueue), rejects groups whose members disagree on
// priority, preemption policy or scheduler (PreFilter), lets reserved
// members wait until the whole hierarchy has quorum (Permit), and releases
// every waiting member together when one fails (PostFilter, Unreserve), so no
// gang ever binds below its minimum or holds capacity it cannot use.
//
// Group state lives in pkg/groups; this package only adapts it to the
// scheduling framework and reports what happens in group conditions.
package gang

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = pluginrt.GangName

// Gang implements the gang extension points.
type Gang struct {
	handle fwk.Handle
	groups groupCache
	args   pluginArgs
	shared *shared

	// podLister is the informer's pod lister, looked up once: the
	// factory's lookup takes a lock and PreEnqueue runs for every pod the
	// queue moves. Nil in tests that build the plugin by hand.
	podLister corelisters.PodLister
	// startup says whether the scheduler's handlers took in the
	// informers' first lists (pluginrt.Runtime, marked by whoever starts
	// the scheduler, or by the first cycle): until then PreEnqueue holds
	// no member for siblings still to come. Nil in tests that build the
	// plugin by hand: listed.
	startup *pluginrt.Runtime

	// verdicts remembers validate's scan of a hierarchy's members; see
	// groups.Cache.HierarchyRevision.
	verdictMu sync.Mutex
	verdicts  map[groups.Key]verdict

	// eventPod is the pod the queue's last sibling hint was about
	// (siblingChanged).
	eventPod groups.EventPod
	// lastNodeEvent memoizes nodeCanHelp for the node event the queue
	// asks about.
	lastNodeEvent atomic.Pointer[leafMemo]
}

// groupCache is what the plugin reads and changes of the group cache
// (*groupcache.Fed). An extension point decides from what its calls
// return, and each call is a read of its own; the plugin holds the cache
// through this interface so that a test counts the calls per extension
// point (walk_test.go) and a phase that starts deciding from several
// separate reads again shows up there.
type groupCache interface {
	pluginrt.Member

	// The scheduling cycle.
	ViewFor(state fwk.CycleState, pod *corev1.Pod) *groups.View
	PreFilterFacts(v *groups.View, ask groups.PreFilterAsk) groups.PreFilterFacts
	PermitFacts(v *groups.View) groups.PermitFacts
	MarkAssumedOn(pod *corev1.Pod, node string)
	MarkPending(pod *corev1.Pod)

	// The queue: PreEnqueue and the queueing hints.
	EnsurePod(pod *corev1.Pod, store corelisters.PodLister)
	MarkQueued(uid types.UID)
	Quorum(pod *corev1.Pod, count groups.Counter) (bool, groups.Shortfall, error)
	QuorumOf(leaf groups.Key, count groups.Counter) (bool, groups.Shortfall, error)
	SameHierarchy(e *groups.EventPod, held, other *corev1.Pod) bool
	GroupOf(uid types.UID) (groups.Key, bool)

	// Groups and members by key: conditions, releases, recoveries.
	Get(k groups.Key) (groups.Info, bool)
	RootOf(k groups.Key) (groups.Key, bool)
	UnitOf(leaf groups.Key) (groups.Key, bool)
	Satisfied(k groups.Key, count groups.Counter) (ok bool, have, need int)
	HierarchyMembersIn(k groups.Key, s groups.State) []*corev1.Pod
	SubtreeMembersIn(k groups.Key, s groups.State) []*corev1.Pod
	SubtreeScheduledBound(k groups.Key) []*corev1.Pod
}

var _ groupCache = (*groupcache.Fed)(nil)

// verdict is the outcome of checking every member of a hierarchy against
// the wanted priority, policy and scheduler name, at one revision.
type verdict struct {
	rev           uint64
	priority      int32
	policy        corev1.PreemptionPolicy
	schedulerName string
	msg           string
}

var (
	_ fwk.PreEnqueuePlugin  = &Gang{}
	_ fwk.PreFilterPlugin   = &Gang{}
	_ fwk.PostFilterPlugin  = &Gang{}
	_ fwk.ReservePlugin     = &Gang{}
	_ fwk.PermitPlugin      = &Gang{}
	_ fwk.EnqueueExtensions = &Gang{}
)

// shared is the per-scheduler state every profile's instance uses: one
// status writer, so two profiles never race on the same group's status.
type shared struct {
	status   *groupstatus.Writer
	events   *eventDedup
	attempts *attempts
	// binds paces binding requests (bindpace.go); the API server is the
	// same for every profile, so the first profile's bindConcurrency wins.
	binds *bindSlots
	// jobs holds the unattached pods of gang Jobs (jobhold.go).
	jobs *jobHolds
	// deadlines releases a gang that stops progressing in Permit
	// (deadline.go); the first profile's timeouts win, like binds.
	deadlines *gangDeadlines
	// capacity rejects gangs larger than the cluster (capacity.go).
	capacity *capacity
	// room holds scheduler-plugins groups back until the cluster could
	// hold their minResources (minresources.go).
	room *minRoom
	// drain tracks the binds Permit let through, for a graceful stop
	// (drain.go).
	drain *Drain
	// lifetime ends with the scheduler instance; binding requests run
	// until then rather than until their cycle ends (bindpace.go).
	lifetime context.Context
	// mends are the recoveries of gangs bound below their minimum
	// (mend.go).
	mends *mends
	// promises is the room promised to pending members that the queue
	// may have dropped (pluginrt.Promises), shared with PhalanxTopology.
	promises *pluginrt.Promises

	mu sync.Mutex
	// complete remembers which hierarchies had all their members present,
	// so held members are activated once, on the transition.
	complete map[groups.Key]bool
	// releases are the gang units whose current attempt already
	// released its waiting members (rejectWaiting).
	releases gangcore.Releases
}

// Factory returns the plugin's factory for the scheduler that rt serves,
// whose graceful stop waits on d (nil: a Drain nobody waits on). Every
// profile of one scheduler gets the same rt and d.
func Factory(rt *pluginrt.Runtime, d *Drain) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return newGang(ctx, obj, h, rt, d)
	}
}

func newGang(ctx context.Context, obj runtime.Object, h fwk.Handle, rt *pluginrt.Runtime, d *Drain) (fwk.Plugin, error) {
	if d == nil {
		d = NewDrain()
	}
	args, err := decodeArgs(obj)
	if err != nil {
		return nil, err
	}
	if utilfeature.DefaultFeatureGate.Enabled(features.GenericWorkload) {
		// The queue would take every pod with spec.schedulingGroup into
		// upstream's own pod-group cycle: two schedulers acting on one
		// group, and Phalanx's plugins would see its pods only per pod.
		return nil, fmt.Errorf("%s: run phalanx-scheduler with the feature gate GenericWorkload off (its default): Phalanx schedules scheduling.k8s.io PodGroups itself", Name)
	}
	inst, err := rt.Instance(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	fed := inst.Groups
	pl := &Gang{handle: h, groups: fed, args: args, verdicts: map[groups.Key]verdict{},
		podLister: h.SharedInformerFactory().Core().V1().Pods().Lister()}
	pl.startup = rt
	if err := pl.watchNodeDeletions(); err != nil {
		return nil, fmt.Errorf("%s: watch node deletions: %w", Name, err)
	}
	fed.SubscribeGone(pl.forgetVerdict)
	rt.Register(ctx, h, pl)
	// Read outside the build below: Shared holds the instance's lock
	// while it builds.
	promises := pluginrt.PromisesOf(inst)
	// The first profile's plugin builds what every profile shares; its
	// args (bindConcurrency, Permit timeouts) are the ones that count.
	pl.shared, err = pluginrt.Shared(inst, Name, func() (*shared, error) {
		jobs, err := newJobHolds(ctx, h.KubeConfig(), h)
		if err != nil {
			return nil, err
		}
		s := &shared{status: inst.Status, events: newEventDedup(), attempts: newAttempts(), binds: newBindSlots(int(args.BindConcurrency)), jobs: jobs, complete: map[groups.Key]bool{}, room: newMinRoom(), drain: d, lifetime: ctx,
			mends: newMends(), promises: promises}
		pl.shared = s
		s.deadlines = newGangDeadlines(args.permitTimeout(), args.permitLimit(), pl.expireGang)
		nodes := h.SharedInformerFactory().Core().V1().Nodes()
		s.capacity = newCapacity(nodes.Lister())
		if err := s.capacity.watch(nodes.Informer()); err != nil {
			return nil, fmt.Errorf("watch node capacity: %w", err)
		}
		fed.Subscribe(pl.groupChanged)
		fed.SubscribeGone(pl.forgetGroup)
		go func() {
			<-ctx.Done()
			s.attempts.reset()
			s.deadlines.stop()
			s.mends.stop()
		}()
		return s, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return pl, nil
}

// Name returns the plugin name.
func (*Gang) Name() string { return Name }

var condition = groupstatus.Condition

// PreEnqueue keeps a gang out of the active queue until enough members
// exist to possibly reach quorum, so an incomplete gang costs no cycle.
func (pl *Gang) PreEnqueue(ctx context.Context, pod *corev1.Pod) *fwk.Status {
	if msg := pl.shared.jobs.reason(pod); msg != "" {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
	}
	// The queue may hand the pod over before the group cache has added it:
	// count it now rather than hold it for a member it does not know.
	pods := pl.podLister
	if pods == nil {
		pods = pl.handle.SharedInformerFactory().Core().V1().Pods().Lister()
	}
	pl.groups.EnsurePod(pod, pods)
	// From now on the queue keeps a nomination made for the pod; a plan
	// that nominated it before (PhalanxTopology) has it nominated again
	// by the next cycle (pluginrt.Promises). Only marked here: nominating
	// under the queue's lock, which PreEnqueue runs under, would deadlock.
	pl.groups.MarkQueued(pod.UID)
	ok, short, err := pl.groups.Quorum(pod, groups.ByExisting)
	var invalid *groups.InvalidError
	if errors.As(err, &invalid) {
		// PreFilter refuses the group and says why, on every member.
		return nil
	}
	if err != nil {
		pl.podEvent(pod, "GroupInvalid", err.Error())
		pl.explainOnLeaf(pod, err)
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	if ok {
		return nil
	}
	if pl.startup != nil && !pl.startup.Listed() {
		// The scheduler's start: its informers hand the queue the listed
		// pods one by one, in no gang order, and the first cycle waits
		// until every listed pod and node went through the handlers. A
		// member held here for siblings still to come sits among the
		// queue's unschedulable pods, every node listed meanwhile
		// (thousands) has the queue weigh each of them again (a quarter
		// of the scheduler's CPU at 5,000 nodes, spent before its first
		// cycle and delaying its readiness), and its gang's WaitingForPods
		// condition is written only to be replaced. Let it in: by the
		// first cycle the siblings listed with it are known, and PreFilter
		// still refuses a gang that is incomplete then. Pods created
		// after the lists are held as always: a cluster that starts
		// empty may see no cycle for a long time.
		return nil
	}
	msg := fmt.Sprintf("%s (%s)", gangcore.WaitingMessage(short), short.Key)
	pl.shared.status.Set(short.Key, condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonWaitingForPods, gangcore.WaitingMessage(short)))
	pl.heldEventLater(pod)
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// explainOnLeaf writes a hierarchy problem (a missing parent, a cycle, a
// chain deeper than 4 levels) on the pod's PodGroup when that object
// exists. Pod events alone are not enough: events.k8s.io folds later events
// of the same reason into the first one's series and keeps its note, so a
// pod that first reported its group missing would go on saying so after the
// group appeared with a broken parent chain.
func (pl *Gang) explainOnLeaf(pod *corev1.Pod, err error) {
	a, grouped, attachErr := groups.Attach(pod)
	if !grouped || attachErr != nil || a.Key.Kind != groups.PodGroupKind {
		return
	}
	if _, exists := pl.groups.Get(a.Key); exists {
		pl.shared.status.Set(a.Key, condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonInvalid, err.Error()))
	}
}

// PreFilter validates the group as a whole.
func (pl *Gang) PreFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if probe.Is(state) {
		// The topology plugin asks the profile's filters about a copy of
		// a member; there is nothing to validate or hold.
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if pl.startup != nil && !pl.startup.Listed() {
		// A cycle runs only once the lists are through, however the
		// scheduler was started.
		pl.startup.MarkListed()
	}
	pl.holdForClaimBacklog(ctx, pod)
	// Every cycle, before any Filter reads nominations: room promised to
	// members the queue dropped the nomination of is nominated again.
	pl.shared.promises.Keep(klog.FromContext(ctx), pl.handle, pl.groups)
	v := pl.groups.ViewFor(state, pod)
	if !v.Grouped {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	if v.Err != nil {
		return nil, pl.refuseInvalid(state, pod, v.Err.Error())
	}
	ch := v.Chain
	invalid := func(msg string) *fwk.Status {
		for _, g := range ch {
			pl.shared.status.Set(g.Key, condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonInvalid, msg))
		}
		return pl.refuseInvalid(state, pod, msg)
	}
	if msg := invalidByView(pod, v); msg != "" {
		return nil, invalid(msg)
	}
	// Everything below is decided from one read of the cache: the checks
	// see the same members, counts and revision.
	r := pl.read(pod, v, true)
	pl.check(pod, v, r)
	if msg := pl.membersInvalid(pod, v, r); msg != "" {
		return nil, invalid(msg)
	}
	if r.Err != nil {
		return nil, pl.refuseInvalid(state, pod, r.Err.Error())
	}
	if !r.Quorum {
		// Usually PreEnqueue held the member and said so already; a member
		// let in before the first cycle (PreEnqueue) is told here.
		pl.shared.status.Set(r.Short.Key, condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonWaitingForPods, r.checked.Waiting))
		return nil, refuse(state, pluginrt.GroupIncomplete, r.checked.Waiting)
	}
	if msg := pl.tooLarge(r); msg != "" {
		leaf := ch.Leaf()
		pl.shared.status.Set(leaf.Key, condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonUnschedulable, msg))
		// A gang composite above needs this child, so it cannot be placed
		// either; saying so on it keeps a user who watches the root (as
		// Workload owners do) from waiting on a condition never written.
		for _, g := range ch[1:] {
			if g.Gang {
				pl.shared.status.Set(g.Key, condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonUnschedulable,
					fmt.Sprintf("child %s: %s", leaf.Key.Name, msg)))
			}
		}
		return nil, refuse(state, pluginrt.GroupInfeasible, msg)
	}
	if msg := pl.minResourcesWait(v, r); msg != "" {
		pl.shared.status.Set(ch.Leaf().Key, condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonUnschedulable, msg))
		return nil, refuse(state, pluginrt.GroupInfeasible, msg)
	}
	if v.Gang {
		pl.mendIfLeftPartial(pod, r)
	}
	return nil, nil
}

// refuse records in the cycle's state why the pod's group as a whole was
// refused, for the preemption plugin, and returns the refusal.
func refuse(state fwk.CycleState, v pluginrt.GroupVerdict, msg string) *fwk.Status {
	pluginrt.RefuseGroup(state, v)
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// tooLarge returns why the pod's leaf gang cannot fit even an empty
// cluster, "" when it might. The leaf is judged as the read found it, at
// the revision read with it: a minCount changed after the View was built
// is judged at its new value.
func (pl *Gang) tooLarge(r *preFilterRead) string {
	if !r.sizeAsked() {
		return ""
	}
	if r.checked != nil || r.sizeMemo.Covers(r.Rev, r.RevKnown) {
		return r.sizeMsg
	}
	return pl.shared.capacity.judge(r.Leaf, r.Rev, r.RevKnown, r.alloc, r.gen, r.LeafMembers)
}

// PreFilterExtensions is not needed: the plugin has no Filter.
func (*Gang) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// groupChanged runs after the cache saw a change of group k. It activates
// held members when their hierarchy just became complete or the group
// object changed (the queue's own event hints may have run before this
// cache was updated), and reports a group as scheduled once its quorum is
// bound.
func (pl *Gang) groupChanged(k groups.Key, object bool) {
	if _, ok := pl.groups.Get(k); !ok {
		pl.shared.status.Forget(k)
		// Members of a missing group are held with "not found". A member
		// that PreEnqueue saw before this cache did may have been held for
		// a different reason, so members are re-evaluated on their own
		// changes too, not only on the group's.
		pl.activate(k)
		return
	}
	root, ok := pl.groups.RootOf(k)
	if !ok {
		root = k
	}
	complete, _, _ := pl.groups.Satisfied(root, groups.ByExisting)
	// The group itself may become complete while its root already was (a
	// child gang of a composite whose minGroupCount other children meet):
	// its held members must be activated then too.
	own := complete
	if root != k {
		own, _, _ = pl.groups.Satisfied(k, groups.ByExisting)
	}
	pl.shared.mu.Lock()
	became := (complete && !pl.shared.complete[root]) || (own && !pl.shared.complete[k])
	pl.shared.complete[root] = complete
	pl.shared.complete[k] = own
	pl.shared.mu.Unlock()
	if became || object {
		pl.activate(k)
	}
	keys := []groups.Key{k}
	if root != k {
		keys = append(keys, root)
	}
	if !complete {
		// PreEnqueue may have run before this cache saw the member that
		// triggered it (the informers' handlers run in no set order), so
		// the waiting count is refreshed from here too.
		for _, key := range keys {
			if info, ok := pl.groups.Get(key); ok && info.Invalid != "" {
				// PreFilter says why the group cannot be scheduled; a
				// count of its pods would hide that.
				continue
			}
			if sat, have, need := pl.groups.Satisfied(key, groups.ByExisting); !sat && have > 0 {
				short := groups.Shortfall{Key: key, Leaf: key.Kind != groups.CompositeKind, Have: have, Need: need}
				pl.shared.status.Set(key, condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonWaitingForPods, gangcore.WaitingMessage(short)))
			}
		}
	}
	pl.mendMaybeDone(k)
	for _, key := range keys {
		if sat, have, _ := pl.groups.Satisfied(key, groups.ByBound); sat && have > 0 {
			msg := fmt.Sprintf("%d %s bound", have, map[bool]string{true: "pods", false: "child groups"}[key.Kind != groups.CompositeKind])
			pl.shared.status.Set(key,
				condition(v1alpha1.PodGroupSchedulable, metav1.ConditionTrue, v1alpha1.ReasonScheduled, msg),
				condition(v1alpha1.PodGroupInitiallyScheduled, metav1.ConditionTrue, v1alpha1.ReasonScheduled, msg))
		}
	}
}

// forgetGroup drops what the plugin kept for group k, which is gone: a
// scheduler serving thousands of short gangs a day must not hold one entry
// per gang it ever saw.
func (pl *Gang) forgetGroup(k groups.Key) {
	pl.shared.mu.Lock()
	delete(pl.shared.complete, k)
	pl.shared.mu.Unlock()
	pl.shared.releases.Forget(k)
	pl.shared.events.forgetGroup(k)
	pl.shared.capacity.forget(k)
	pl.shared.room.forget(k)
	// Members still waiting were deleted with their group; the framework
	// rejects them, but the cache may no longer say which gang they were.
	pl.shared.deadlines.done(k)
	pl.shared.attempts.forget(k)
	if m := pl.shared.mends.forget(k); m != nil {
		pl.endPromises(m)
	}
	pl.shared.status.Forget(k)
}

// forgetVerdict drops this profile's validation memo of group k, which is
// gone.
func (pl *Gang) forgetVerdict(k groups.Key) {
	pl.verdictMu.Lock()
	delete(pl.verdicts, k)
	pl.verdictMu.Unlock()
}

// activate moves the pending members of k's hierarchy to the active queue.
func (pl *Gang) activate(k groups.Key) {
	pl.activatePods(pl.groups.HierarchyMembersIn(k, groups.Pending))
}

func (pl *Gang) activatePods(pending []*corev1.Pod) { pluginrt.Activate(pl.handle, pending) }

// podEvent records an event on a pod the framework does not report on
// (gated pods), once per distinct message.
// refuseInvalid refuses a member of an invalid group, with a GroupInvalid
// event on the member besides the framework's FailedScheduling. The event
// recorder folds every FailedScheduling of a pod into the series of the
// first, whatever its note, so a member that failed for another reason
// before would never show this one; and for a label gang, which has no
// object with a condition, the member's events are the only place a user
// reads it.
func (pl *Gang) refuseInvalid(state fwk.CycleState, pod *corev1.Pod, msg string) *fwk.Status {
	pl.podEvent(pod, "GroupInvalid", msg)
	return refuse(state, pluginrt.GroupInvalid, msg)
}

func (pl *Gang) podEvent(pod *corev1.Pod, reason, msg string) {
	if pl.shared.events.first(pod.UID, msg) {
		pl.handle.EventRecorder().Eventf(pod, nil, corev1.EventTypeWarning, reason, "Scheduling", msg)
	}
}
