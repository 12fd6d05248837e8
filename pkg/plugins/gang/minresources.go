package gang

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// The minResources gate of scheduler-plugins' PodGroups.
//
// scheduler-plugins does not try a PodGroup that sets minResources until
// the free capacity of all nodes together could hold minResources plus
// minMember pod slots: per node, allocatable minus the requests of the pods
// on it, the group's own pods not counted (their room is the group's), and
// the sum over nodes compared resource by resource. Where it could not, every
// member is refused in PreFilter, before anything is planned or reserved.
// Phalanx keeps that rule and its meaning, with two refinements:
//
//   - a node's free room never counts below zero, so an overcommitted node
//     does not hide another node's room (scheduler-plugins subtracts the
//     deficit or not depending on the order of its node list);
//   - when the members may preempt (their preemptionPolicy is not Never),
//     the requests of pods of lower priority count as free too. Every operator that writes minResources sets it to
//     the whole job, and scheduler-plugins' gate therefore stops such a job
//     from ever preempting; here the gate only refuses what no eviction
//     could make room for, and whether eviction does make the group fit is
//     decided by the planner and the group preemption, as for any gang.
//
// A minResources that the nodes' allocatable could not hold even if every
// node were empty is reported as such, not as a wait.

// roomPassTTL bounds how long a group that passed the gate is not checked
// again while its members are tried; an attempt's failure forgets the pass
// at once. scheduler-plugins keeps a pass for its Permit timeout.
func (pl *Gang) roomPassTTL() time.Duration { return pl.args.permitTimeout() }

// minRoom caches what the gate reads per node and the groups that passed.
type minRoom struct {
	mu    sync.Mutex
	nodes map[string]*roomNode
	// passed remembers, per leaf group, that it passed at a hierarchy
	// revision: the members of a 1,000-pod gang are not each summed over
	// every node.
	passed map[groups.Key]roomPass
}

type roomPass struct {
	root  groups.Key
	rev   uint64
	until time.Time
}

// roomNode is one node's numbers at one NodeInfo generation.
type roomNode struct {
	gen         int64
	alloc, used placement.Resources
	// byPriority holds the requests (and a pod slot each) of the node's
	// pods by priority; nil until a gate needs it at this generation.
	byPriority map[int32]placement.Resources
}

func newMinRoom() *minRoom {
	return &minRoom{nodes: map[string]*roomNode{}, passed: map[groups.Key]roomPass{}}
}

// resourcesOf reads a framework Resource in the planner's units (cpu in
// millicores); pods is the pod count, which Resource does not carry for
// requests.
func resourcesOf(r fwk.Resource, pods int64) placement.Resources {
	out := placement.Resources{
		corev1.ResourceCPU:              r.GetMilliCPU(),
		corev1.ResourceMemory:           r.GetMemory(),
		corev1.ResourceEphemeralStorage: r.GetEphemeralStorage(),
		corev1.ResourcePods:             pods,
	}
	for name, v := range r.GetScalarResources() {
		out[name] = v
	}
	return out
}

// entry returns ni's numbers, read again only when its generation moved.
// The caller holds m.mu.
func (m *minRoom) entryLocked(ni fwk.NodeInfo) *roomNode {
	name := ni.Node().Name
	e := m.nodes[name]
	if e != nil && e.gen == ni.GetGeneration() {
		return e
	}
	alloc := ni.GetAllocatable()
	e = &roomNode{
		gen:   ni.GetGeneration(),
		alloc: resourcesOf(alloc, int64(alloc.GetAllowedPodNumber())),
		used:  resourcesOf(ni.GetRequested(), int64(len(ni.GetPods()))),
	}
	m.nodes[name] = e
	return e
}

// below returns the requests of e's pods of priority below p. The caller
// holds m.mu and passes the NodeInfo e was read from.
func (e *roomNode) below(ni fwk.NodeInfo, p int32) placement.Resources {
	if e.byPriority == nil {
		e.byPriority = map[int32]placement.Resources{}
		for _, pi := range ni.GetPods() {
			prio := groups.PodPriority(pi.GetPod())
			sum := e.byPriority[prio]
			if sum == nil {
				sum = placement.Resources{}
				e.byPriority[prio] = sum
			}
			for name, v := range resourcesOf(pi.CalculateResource().Resource, 1) {
				sum[name] += v
			}
		}
	}
	out := placement.Resources{}
	for prio, sum := range e.byPriority {
		if prio >= p {
			continue
		}
		for name, v := range sum {
			out[name] += v
		}
	}
	return out
}

// prune forgets nodes that left the cluster, once they are a good part of
// the table. The caller holds m.mu.
func (m *minRoom) pruneLocked(infos []fwk.NodeInfo) {
	if len(m.nodes) <= 2*len(infos)+16 {
		return
	}
	live := make(map[string]bool, len(infos))
	for _, ni := range infos {
		live[ni.Node().Name] = true
	}
	for name := range m.nodes {
		if !live[name] {
			delete(m.nodes, name)
		}
	}
}

// passAt is leaf's pass, if one holds at now, as a memo of the hierarchy
// revision it was granted at.
func (m *minRoom) passAt(leaf groups.Key, now time.Time) groups.Memo {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.passed[leaf]
	if !ok || !now.Before(p.until) {
		return groups.Memo{}
	}
	return groups.Memo{Rev: p.rev, OK: true}
}

func (m *minRoom) pass(leaf, root groups.Key, rev uint64, until time.Time) {
	m.mu.Lock()
	m.passed[leaf] = roomPass{root: root, rev: rev, until: until}
	m.mu.Unlock()
}

// forgetHierarchy drops the passes of root's leaves: the attempt failed, and
// the next one looks at the cluster again.
func (m *minRoom) forgetHierarchy(root groups.Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for leaf, p := range m.passed {
		if p.root == root || leaf == root {
			delete(m.passed, leaf)
		}
	}
}

// forget drops what was kept for group k, which is gone.
func (m *minRoom) forget(k groups.Key) {
	m.mu.Lock()
	delete(m.passed, k)
	m.mu.Unlock()
}

// roomNeed is what the gate asks of the cluster for leaf: its minResources
// in the planner's units plus minCount pod slots, as scheduler-plugins adds
// minMember pods. nil when leaf sets no minResources.
func roomNeed(leaf groups.Info) placement.Resources {
	if len(leaf.MinResources) == 0 {
		return nil
	}
	need := placement.Resources{}
	for name, q := range leaf.MinResources {
		if name == corev1.ResourceCPU {
			need[name] = q.MilliValue()
		} else {
			need[name] = q.Value()
		}
	}
	need[corev1.ResourcePods] = int64(leaf.MinCount)
	return need
}

// gateNode is one node as the gate sums it: allocatable, what its pods
// request, what of that the group's own members request, and what pods the
// group may preempt request (nil when preemption is not considered).
type gateNode struct {
	alloc, used, own, reclaim placement.Resources
}

// roomSums adds up, over need's resources, the nodes' allocatable, their
// free room, and their free room counting the reclaimable requests. Each
// node contributes between 0 and its allocatable.
func roomSums(need placement.Resources, nodes []gateNode) (alloc, free, freeWithReclaim placement.Resources) {
	alloc, free, freeWithReclaim = placement.Resources{}, placement.Resources{}, placement.Resources{}
	for _, n := range nodes {
		for name := range need {
			a := n.alloc[name]
			alloc[name] += a
			f := min(max(a-n.used[name]+n.own[name], 0), a)
			free[name] += f
			freeWithReclaim[name] += min(max(f+n.reclaim[name], 0), a)
		}
	}
	return alloc, free, freeWithReclaim
}

// shortOf returns what have lacks of need, nil when nothing.
func shortOf(need, have placement.Resources) placement.Resources {
	var short placement.Resources
	for name, v := range need {
		if have[name] < v {
			if short == nil {
				short = placement.Resources{}
			}
			short[name] = v - have[name]
		}
	}
	return short
}

// only keeps the resources of r named in keys.
func only(r, keys placement.Resources) placement.Resources {
	out := placement.Resources{}
	for name := range keys {
		out[name] = r[name]
	}
	return out
}

// judgeRoom is the gate's verdict: "" when the nodes could hold need, else
// the reason, naming the group; never is set when not even empty nodes
// could. preempt says whether reclaimable requests count; prio is the
// priority below which they do.
func judgeRoom(group groups.Key, need placement.Resources, nodes []gateNode, preempt bool, prio int32) (msg string, never bool) {
	alloc, free, freeWithReclaim := roomSums(need, nodes)
	if short := shortOf(need, alloc); short != nil {
		return fmt.Sprintf("minResources of %s can never be met: it asks for %s in total, and the allocatable of all %d nodes together is %s; lower spec.minResources or add nodes",
			group, gangcore.Describe(need), len(nodes), gangcore.Amounts(only(alloc, short), true)), true
	}
	short := shortOf(need, free)
	if short == nil {
		return "", false
	}
	msg = fmt.Sprintf("waiting for free capacity: minResources of %s asks for %s in total; the cluster has %s free",
		group, gangcore.Describe(need), gangcore.Amounts(only(free, short), true))
	if preempt {
		more := false
		for name := range short {
			more = more || freeWithReclaim[name] > free[name]
		}
		short = shortOf(need, freeWithReclaim)
		if short == nil {
			return "", false
		}
		if more {
			msg += fmt.Sprintf(", %s counting pods of priority below %d", gangcore.Amounts(only(freeWithReclaim, short), true), prio)
		}
	}
	return msg + fmt.Sprintf(" (short %s)", gangcore.Describe(short)), false
}

// minResourcesWait returns why the pod's leaf group may not be tried yet
// under its minResources, "" when it may (or sets none). The group's own
// placed members come from r; the priority below which pods count as
// reclaimable is the hierarchy's, from v.
func (pl *Gang) minResourcesWait(v *groups.View, r *preFilterRead) string {
	leaf := v.Chain.Leaf()
	need := roomNeed(leaf)
	if need == nil || !r.roomAsked {
		return ""
	}
	if r.room.Covers(r.Rev, r.RevKnown) {
		return ""
	}
	infos, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return "" // the planner will judge
	}
	own := map[string]placement.Resources{}
	for _, m := range r.Placed {
		node := m.Node
		if node == "" && m.Pod != nil {
			node = m.Pod.Spec.NodeName
		}
		if node == "" || m.Pod == nil {
			continue
		}
		sum := own[node]
		if sum == nil {
			sum = placement.Resources{}
			own[node] = sum
		}
		for name, v := range placement.PodRequests(m.Pod) {
			sum[name] += v
		}
		sum[corev1.ResourcePods]++
	}
	// PreFilter refused a hierarchy whose priority cannot be resolved, so
	// the View's is the one its members schedule with.
	prio, policy := v.Priority, v.Policy
	preempt := policy != corev1.PreemptNever
	room := pl.shared.room
	room.mu.Lock()
	room.pruneLocked(infos)
	nodes := make([]gateNode, 0, len(infos))
	for _, ni := range infos {
		if ni.Node() == nil {
			continue
		}
		e := room.entryLocked(ni)
		nodes = append(nodes, gateNode{alloc: e.alloc, used: e.used, own: own[ni.Node().Name]})
	}
	msg, never := judgeRoom(leaf.Key, need, nodes, false, prio)
	if msg != "" && preempt && !never {
		// Only now are the nodes' pods read by priority: most gates pass
		// on free room alone.
		nodes = nodes[:0]
		for _, ni := range infos {
			if ni.Node() == nil {
				continue
			}
			e := room.entryLocked(ni)
			nodes = append(nodes, gateNode{alloc: e.alloc, used: e.used, own: own[ni.Node().Name], reclaim: e.below(ni, prio)})
		}
		msg, _ = judgeRoom(leaf.Key, need, nodes, true, prio)
	}
	room.mu.Unlock()
	if msg == "" && r.RevKnown {
		room.pass(leaf.Key, r.Root, r.Rev, r.now.Add(pl.roomPassTTL()))
	}
	return msg
}
