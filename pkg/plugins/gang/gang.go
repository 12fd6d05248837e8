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
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	corelisters "k8s.io/client-go/listers/core/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/features"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = pluginrt.GangName

// Messages for groups whose members disagree, as the user guide quotes them.
const (
	MsgPriorityMismatch        = "all pods in a single pod group should have the same priority as the pod group"
	MsgPolicyMismatchWithGroup = "all pods in a single pod group should have the same preemption policy as the pod group's preemption policy"
	MsgPolicyMismatch          = "all pods in a single pod group should have the same preemption policy"
	MsgSchedulerNameMismatch   = "all pods in a single pod group should have the same schedulerName"
	// MsgMinAvailableMismatch starts the reason for a label gang whose
	// members carry different min-available labels.
	MsgMinAvailableMismatch = groups.MsgMinAvailableMismatch
)

// Gang implements the gang extension points.
type Gang struct {
	handle fwk.Handle
	groups *groups.Fed
	args   Args
	shared *shared

	// podLister is the informer's pod lister, looked up once: the
	// factory's lookup takes a lock and PreEnqueue runs for every pod the
	// queue moves. Nil in tests that build the plugin by hand.
	podLister corelisters.PodLister

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
	// released holds the gang units whose current attempt already
	// released its waiting members (rejectWaiting).
	released map[groups.Key]bool
}

// releaseOnce reports whether the failure of a member of unit is the
// first of the unit's attempt, and records that it released the members.
func (s *shared) releaseOnce(unit groups.Key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released[unit] {
		return false
	}
	if s.released == nil {
		s.released = map[groups.Key]bool{}
	}
	s.released[unit] = true
	return true
}

// attemptStarted records that a member of unit reserved: the next failure
// is a new attempt's and must release what waits again.
func (s *shared) attemptStarted(unit groups.Key) {
	s.mu.Lock()
	delete(s.released, unit)
	s.mu.Unlock()
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
	args, err := DecodeArgs(obj)
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

func waitingMessage(s groups.Shortfall) string {
	if s.Leaf {
		return fmt.Sprintf("waiting for pods: %d/%d present", s.Have, s.Need)
	}
	return fmt.Sprintf("waiting for child groups: %d/%d have their minimum pods", s.Have, s.Need)
}

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
	msg := fmt.Sprintf("%s (%s)", waitingMessage(short), short.Key)
	pl.shared.status.Set(short.Key, condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonWaitingForPods, waitingMessage(short)))
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
	if msg := pl.validate(pod, v); msg != "" {
		for _, g := range ch {
			pl.shared.status.Set(g.Key, condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonInvalid, msg))
		}
		return nil, pl.refuseInvalid(state, pod, msg)
	}
	ok, short, err := pl.groups.ViewQuorum(v, groups.ByExisting)
	if err != nil {
		return nil, pl.refuseInvalid(state, pod, err.Error())
	}
	if !ok {
		return nil, refuse(state, pluginrt.GroupIncomplete, waitingMessage(short))
	}
	if msg := pl.tooLarge(ch); msg != "" {
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
	if msg := pl.minResourcesWait(pod, ch); msg != "" {
		pl.shared.status.Set(ch.Leaf().Key, condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonUnschedulable, msg))
		return nil, refuse(state, pluginrt.GroupInfeasible, msg)
	}
	if v.Gang {
		pl.mendIfLeftPartial(pod, v)
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
// cluster, "" when it might fit.
func (pl *Gang) tooLarge(ch groups.Chain) string {
	key := ch.Leaf().Key
	// The verdict is remembered under the revision, so the revision is read
	// before the group it judges: the chain was read earlier, and a
	// minCount changed in between would otherwise be judged at its old
	// value and remembered as the new revision's verdict, refusing the
	// gang at the size it no longer has.
	rev, known := pl.groups.HierarchyRevision(key)
	leaf, ok := pl.groups.Get(key)
	if !ok {
		return ""
	}
	msg, err := pl.shared.capacity.exceeds(leaf, rev, known, func() []*corev1.Pod {
		return pl.groups.LeafMembers(leaf.Key, groups.Is(groups.Pending, groups.Assumed, groups.Bound))
	})
	if err != nil {
		return "" // the planner will judge
	}
	return msg
}

// PreFilterExtensions is not needed: the plugin has no Filter.
func (*Gang) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// validate checks that all live members of the hierarchy agree with the
// group (or, for a label group, with each other). It returns the user-facing
// reason, "" when valid.
func (pl *Gang) validate(pod *corev1.Pod, v *groups.View) string {
	ch := v.Chain
	for _, g := range ch {
		if g.Invalid != "" {
			return g.Invalid
		}
	}
	root := ch.Root()
	if v.PriorityErr != nil {
		return v.PriorityErr.Error()
	}
	wantPriority, wantPolicy, policyMsg := v.Priority, v.Policy, MsgPolicyMismatchWithGroup
	if root.PriorityFromMembers {
		policyMsg = MsgPolicyMismatch
	}
	check := func(m *corev1.Pod) string { return mismatch(m, pod, wantPriority, wantPolicy, policyMsg) }
	if msg := check(pod); msg != "" {
		return msg
	}
	// The scan over the other members only depends on the hierarchy's
	// revision and the wanted values: a 1,000-member gang scans once, not
	// once per member.
	rev, known := pl.groups.HierarchyRevision(ch.Leaf().Key)
	want := verdict{rev: rev, priority: wantPriority, policy: wantPolicy, schedulerName: pod.Spec.SchedulerName}
	pl.verdictMu.Lock()
	memo, seen := pl.verdicts[root.Key]
	pl.verdictMu.Unlock()
	if known && seen && memo.rev == want.rev && memo.priority == want.priority && memo.policy == want.policy && memo.schedulerName == want.schedulerName {
		return memo.msg
	}
	for _, m := range pl.groups.HierarchyMembersOf(v.Leaf(), groups.Is(groups.Pending, groups.Assumed, groups.Bound)) {
		if want.msg = check(m); want.msg != "" {
			break
		}
	}
	if known {
		// The entry lives as long as the hierarchy's root (forgetVerdict).
		pl.verdictMu.Lock()
		pl.verdicts[root.Key] = want
		pl.verdictMu.Unlock()
	}
	return want.msg
}

// wanted is the priority and preemption policy every member of the
// hierarchy under root must have, with the message for a policy that
// differs. Label gangs and scheduler-plugins' PodGroups define no priority:
// their members' own (ref's) is the group's, and they must agree.
func wanted(ref *corev1.Pod, root groups.Info, classes schedulinglisters.PriorityClassLister) (int32, corev1.PreemptionPolicy, string, error) {
	prio, policy, err := groups.EffectivePriority(ref, root, classes)
	if err != nil {
		return 0, "", "", err
	}
	if root.PriorityFromMembers {
		return prio, policy, MsgPolicyMismatch, nil
	}
	return prio, policy, MsgPolicyMismatchWithGroup, nil
}

// mismatch says how member m disagrees with what its group wants and with
// ref, the member being scheduled; "" when it agrees.
func mismatch(m, ref *corev1.Pod, prio int32, policy corev1.PreemptionPolicy, policyMsg string) string {
	switch {
	case groups.PodPriority(m) != prio:
		return fmt.Sprintf("%s: pod %s has priority %d, the group %d", MsgPriorityMismatch, m.Name, groups.PodPriority(m), prio)
	case groups.PodPolicy(m) != policy:
		return fmt.Sprintf("%s: pod %s has %s, the group %s", policyMsg, m.Name, groups.PodPolicy(m), policy)
	case m.Spec.SchedulerName != ref.Spec.SchedulerName:
		return fmt.Sprintf("%s: pod %s uses %q, pod %s uses %q", MsgSchedulerNameMismatch, m.Name, m.Spec.SchedulerName, ref.Name, ref.Spec.SchedulerName)
	}
	return ""
}

// Disagreement is PreFilter's check of a hierarchy that is not in the
// group cache (kubectl phalanx fit asks about groups before they exist):
// why members, the live pods of every leaf under root, cannot be
// scheduled together when ref is tried first; "" when they agree. The
// groups' own Invalid reasons are the caller's to check.
func Disagreement(ref *corev1.Pod, members []*corev1.Pod, root groups.Info, classes schedulinglisters.PriorityClassLister) string {
	prio, policy, policyMsg, err := wanted(ref, root, classes)
	if err != nil {
		return err.Error()
	}
	if msg := mismatch(ref, ref, prio, policy, policyMsg); msg != "" {
		return msg
	}
	for _, m := range members {
		if msg := mismatch(m, ref, prio, policy, policyMsg); msg != "" {
			return msg
		}
	}
	return ""
}

// Reserve records the member as assumed: it now counts toward quorum.
func (pl *Gang) Reserve(_ context.Context, state fwk.CycleState, pod *corev1.Pod, node string) *fwk.Status {
	pl.groups.MarkAssumedOn(pod, node)
	if unit, ok := pl.gangUnit(state, pod); ok {
		// A new attempt of the gang: its next failure must release the
		// members that reserve from now on.
		pl.shared.attemptStarted(unit)
	}
	return nil
}

// Unreserve undoes Reserve and releases every waiting member of the
// hierarchy: a gang whose member failed cannot reach quorum this round,
// and its reservations would only block others.
func (pl *Gang) Unreserve(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, node string) {
	pl.groups.MarkPending(pod)
	pl.shared.binds.release(pod.UID)
	if pl.shared.drain.finish(pod.UID, false) {
		// Permit had let it through: its binding failed, and its siblings
		// may be bound without it.
		pl.bindFailed(state, pod, node)
	}
	pl.rejectWaiting(ctx, state, pod, fmt.Sprintf("member %s/%s was released; the gang retries as a unit", pod.Namespace, pod.Name))
}

// rejectWaiting releases the members of pod's gang that wait in Permit.
// Only the first failure of an attempt does the work: each member it
// rejects comes back through Unreserve, and a failing n-member gang would
// otherwise list its members n times to reject nobody new. A member that
// reserves after that starts a new attempt (Reserve), whose first failure
// releases again.
func (pl *Gang) rejectWaiting(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, msg string) {
	root, known := pl.hierarchyOf(pod.UID)
	pl.shared.attempts.failed(root, known, pod.UID, pl.args.permitLimit())
	if known {
		pl.shared.deadlines.done(root)
		pl.shared.room.forgetHierarchy(root)
	}
	unit, ok := pl.gangUnit(state, pod)
	if !ok {
		return // no gang waits for this pod
	}
	if !pl.shared.releaseOnce(unit) {
		return // this attempt's first failure released the waiting members
	}
	for _, m := range pl.groups.SubtreeMembersIn(unit, groups.Assumed) {
		if m.UID == pod.UID {
			continue
		}
		if wp := pl.handle.GetWaitingPod(m.UID); wp != nil {
			if wp.Reject(Name, msg) {
				klog.FromContext(ctx).V(4).Info("Rejected waiting gang member", "pod", klog.KObj(m), "because", msg)
			}
		}
	}
}

// gangUnit returns the highest gang on pod's chain: the members whose
// quorum pod counts toward, which wait for it and must let go when it
// fails. Siblings under a basic composite are not in it: releasing a child
// gang whenever its basic sibling fits nowhere made the two take turns
// forever, the waiting child re-activating the failing one each round.
// false when no group of the chain is a gang. The chain is read as the
// cache has it now (Unreserve may run long after the cycle's PreFilter),
// from the leaf the cycle's View already parsed.
func (pl *Gang) gangUnit(state fwk.CycleState, pod *corev1.Pod) (groups.Key, bool) {
	v := pl.groups.ViewFor(state, pod)
	if !v.Grouped {
		return groups.Key{}, false
	}
	return pl.groups.UnitOf(v.Leaf())
}

// Permit lets a member through once its whole hierarchy has quorum, and
// then lets every other waiting member through too.
func (pl *Gang) Permit(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, node string) (*fwk.Status, time.Duration) {
	v := pl.groups.ViewFor(state, pod)
	ok, short, err := pl.groups.ViewQuorum(v, groups.ByPlaced)
	if err != nil {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error()), 0
	}
	if ok {
		if msg := pl.reservedOnDeletedNode(pod, node, v); msg != "" {
			// Unreserve of this member releases the waiting ones.
			return fwk.NewStatus(fwk.Unschedulable, msg), 0
		}
		root, grouped := pl.hierarchyOf(pod.UID)
		waiting, pods := pl.waitingToAllow(pod, v)
		group := ""
		if grouped {
			group = root.String()
		}
		if !pl.shared.drain.admit(group, append(pods, pod)) {
			// Unreserve of this member releases the waiting ones: a gang
			// the stopping scheduler has not let through binds nothing.
			return fwk.NewStatus(fwk.Unschedulable, MsgStopping), 0
		}
		if grouped {
			pl.shared.attempts.allowed(root)
			pl.shared.deadlines.done(root)
		}
		for _, wp := range waiting {
			wp.Allow(Name)
		}
		return nil, 0
	}
	var own time.Duration
	leaf, tracked := pl.groups.GroupOf(pod.UID)
	if tracked {
		own = pl.groups.HierarchyWaitTimeout(leaf)
	}
	if tracked && pl.groups.HierarchyCount(leaf, groups.Is(groups.Assumed)) <= 1 {
		// First member of this attempt: pull siblings of its gang that sit
		// in backoff or the unschedulable queue forward instead of waiting
		// for a flush, and tell the user the gang is assembling.
		if unit, ok := pl.gangUnit(state, pod); ok {
			pl.activatePods(pl.groups.SubtreeMembersIn(unit, groups.Pending))
		}
		pl.eventIfStillWaiting(pod, own)
	}
	if root, grouped := pl.hierarchyOf(pod.UID); grouped {
		pl.shared.attempts.waiting(root, pod.UID)
		pl.shared.deadlines.progressFor(root, own)
	}
	// The framework's per-pod timer only backs up the gang's own deadline
	// (deadline.go), which moves with the gang's progress or, for a group
	// with a wait of its own, is that wait.
	return fwk.NewStatus(fwk.Wait, waitingMessage(short)), min(max(pl.args.permitLimit(), own), frameworkMaxPermitSeconds*time.Second)
}

// expireGang releases every waiting member of root because the gang stopped
// progressing in Permit, or waited its overall bound.
func (pl *Gang) expireGang(root groups.Key, reason string) {
	pl.shared.attempts.timedOut(root)
	pl.shared.room.forgetHierarchy(root)
	for _, m := range pl.groups.HierarchyMembersIn(root, groups.Assumed) {
		if wp := pl.handle.GetWaitingPod(m.UID); wp != nil {
			wp.Reject(Name, reason)
		}
	}
	klog.Background().V(2).Info("Released a gang waiting in Permit", "group", root, "reason", reason)
}

// heldEventLater emits WaitingForGang on a member held in PreEnqueue if
// it is still held after waitingEventDelay. Members of a gang whose pods are
// being created arrive within milliseconds of each other; an event for each
// early member would be an API write per pod for nothing.
func (pl *Gang) heldEventLater(pod *corev1.Pod) {
	if !pl.shared.events.schedule(pod.UID) {
		return
	}
	time.AfterFunc(waitingEventDelay, func() {
		pl.shared.events.scheduled(pod.UID)
		ok, short, err := pl.groups.Quorum(pod, groups.ByExisting)
		if ok || err != nil {
			return
		}
		leaf, tracked := pl.groups.GroupOf(pod.UID)
		if !tracked {
			return // deleted meanwhile
		}
		msg := fmt.Sprintf("%s (%s)", waitingMessage(short), short.Key)
		if short.Key != leaf {
			// The member's own group is complete and waits for another
			// group of its hierarchy, whose object carries the condition.
			// Say so where kubectl get pods and tools watching pod
			// conditions look.
			pl.markPodWaiting(pod, msg)
		}
		// A 1,000-pod gang being created would otherwise get an event
		// per early member. A group object's own condition has the
		// current count, so one member per interval tells the story;
		// label gangs have no object, and each member gets its event.
		if short.Key.Kind != groups.LabelKind && !pl.shared.events.groupTurn(short.Key, heldEventInterval) {
			return
		}
		pl.podEvent(pod, "WaitingForGang", msg)
	})
}

// markPodWaiting writes PodScheduled=False (reason Unschedulable) with msg
// on a member held in PreEnqueue, once per message. The framework writes
// pod conditions only for pods it tried, and a held member is never tried.
func (pl *Gang) markPodWaiting(pod *corev1.Pod, msg string) {
	if !pl.shared.events.firstCondition(pod.UID, msg) {
		return
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: msg, LastTransitionTime: metav1.Now(),
	}}}})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pl.handle.ClientSet().CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		klog.V(3).InfoS("Could not mark a held gang member as waiting", "pod", klog.KObj(pod), "err", err)
	}
}

// heldEventInterval spaces the WaitingForGang events of one held group.
const heldEventInterval = 10 * time.Second

// waitingEventDelay is how long a member waits in Permit before the user
// is told. Most gangs complete within milliseconds, and an event each would
// be one more API write per gang on the scheduler's hot path.
const waitingEventDelay = time.Second

// eventIfStillWaiting emits WaitingForGang on pod if it still waits in
// Permit after waitingEventDelay (a tenth of the Permit timeout if that is
// shorter), with the shortfall at that moment. own is the wait the pod's
// groups ask for (scheduleTimeoutSeconds), 0 for the profile's.
func (pl *Gang) eventIfStillWaiting(pod *corev1.Pod, own time.Duration) {
	bounds := fmt.Sprintf("released after %s without one, or %s in all", pl.args.permitTimeout(), pl.args.permitLimit())
	timeout := pl.args.permitTimeout()
	if own > 0 {
		timeout = min(own, frameworkMaxPermitSeconds*time.Second)
		bounds = fmt.Sprintf("released after %s in all, its PodGroup's scheduleTimeoutSeconds", timeout)
	}
	// A short Permit timeout gets a proportionally short delay, so the
	// event still comes well before the members are released.
	delay := min(waitingEventDelay, timeout/10)
	time.AfterFunc(delay, func() {
		if pl.handle.GetWaitingPod(pod.UID) == nil {
			return
		}
		ok, short, err := pl.groups.Quorum(pod, groups.ByPlaced)
		if ok || err != nil {
			return
		}
		pl.podEvent(pod, "WaitingForGang", fmt.Sprintf("reserved a node; waiting in Permit for the gang while its members keep arriving (%s): %s", bounds, waitingMessage(short)))
	})
}

// waitingToAllow returns the members of pod's hierarchy (v's) that wait in
// Permit and whose chain has quorum now, with their pods. Members of one
// leaf share a chain, so its quorum is counted once per leaf.
func (pl *Gang) waitingToAllow(pod *corev1.Pod, v *groups.View) ([]fwk.WaitingPod, []*corev1.Pod) {
	if !v.Grouped {
		return nil, nil
	}
	var waiting []fwk.WaitingPod
	var pods []*corev1.Pod
	quorum := map[groups.Key]bool{}
	for _, m := range pl.groups.HierarchyMembersIn(v.Leaf(), groups.Assumed) {
		if m.UID == pod.UID {
			continue
		}
		wp := pl.handle.GetWaitingPod(m.UID)
		if wp == nil {
			continue
		}
		leaf, tracked := pl.groups.GroupOf(m.UID)
		if !tracked {
			continue
		}
		ok, seen := quorum[leaf]
		if !seen {
			q, _, err := pl.groups.QuorumOf(leaf, groups.ByPlaced)
			ok = q && err == nil
			quorum[leaf] = ok
		}
		if ok {
			waiting = append(waiting, wp)
			pods = append(pods, m)
		}
	}
	return waiting, pods
}

// PostFilter runs when a member fits nowhere: it releases the waiting
// siblings and explains the failure on the group, unless the group's plan
// left the member out (pluginrt.Surplus). For gangs it stops any
// later pod-level preemption (DefaultPreemption, in a profile that keeps
// it) from evicting victims for one member of a gang that cannot be placed
// as a whole.
func (pl *Gang) PostFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	v := pl.groups.ViewFor(state, pod)
	if !v.Grouped {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if v.Err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, v.Err.Error())
	}
	ch, gang := v.Chain, v.Gang
	if gang && pluginrt.Surplus(state) {
		// The plan reaches the gang's minimum without this member: the
		// siblings waiting in Permit are the ones planned, and releasing
		// them would only make the gang start over. The member waits for
		// room (PhalanxPreemption, before this plugin, may make some).
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("the gang's plan reaches its minimum without member %s, which waits for room while the planned members go ahead", pod.Name))
	}
	pl.rejectWaiting(ctx, state, pod, fmt.Sprintf("member %s/%s fits on no node; the gang retries as a unit", pod.Namespace, pod.Name))
	if refusedInPreFilter(statuses, pl.handle) {
		// This plugin's PreFilter refused the member (an invalid or
		// incomplete group, one larger than the cluster, minResources
		// that do not fit) and already said why on the group.
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable)
	}
	if !gang {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if pl.validate(pod, v) != "" {
		// PreFilter rejected the group and already said why.
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable)
	}
	if ok, _, _ := pl.groups.ViewQuorum(v, groups.ByExisting); !ok {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable)
	}
	if pl.tooLarge(ch) != "" {
		// PreFilter rejected the gang for its size and already said why.
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable)
	}
	// The counts in the message are the cache's now, not the view's.
	leaf, ok := pl.groups.Get(v.Leaf())
	if !ok {
		leaf = ch.Leaf()
	}
	summary, byPlanner := pl.summarize(statuses)
	msg := fmt.Sprintf("member %s fits on no node (%s); %d/%d members placed", pod.Name, summary, leaf.Placed, leaf.MinCount)
	if !byPlanner {
		pl.shared.status.Set(leaf.Key, condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonUnschedulable, msg))
	}
	// PhalanxPreemption ran before and found nothing to wait for or evict
	// for this member, and this verdict ends the PostFilters: the member
	// gives up any node an earlier preemption nominated it to, as upstream's
	// preemption does for a pod. With no result, the queue would refile the
	// nomination from the member's status at every attempt and hold the
	// node's room against every pod of lower priority for good.
	return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride}}, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// refusedInPreFilter reports whether this plugin's PreFilter refused the
// pod: the framework then marks every node with its status.
func refusedInPreFilter(statuses fwk.NodeToStatusReader, h fwk.Handle) bool {
	nodes, err := h.SnapshotSharedLister().NodeInfos().List()
	if err != nil || len(nodes) == 0 {
		return false
	}
	st := statuses.Get(nodes[0].Node().Name)
	return st != nil && st.Plugin() == Name
}

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
				pl.shared.status.Set(key, condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonWaitingForPods, waitingMessage(short)))
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
	delete(pl.shared.released, k)
	pl.shared.mu.Unlock()
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

func (pl *Gang) activatePods(pending []*corev1.Pod) {
	if len(pending) == 0 {
		return
	}
	byName := make(map[string]*corev1.Pod, len(pending))
	for _, p := range pending {
		byName[p.Namespace+"/"+p.Name] = p
	}
	pl.handle.Activate(klog.Background(), byName)
}

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

type eventDedup struct {
	mu   sync.Mutex
	last map[types.UID]string
	// conds is last for the PodScheduled conditions of held members.
	conds map[types.UID]string
	// pending holds pods with a delayed event scheduled, so a member that
	// PreEnqueue sees many times gets one timer.
	pending map[types.UID]bool
	// groupLast is when a group last had a held-member event.
	groupLast map[groups.Key]time.Time
}

// groupTurn reports whether group k may have another event now, at most
// one per interval, and records it.
func (d *eventDedup) groupTurn(k groups.Key, interval time.Duration) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if last, ok := d.groupLast[k]; ok && now.Sub(last) < interval {
		return false
	}
	d.groupLast[k] = now // until the group is gone (forgetGroup)
	return true
}

func (d *eventDedup) forgetGroup(k groups.Key) {
	d.mu.Lock()
	delete(d.groupLast, k)
	d.mu.Unlock()
}

func newEventDedup() *eventDedup {
	return &eventDedup{last: map[types.UID]string{}, conds: map[types.UID]string{}, pending: map[types.UID]bool{}, groupLast: map[groups.Key]time.Time{}}
}

// firstCondition is first for the pod conditions markPodWaiting writes.
func (d *eventDedup) firstCondition(uid types.UID, msg string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conds[uid] == msg {
		return false
	}
	if len(d.conds) > 100000 {
		d.conds = map[types.UID]string{}
	}
	d.conds[uid] = msg
	return true
}

// schedule reports whether a delayed event may be scheduled for uid now.
func (d *eventDedup) schedule(uid types.UID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pending[uid] {
		return false
	}
	d.pending[uid] = true
	return true
}

// scheduled clears uid's pending delayed event.
func (d *eventDedup) scheduled(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.pending, uid)
}

func (d *eventDedup) first(uid types.UID, msg string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last[uid] == msg {
		return false
	}
	// Bounded memory: forgetting old pods only risks a repeated event.
	if len(d.last) > 100000 {
		d.last = map[types.UID]string{}
	}
	d.last[uid] = msg
	return true
}
