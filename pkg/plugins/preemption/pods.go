package preemption

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	policy "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultpreemption"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	upstream "k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// Pod-level preemption, for plain pods and members of best-effort groups.
//
// Upstream's DefaultPreemption sees Phalanx groups as unrelated pods: it
// would evict one member of a disruptionMode-all gang and leave the rest
// bound below minCount. PhalanxPreemption therefore serves these pods too,
// with upstream's evaluator (candidate nodes, the Filter re-run on each
// node, PDB-aware reprieve, node choice, eviction), but with victims that
// know the groups:
//   - the members of one all-mode unit on a node are removed and reprieved
//     together, and choosing any of them evicts the whole unit, wherever
//     its other members run;
//   - a grouped preemptor compares at its root group's priority, as group
//     preemption does; a victim at its own, and only a member at its
//     group's priority is part of the group's unit (victimOf).
//
// A pod this path does not help is answered UnschedulableAndUnresolvable,
// so a DefaultPreemption listed later in the profile cannot split a unit.

// unitsStateKey holds the unit index of one PostFilter call in its
// CycleState: the evaluator calls selectVictimsOnNode with a clone of it.
const unitsStateKey fwk.StateKey = Name + "/units"

// victimID is how preemption sees one placed pod.
type victimID struct {
	priority int32
	unit     string // highest all-mode group above the pod; "" alone
	kind     fwk.EntityKeyType
	// leaf is the group the pod is a member of, "" alone, and minCount
	// that group's gang minimum (0 when it is no gang): what its minimum
	// runtime starts from and what makes it surplus (minruntime.go).
	leaf     string
	minCount int
	// declared is the minimum runtime its group, or the pod outside a
	// group, declares; class names the PriorityClass whose annotation is
	// the default.
	declared *time.Duration
	class    string
	// shielded: the pod's unit is within its minimum runtime, so the pod
	// path does not offer it as a victim (set by the unit index only).
	shielded bool
}

// unitIndex describes every pod placed in one snapshot, and the priority
// the preemptor compares at. The pods are indexed on first use, by
// whichever dry run needs them first: a pod that may not preempt, or has
// no candidate node, never pays for it.
type unitIndex struct {
	preemptorPriority int32

	once  sync.Once
	build func(*unitIndex)
	byPod map[types.UID]victimID
	// members of each all-mode unit, on whatever node they run.
	members map[string][]*corev1.Pod
	// shieldedUntil is when the first protection of a pod below the
	// preemptor's priority ends; zero when none is protected.
	shieldedUntil time.Time
	built         atomic.Bool
}

// Clone shares the index: the dry runs of one PostFilter read one snapshot.
func (u *unitIndex) Clone() fwk.StateData { return u }

func (u *unitIndex) get() *unitIndex {
	u.once.Do(func() {
		u.build(u)
		u.built.Store(true)
	})
	return u
}

// podEvaluator wraps DefaultPreemption's methods; only victim selection
// and eligibility are Phalanx's.
type podEvaluator struct {
	*defaultpreemption.DefaultPreemption
	p *Preemption
}

// newPodEvaluator builds upstream's evaluator around Phalanx's victim
// selection, and its Executor, which group preemption evicts with too and
// which evicts by UID (victim.go).
// Preemption is synchronous: the asynchronous mode holds the
// preemptor in DefaultPreemption's PreEnqueue, which only knows its own
// evaluations. Upstream's own workload features stay off here, since the
// groups are Phalanx's.
func newPodEvaluator(ctx context.Context, h fwk.Handle, p *Preemption) (*upstream.Evaluator, *upstream.Executor, error) {
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	fts.EnableAsyncPreemption = false
	fts.EnableGenericWorkload = false
	fts.EnableCompositePodGroup = false
	fts.EnablePodGroupPreemptionPolicy = false
	args := &config.DefaultPreemptionArgs{MinCandidateNodesPercentage: 10, MinCandidateNodesAbsolute: 100}
	dp, err := defaultpreemption.New(ctx, args, h, fts)
	if err != nil {
		return nil, nil, err
	}
	guardEvictions(h, dp.Executor)
	pe := &podEvaluator{DefaultPreemption: dp, p: p}
	return upstream.NewEvaluator(Name, h, pe, dp.Executor), dp.Executor, nil
}

// preemptPod runs pod-level preemption for pod.
func (p *Preemption) preemptPod(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, m fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	infos, err := p.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	prio, _ := p.preemptorPriority(pod)
	idx := &unitIndex{preemptorPriority: prio, build: func(idx *unitIndex) {
		idx.byPod = map[types.UID]victimID{}
		idx.members = map[string][]*corev1.Pod{}
		// Terminating pods too: a unit's members are all of its pods, as
		// upstream's evaluator sees them.
		placed := p.placedPods(infos, nil, true)
		guard := p.guardOf(placed)
		for i, pp := range placed {
			v := pp.pi.GetPod()
			id := pp.id
			id.shielded = guard.shielded(i)
			if id.shielded && id.priority < prio {
				idx.shieldedUntil = earliest(idx.shieldedUntil, guard.unitUntil(i))
			}
			idx.byPod[v.UID] = id
			if id.unit != "" {
				idx.members[id.unit] = append(idx.members[id.unit], v)
			}
		}
	}}
	state.Write(unitsStateKey, idx)
	result, st := p.podPreemption.Preempt(ctx, state, pod, m)
	if !st.IsSuccess() && idx.built.Load() {
		if until := idx.shieldedUntil; !until.IsZero() {
			// Pods this one might have preempted were protected: it is
			// tried again when the first protection ends.
			p.wakeAt(string(pod.UID), until, func() []*corev1.Pod { return []*corev1.Pod{pod} })
		}
	}
	switch {
	case st.IsSuccess():
		// Counted by upstream's scheduler_preemption_victims; the
		// phalanx_ metrics are about group preemption.
		return result, st
	case st.Code() == fwk.Error:
		return result, st
	}
	return result, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "preemption: "+st.Message())
}

// victimOf is the priority preemption compares for a placed pod, and its
// eviction unit: the pod alone, its PodGroup with disruptionMode all, or
// the highest CompositePodGroup with disruptionMode all above it.
//
// A pod is always compared at its own priority, which admission resolved
// for its creator. It joins its group's unit only on the terms it could
// have been scheduled into the group: with the group's priority
// (PhalanxGang's PreFilter refuses members that differ). Labels of a
// running pod can be changed by anyone who may edit it, so a pod whose
// priority differs from its group's, or whose group has no priority to
// compare with (a missing PriorityClass), was not scheduled as a member
// and counts alone, as if it were in no group. Otherwise a priority-0 pod
// labelled into a disruptionMode-all group beside one pod of high priority
// would be evicted only with that pod, that is, never by a preemptor of
// that priority; and a group's author could lower what a pod of higher
// priority costs to evict.
//
// A pod that counts alone declares its own minimum runtime (an
// annotation); a member takes its group's, the nearest group of its chain
// that declares one, else its own.
func (p *Preemption) victimOf(pod *corev1.Pod) victimID {
	id := victimID{priority: groups.PodPriority(pod), kind: fwk.PodKeyType, class: pod.Spec.PriorityClassName}
	id.declared, _ = groups.MinRuntimeOf(pod.Annotations)
	ch, grouped, err := p.groups.ChainOf(pod)
	if !grouped || err != nil {
		return id
	}
	rp, _, ok := p.rootPriority(ch)
	if ok && rp != id.priority || !ok && !ch.Root().PriorityFromMembers {
		return id
	}
	// A member, on the terms above.
	id.leaf = ch.Leaf().Key.String()
	if ch.Leaf().Gang {
		id.minCount = ch.Leaf().MinCount
	}
	for _, g := range ch {
		if g.MinRuntime != nil {
			id.declared = g.MinRuntime
			break
		}
	}
	if c := ch.Root().PriorityClassName; c != "" {
		id.class = c
	}
	if !ok {
		// A label gang or scheduler-plugins PodGroup: never an all-mode
		// unit.
		return id
	}
	for _, g := range ch {
		if g.DisruptionAll {
			id.unit = g.Key.String()
			id.kind = fwk.PodGroupKeyType
			if g.Key.Kind == groups.CompositeKind {
				id.kind = fwk.CompositePodGroupKeyType
			}
		}
	}
	return id
}

// preemptorPriority is the priority and policy pod preempts with: its root
// group's when it is grouped.
func (p *Preemption) preemptorPriority(pod *corev1.Pod) (int32, corev1.PreemptionPolicy) {
	if ch, grouped, err := p.groups.ChainOf(pod); grouped && err == nil {
		if prio, pol, err := groups.EffectivePriority(pod, ch.Root(), p.groups.PriorityClasses); err == nil {
			return prio, pol
		}
	}
	return groups.PodPriority(pod), groups.PodPolicy(pod)
}

// rootPriority is the priority and policy of a chain's root, which are
// authoritative for every pod under it. ok is false for a label gang or a
// scheduler-plugins PodGroup, which have none of their own (their members
// share the pod's, and neither can be a disruptionMode-all unit), and for
// a root whose PriorityClass cannot be resolved.
func (p *Preemption) rootPriority(ch groups.Chain) (int32, corev1.PreemptionPolicy, bool) {
	if ch.Root().PriorityFromMembers {
		return 0, "", false
	}
	prio, pol, err := groups.ResolvePriority(ch.Root(), p.groups.PriorityClasses)
	return prio, pol, err == nil
}

// PodEligibleToPreemptOthers applies the group's preemption policy to its
// members, then upstream's checks (victims still terminating on the node
// the pod was nominated to).
func (e *podEvaluator) PodEligibleToPreemptOthers(ctx context.Context, pod *corev1.Pod, nominatedNodeStatus *fwk.Status) (bool, string) {
	if _, pol := e.p.preemptorPriority(pod); pol == corev1.PreemptNever {
		return false, "not eligible due to preemptionPolicy=Never."
	}
	return e.DefaultPreemption.PodEligibleToPreemptOthers(ctx, pod, nominatedNodeStatus)
}

// SelectVictimsOnNode groups the node's pods into victims (an all-mode
// unit's members on this node are one victim), lets upstream pick the
// fewest, most expendable victims that make the preemptor fit, and then
// adds the members of each chosen unit that run on other nodes.
func (e *podEvaluator) SelectVictimsOnNode(ctx context.Context, state fwk.CycleState, preemptor *corev1.Pod, nodeInfo fwk.NodeInfo, _ []*upstream.DomainVictim, pdbs []*policy.PodDisruptionBudget) ([]*corev1.Pod, int, *fwk.Status) {
	data, err := state.Read(unitsStateKey)
	if err != nil {
		return nil, 0, fwk.AsStatus(err)
	}
	idx := data.(*unitIndex).get()
	if prio := idx.preemptorPriority; groups.PodPriority(preemptor) != prio {
		// Upstream compares victims against the pod's own priority; a
		// shallow copy is enough to give it another.
		cp := *preemptor
		cp.Spec.Priority = &prio
		preemptor = &cp
	}

	// A victim per pod, except that the members of one all-mode unit on
	// this node are one victim, removed and reprieved together. Members
	// elsewhere free nothing on this node: they are added to the answer
	// below, so the node choice counts their cost.
	type group struct {
		id   victimID
		pods []fwk.PodInfo
	}
	var groupsHere []*group
	byUnit := map[string]*group{}
	for _, pi := range nodeInfo.GetPods() {
		id, ok := idx.byPod[pi.GetPod().UID]
		if !ok {
			id = e.p.victimOf(pi.GetPod())
		}
		if id.shielded {
			// Within its minimum runtime: it stays, as a pod of higher
			// priority would.
			continue
		}
		g := byUnit[id.unit]
		if g == nil || id.unit == "" {
			g = &group{id: id}
			groupsHere = append(groupsHere, g)
			if id.unit != "" {
				byUnit[id.unit] = g
			}
		}
		g.id.priority = max(g.id.priority, id.priority)
		g.pods = append(g.pods, pi)
	}
	victims := make([]*upstream.DomainVictim, 0, len(groupsHere))
	for _, g := range groupsHere {
		v, err := upstream.NewVictim(g.pods, g.id.priority, g.id.kind)
		if err != nil {
			return nil, 0, fwk.AsStatus(err)
		}
		victims = append(victims, &upstream.DomainVictim{Victim: v})
	}

	chosen, pdbViolations, st := e.DefaultPreemption.SelectVictimsOnNode(ctx, state, preemptor, nodeInfo, victims, pdbs)
	if !st.IsSuccess() {
		return chosen, pdbViolations, st
	}
	have := make(map[types.UID]bool, len(chosen))
	for _, v := range chosen {
		have[v.UID] = true
	}
	out := chosen
	for _, v := range chosen {
		id, ok := idx.byPod[v.UID]
		if !ok || id.unit == "" {
			continue
		}
		for _, m := range idx.members[id.unit] {
			if !have[m.UID] {
				have[m.UID] = true
				out = append(out, m)
			}
		}
	}
	return out, pdbViolations, nil
}
