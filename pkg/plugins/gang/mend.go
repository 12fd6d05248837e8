package gang

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// Recovery of a gang bound below its minimum.
//
// Permit lets a gang through once all of it is reserved, and each member
// then binds on its own. A binding the API server refuses (an admission
// policy, the node gone) leaves its siblings bound and running below the
// gang's minimum, and so does a scheduler that dies or loses its Lease in
// the middle of a gang's binds. Such a gang holds its room and cannot
// start; no event ever changes that by itself.
//
// So the gang gets one Permit timeout (permitWaitingTimeSeconds) to be made
// whole: the member whose binding failed keeps its node (a retry promise,
// pluginrt.Promises, nominated again after the queue's failure handling
// clears it) and retries there, or wherever a new plan beside its bound
// siblings puts it. A new scheduler that finds a gang partly bound, with
// members pending that were there before the binds, grants the same time
// from its first attempt at one of them. If the gang's bound members
// reach the minimum in time, nothing else happens. Otherwise the members a
// scheduler bound are evicted (DisruptionTarget, then deleted by UID), with
// events on each pod and on the group and GangIncomplete conditions on the
// group, so that their controllers recreate them and the gang starts over
// as a unit.
//
// Gangs below their minimum for other reasons are left alone: a gang this
// scheduler saw whole (members finished or deleted afterwards, or a minimum
// raised), one with members that succeeded or failed, and one whose only
// pending members were created after its binds (replacements).

// mendPoll is how soon an expired recovery looks again while members of
// its gang are being reserved or bound: a retry in flight may still make
// the gang whole, and evicting under it would leave that member alone.
const mendPoll = time.Second

// mends holds the open recoveries, by gang unit.
type mends struct {
	mu   sync.Mutex
	open map[groups.Key]*mend
	// whole holds the units this scheduler saw with their minimum bound,
	// until none of their members is bound any more.
	whole map[groups.Key]bool
	// evicting holds the units whose bound members a recovery is
	// evicting, with those members, until none of them is bound any more.
	evicting map[groups.Key]*eviction
	// nEvicting mirrors len(evicting): Permit reads it on every call.
	nEvicting atomic.Int32
}

// eviction is a recovery's eviction of its gang's bound members.
type eviction struct {
	victims map[types.UID]bool
	msg     string
}

func newMends() *mends {
	return &mends{open: map[groups.Key]*mend{}, whole: map[groups.Key]bool{}, evicting: map[groups.Key]*eviction{}}
}

type mend struct {
	started  time.Time
	deadline time.Time
	cause    string
	timer    *time.Timer
	// retrying are the members holding a retry promise.
	retrying map[types.UID]bool
}

// bindFailed runs in Unreserve for a member Permit had let through: its
// binding (or PreBind) failed. It opens the recovery of the member's gang
// and keeps the member's node for its retry.
func (pl *Gang) bindFailed(state fwk.CycleState, pod *corev1.Pod, node string) {
	v := pl.groups.ViewFor(state, pod)
	if !v.Grouped {
		return
	}
	unit, ok := pl.groups.UnitOf(v.Leaf())
	if !ok || pl.satisfiedByBound(unit) || !pl.siblingBoundOrBinding(unit, pod.UID) {
		// No gang, its minimum is bound without the member, or nothing of
		// it is bound or binding (a gang of one, or every member's bind
		// refused): it retries as any pod does, and holding the node would
		// only keep other pods off it while nothing waits there. Its own
		// group still says why it is pending, or a group that never had a
		// member bound would say nothing at all.
		pl.shared.status.Set(v.Leaf(), condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonBindFailed,
			fmt.Sprintf("the binding of member %s to node %s failed; it is scheduled again", pod.Name, node)))
		return
	}
	cause := fmt.Sprintf("the binding of member %s to node %s failed after the gang passed Permit", pod.Name, node)
	m := pl.openMend(unit, cause)
	pl.shared.mends.mu.Lock()
	m.retrying[pod.UID] = true
	pl.shared.mends.mu.Unlock()
	pl.shared.promises.Promise(pod, node, pluginrt.RetryPromise)
	pl.handle.EventRecorder().Eventf(pod, nil, corev1.EventTypeWarning, "GangBindFailed", "Binding",
		"%s; it retries on %s until %s, after which the gang's bound members are evicted so the gang starts over",
		cause, node, m.deadline.Format(time.RFC3339))
}

// siblingBoundOrBinding reports whether a member of unit other than uid
// is bound, or being reserved or bound (its bind may still succeed).
func (pl *Gang) siblingBoundOrBinding(unit groups.Key, uid types.UID) bool {
	if _, bound, _ := pl.groups.Satisfied(unit, groups.ByBound); bound > 0 {
		return true
	}
	for _, p := range pl.groups.SubtreeMembersIn(unit, groups.Assumed) {
		if p.UID != uid {
			return true
		}
	}
	return false
}

func (pl *Gang) satisfiedByBound(unit groups.Key) bool {
	done, _, _ := pl.groups.Satisfied(unit, groups.ByBound)
	return done
}

// mendIfLeftPartial opens the recovery of a gang that a scheduler left
// partly bound (it stopped or lost its Lease during the binds), when pod,
// pending, is one of the members the binds left behind. PreFilter calls it
// for every pending member of a gang that passed its checks.
func (pl *Gang) mendIfLeftPartial(pod *corev1.Pod, r *preFilterRead) {
	if !r.UnitOK || !r.mendAsked || pl.shared.mends.settled(r.Unit) {
		return
	}
	if r.UnitWhole || r.UnitBound == 0 {
		return
	}
	if reason := leftPartial(pod, r); reason != "" {
		pl.openMend(r.Unit, fmt.Sprintf("%s: %d/%d bound, member %s pending", reason, r.UnitBound, r.UnitNeed, pod.Name))
	}
}

// settled reports whether unit needs no look for a partial bind: its
// recovery is open, or this scheduler saw it whole.
func (ms *mends) settled(unit groups.Key) bool {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.open[unit] != nil || ms.whole[unit]
}

// leftPartial says why the unit of r, below its minimum with members
// bound, is a gang whose binds stopped half way, "" when it is not.
func leftPartial(pod *corev1.Pod, r *preFilterRead) string {
	if r.UnitAssumed > 0 {
		// This scheduler is reserving or binding members of it now.
		return ""
	}
	bound := r.ScheduledBound
	if len(bound) == 0 {
		// Only pods created on their nodes: no scheduler bound them.
		return ""
	}
	var lastBind time.Time
	for _, b := range bound {
		if b.Status.Phase == corev1.PodSucceeded || b.Status.Phase == corev1.PodFailed {
			return ""
		}
		if _, c := podutil.GetPodCondition(&b.Status, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionTrue && c.LastTransitionTime.After(lastBind) {
			lastBind = c.LastTransitionTime.Time
		}
	}
	for _, f := range r.Finished {
		if f.Status.Phase == corev1.PodSucceeded || f.Status.Phase == corev1.PodFailed {
			return "" // the gang ran
		}
	}
	if pod.CreationTimestamp.After(lastBind) {
		// A replacement of a member that was deleted: the binds had
		// nothing to do with it.
		return ""
	}
	return "found the gang partly bound by an earlier scheduler, which stopped or lost its lease during the gang's binds"
}

// openMend returns unit's open recovery, opening it with cause if there is
// none. A recovery keeps the deadline it opened with.
func (pl *Gang) openMend(unit groups.Key, cause string) *mend {
	ms := pl.shared.mends
	ms.mu.Lock()
	if m := ms.open[unit]; m != nil {
		ms.mu.Unlock()
		return m
	}
	timeout := pl.args.permitTimeout()
	now := time.Now()
	m := &mend{started: now, deadline: now.Add(timeout), cause: cause, retrying: map[types.UID]bool{}}
	ms.open[unit] = m
	m.timer = time.AfterFunc(timeout, func() { pl.mendDue(unit, m) })
	ms.mu.Unlock()
	recovery("opened")
	_, bound, need := pl.groups.Satisfied(unit, groups.ByBound)
	msg := fmt.Sprintf("%s; %d/%d bound: the gang has until %s to be made whole, or its bound members are evicted so it starts over",
		cause, bound, need, m.deadline.Format(time.RFC3339))
	pl.shared.status.Set(unit, condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonBindFailed, msg))
	pl.groupEvent(unit, corev1.EventTypeWarning, v1alpha1.ReasonBindFailed, msg)
	klog.Background().V(2).Info("Gang bound below its minimum; recovery started", "group", unit, "cause", cause, "deadline", m.deadline)
	return m
}

// mendMaybeDone closes unit's recovery once its minimum is bound, and
// keeps the memory of units seen whole. groupChanged calls it.
func (pl *Gang) mendMaybeDone(k groups.Key) {
	unit, ok := pl.groups.UnitOf(k)
	if !ok {
		return
	}
	done, bound, _ := pl.groups.Satisfied(unit, groups.ByBound)
	ms := pl.shared.mends
	ms.mu.Lock()
	switch {
	case done && bound > 0:
		ms.whole[unit] = true
	case bound == 0:
		// A new round of the group (a lane fed new pods) is judged anew.
		delete(ms.whole, unit)
	}
	m := ms.open[unit]
	if m == nil || !done {
		ms.mu.Unlock()
		return
	}
	delete(ms.open, unit)
	m.timer.Stop()
	ms.mu.Unlock()
	pl.endPromises(m)
	recovery("whole")
	klog.Background().V(2).Info("Gang made whole after a failed bind", "group", unit, "took", time.Since(m.started))
}

// mendDue runs at m's deadline: the gang is made whole, a retry is still
// in flight (look again shortly), or its bound members are evicted.
func (pl *Gang) mendDue(unit groups.Key, m *mend) {
	ms := pl.shared.mends
	ms.mu.Lock()
	if ms.open[unit] != m || pl.shared.lifetime.Err() != nil {
		ms.mu.Unlock()
		return
	}
	if done, _, _ := pl.groups.Satisfied(unit, groups.ByBound); !done && len(pl.groups.SubtreeMembersIn(unit, groups.Assumed)) > 0 {
		m.timer.Reset(mendPoll)
		ms.mu.Unlock()
		return
	}
	delete(ms.open, unit)
	ms.mu.Unlock()
	pl.endPromises(m)
	if done, _, _ := pl.groups.Satisfied(unit, groups.ByBound); done {
		recovery("whole")
		return
	}
	pl.evictIncomplete(pl.shared.lifetime, unit, m)
}

// endPromises withdraws the retry promises of m's members, and the
// nominations they kept. A failed attempt of a pending member leaves its
// nomination in place, so without this a member of a gang that can no
// longer be made whole (its siblings evicted or deleted) would hold its
// node against every other pod for as long as it stays pending.
//
// The pods the nomination kept off its node were refused by filters that
// a dropped nomination does not requeue (a pod's deletion or a node's
// change does), so every pending pod is tried again. A gang recovery
// ending with a member still pending is rare; listing the informer's pods
// then is cheaper than tracking, on every refusal, which nomination caused
// it.
func (pl *Gang) endPromises(m *mend) {
	dropped := false
	for uid := range m.retrying {
		pod := pl.shared.promises.Withdraw(uid, pluginrt.RetryPromise)
		if s, tracked := pl.groups.StateOf(uid); pod != nil && tracked && s == groups.Pending {
			pl.handle.DeleteNominatedPodIfExists(pod)
			dropped = true
		}
	}
	if dropped {
		pl.activateAllPending()
	}
}

// activateAllPending moves every unbound pod the queue holds as
// unschedulable or backing off to the active queue.
func (pl *Gang) activateAllPending() {
	lister := pl.podLister
	if lister == nil {
		lister = pl.handle.SharedInformerFactory().Core().V1().Pods().Lister()
	}
	pods, err := lister.List(labels.Everything())
	if err != nil {
		return
	}
	var pending []*corev1.Pod
	for _, p := range pods {
		if p.Spec.NodeName == "" && p.DeletionTimestamp == nil {
			pending = append(pending, p)
		}
	}
	pl.activatePods(pending)
}

// evictIncomplete evicts the members of unit a scheduler bound, which
// never reached the gang's minimum.
func (pl *Gang) evictIncomplete(ctx context.Context, unit groups.Key, m *mend) {
	logger := klog.FromContext(ctx)
	victims := pl.groups.SubtreeScheduledBound(unit)
	_, bound, need := pl.groups.Satisfied(unit, groups.ByBound)
	msg := fmt.Sprintf("the gang stayed below its minimum (%d/%d bound) for %s after %s: its %d members bound by the scheduler are evicted so that it starts over as a unit",
		bound, need, pl.args.permitTimeout(), m.cause, len(victims))
	pl.shared.status.Set(unit,
		condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonGangIncomplete, msg),
		condition(v1alpha1.DisruptionTarget, metav1.ConditionTrue, v1alpha1.ReasonGangIncomplete, msg))
	pl.groupEvent(unit, corev1.EventTypeWarning, v1alpha1.ReasonGangIncomplete, msg)
	// Until the victims are gone they still count toward quorum: a retry
	// of the failed member reaching Permit now would be let through beside
	// them and left bound alone once they go.
	ev := &eviction{victims: map[types.UID]bool{}, msg: "its gang's bound members are being evicted so that it starts over as a unit: " + msg}
	for _, v := range victims {
		ev.victims[v.UID] = true
	}
	pl.shared.mends.mu.Lock()
	pl.shared.mends.evicting[unit] = ev
	pl.shared.mends.nEvicting.Store(int32(len(pl.shared.mends.evicting)))
	pl.shared.mends.mu.Unlock()
	evicted := 0
	for _, v := range victims {
		// The cache's member lists are live: a pod that left the gang
		// (its labels changed) since is not this gang's to evict.
		if leaf, ok := pl.groups.GroupOf(v.UID); !ok || !pl.under(leaf, unit) {
			continue
		}
		if err := evictByUID(ctx, pl.handle, v, msg); err != nil {
			logger.Error(err, "Could not evict a member of a gang left below its minimum", "pod", klog.KObj(v), "group", unit)
			continue
		}
		evicted++
		pl.handle.EventRecorder().Eventf(v, nil, corev1.EventTypeWarning, v1alpha1.ReasonGangIncomplete, "Evicting", msg)
	}
	recovery("evicted")
	logger.Info("Evicted the bound members of a gang that stayed below its minimum", "group", unit, "evicted", evicted, "cause", m.cause)
}

// evictingReason says why a member of unit may not pass Permit now: its
// gang's recovery is evicting the bound members, some still bound. ""
// otherwise.
func (pl *Gang) evictingReason(unit groups.Key) string {
	ms := pl.shared.mends
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ev := ms.evicting[unit]
	if ev == nil {
		return ""
	}
	for uid := range ev.victims {
		if s, tracked := pl.groups.StateOf(uid); tracked && s == groups.Bound {
			return ev.msg
		}
	}
	delete(ms.evicting, unit)
	ms.nEvicting.Store(int32(len(ms.evicting)))
	return ""
}

// under reports whether leaf is unit or below it.
func (pl *Gang) under(leaf, unit groups.Key) bool {
	u, ok := pl.groups.UnitOf(leaf)
	return ok && u == unit
}

// evictByUID marks pod DisruptionTarget and deletes it, both by its UID: a
// pod recreated under its name meanwhile is another pod and is left alone,
// and counts as evicted.
func evictByUID(ctx context.Context, h fwk.Handle, pod *corev1.Pod, msg string) error {
	cs := h.ClientSet()
	cond := corev1.PodCondition{
		Type:               corev1.DisruptionTarget,
		Status:             corev1.ConditionTrue,
		ObservedGeneration: podutil.CalculatePodConditionObservedGeneration(&pod.Status, pod.Generation, corev1.DisruptionTarget),
		Reason:             v1alpha1.ReasonGangIncomplete,
		Message:            Name + ": " + msg,
		LastTransitionTime: metav1.Now(),
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   map[string]any{"conditions": []corev1.PodCondition{cond}},
	})
	if err != nil {
		return err
	}
	err = retry.OnError(retry.DefaultBackoff, schedutil.RetriableWithConflict, func() error {
		_, err := cs.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		return err
	})
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		// Gone, or the name is another pod's now (the API server refuses a
		// patch that would change metadata.uid).
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark %s DisruptionTarget: %w", klog.KObj(pod), err)
	}
	uid := pod.UID
	err = cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete %s: %w", klog.KObj(pod), err)
	}
	return nil
}

// groupEvent records an event on group k's object; label groups have none,
// and their members' events tell the story.
func (pl *Gang) groupEvent(k groups.Key, typ, reason, msg string) {
	ref := groupRef(k)
	if ref == nil {
		return
	}
	if info, ok := pl.groups.Get(k); ok {
		ref.UID = info.UID
	}
	pl.handle.EventRecorder().Eventf(ref, nil, typ, reason, "Scheduling", msg)
}

// groupRef is a reference to group k's object, nil for a label group.
func groupRef(k groups.Key) *corev1.ObjectReference {
	if k.Kind == groups.LabelKind {
		return nil
	}
	ref := &corev1.ObjectReference{Kind: k.Kind.String(), Namespace: k.Namespace, Name: k.Name}
	switch {
	case k.Dialect == groups.Phalanx:
		ref.APIVersion = v1alpha1.SchemeGroupVersion.String()
	case k.Dialect == groups.Native && k.Kind == groups.CompositeKind:
		ref.APIVersion = "scheduling.k8s.io/v1alpha3"
	case k.Dialect == groups.Native:
		ref.APIVersion = "scheduling.k8s.io/v1beta1"
	default:
		ref.APIVersion = "scheduling.x-k8s.io/v1alpha1"
	}
	return ref
}

// stop ends every recovery without acting on it, when the scheduler
// stops: the next scheduler judges the gangs it finds.
func (ms *mends) stop() {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for k, m := range ms.open {
		m.timer.Stop()
		delete(ms.open, k)
	}
}

// forget drops what the recoveries kept for group k, which is gone.
func (ms *mends) forget(k groups.Key) *mend {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	delete(ms.whole, k)
	delete(ms.evicting, k)
	ms.nEvicting.Store(int32(len(ms.evicting)))
	m := ms.open[k]
	if m != nil {
		m.timer.Stop()
		delete(ms.open, k)
	}
	return m
}

// evictingAny reports whether a recovery is evicting any gang, so Permit
// of a scheduler with none costs one atomic load.
func (ms *mends) evictingAny() bool { return ms.nEvicting.Load() > 0 }
