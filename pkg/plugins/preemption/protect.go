package preemption

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// Minimum runtime and surplus, read from the snapshot for both paths (the
// rules are in minruntime.go), and the timers that try a preemptor again
// when the protection it waits for ends.

// placedPod is one pod of the snapshot as the search sees it.
type placedPod struct {
	pi   fwk.PodInfo
	node string
	id   victimID
}

// placedPods lists the snapshot's pods, except those skip names (the
// preemptor's own members) and, unless terminating is set, those
// terminating.
func (p *Preemption) placedPods(infos []fwk.NodeInfo, skip map[types.UID]bool, terminating bool) []placedPod {
	var out []placedPod
	for _, ni := range infos {
		for _, pi := range ni.GetPods() {
			pod := pi.GetPod()
			if skip[pod.UID] || pod.DeletionTimestamp != nil && !terminating {
				continue
			}
			out = append(out, placedPod{pi: pi, node: ni.Node().Name, id: p.victimOf(pod)})
		}
	}
	return out
}

// guard is the protection of every placed pod at one instant.
type guard struct {
	now   time.Time
	recs  []runRecord
	until []time.Time
	// units holds the latest protection end of each all-mode unit: a
	// unit goes whole or not at all, so one protected member shields it.
	// unitRuntime is the minimum runtime of the member that ends last.
	units       map[string]time.Time
	unitRuntime map[string]time.Duration
	ids         []victimID
}

func (p *Preemption) guardOf(placed []placedPod) *guard {
	pods, ids := make([]*corev1.Pod, len(placed)), make([]victimID, len(placed))
	for i, pp := range placed {
		pods[i], ids[i] = pp.pi.GetPod(), pp.id
	}
	return p.guardOfPods(pods, ids)
}

// guardOfPods is the guard of pods, whose victimOf are ids.
func (p *Preemption) guardOfPods(pods []*corev1.Pod, ids []victimID) *guard {
	g := &guard{now: p.now(), recs: make([]runRecord, len(pods)), ids: ids,
		units: map[string]time.Time{}, unitRuntime: map[string]time.Duration{}}
	classes := map[string]*time.Duration{}
	for i, pod := range pods {
		id := ids[i]
		class, seen := classes[id.class]
		if !seen {
			class = p.classRuntime(id.class)
			classes[id.class] = class
		}
		g.recs[i] = runRecord{group: id.leaf, minCount: id.minCount, bound: boundAt(pod),
			runtime: p.runtime.resolve(id.declared, class), created: pod.CreationTimestamp.UnixNano(), key: planinput.PodKey(pod)}
	}
	g.until = protectedUntil(g.recs)
	for i, id := range g.ids {
		if id.unit == "" {
			continue
		}
		switch end := g.units[id.unit]; {
		case g.until[i].After(end):
			g.units[id.unit], g.unitRuntime[id.unit] = g.until[i], g.recs[i].runtime
		case g.until[i].Equal(end):
			g.unitRuntime[id.unit] = max(g.unitRuntime[id.unit], g.recs[i].runtime)
		}
	}
	return g
}

// ProtectedUntil implements pluginrt.Protections for the reservations.
// A gang member's protection starts when its gang became whole, and an
// all-mode unit is protected while any of its members is: both depend on
// the group's bound members wherever they run, so those are read from the
// group cache beside the pods asked about.
func (p *Preemption) ProtectedUntil(pods []*corev1.Pod) []time.Time {
	out := make([]time.Time, len(pods))
	if p.runtime.cap <= 0 || len(pods) == 0 {
		return out
	}
	all := slices.Clone(pods)
	ids := make([]victimID, len(pods))
	seen := make(map[types.UID]bool, len(pods))
	for i, pod := range pods {
		ids[i], seen[pod.UID] = p.victimOf(pod), true
	}
	read := map[groups.Key]bool{}
	for i, pod := range pods {
		if ids[i].leaf == "" {
			continue
		}
		ch, grouped, err := p.groups.ChainOf(pod)
		if !grouped || err != nil {
			continue
		}
		for _, g := range ch {
			if wanted := g.Key == ch.Leaf().Key || g.Key.String() == ids[i].unit; !wanted || read[g.Key] {
				continue
			}
			read[g.Key] = true
			for _, m := range p.groups.SubtreeMembersIn(g.Key, groups.Bound) {
				if !seen[m.UID] {
					seen[m.UID] = true
					all, ids = append(all, m), append(ids, p.victimOf(m))
				}
			}
		}
	}
	g := p.guardOfPods(all, ids)
	for i := range pods {
		out[i] = g.unitUntil(i)
	}
	return out
}

// unitUntil is when the protection of placed pod i's unit (the pod alone
// outside one) ends.
func (g *guard) unitUntil(i int) time.Time {
	if u := g.ids[i].unit; u != "" {
		return g.units[u]
	}
	return g.until[i]
}

// shielded says whether placed pod i may not be evicted yet.
func (g *guard) shielded(i int) bool { return g.unitUntil(i).After(g.now) }

// runtimeOf is the minimum runtime that protects placed pod i's unit for
// longest.
func (g *guard) runtimeOf(i int) time.Duration {
	if u := g.ids[i].unit; u != "" {
		return g.unitRuntime[u]
	}
	return g.recs[i].runtime
}

// classRuntime is the minimum runtime PriorityClass name declares, nil when
// it declares none (or is unknown). A malformed annotation declares none:
// it is the cluster administrator's, and the scheduler reports it in its
// log rather than failing every preemptor.
func (p *Preemption) classRuntime(name string) *time.Duration {
	if name == "" || p.groups.PriorityClasses == nil {
		return nil
	}
	pc, err := p.groups.PriorityClasses.Get(name)
	if err != nil {
		return nil
	}
	d, why := groups.MinRuntimeOf(pc.Annotations)
	if why != "" {
		klog.Background().V(2).Info("Ignoring a PriorityClass's minimum runtime", "priorityClass", name, "reason", why)
	}
	return d
}

// boundAt is when pod was bound: its PodScheduled condition's transition
// to True, which the API server sets at the binding; else its start time
// (a pod created on its node has no binding). Zero for a pod the scheduler
// has only assumed.
func boundAt(pod *corev1.Pod) time.Time {
	if _, c := podutil.GetPodCondition(&pod.Status, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionTrue && !c.LastTransitionTime.IsZero() {
		return c.LastTransitionTime.Time
	}
	if pod.Spec.NodeName != "" && pod.Status.StartTime != nil {
		return pod.Status.StartTime.Time
	}
	return time.Time{}
}

// earliest is the earlier of two instants, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// wakeMargin is added to a protection's end before a waiting preemptor is
// tried again: binds are recorded to the second, and a retry a little late
// finds the victim free rather than one a little early finding it still
// protected and waiting for the queue's own retry.
const wakeMargin = time.Second

// wakeAt tries the pods pods returns again at at: a preemptor that waits
// only for a protection to end sees no cluster event when it does. One
// timer per key (a hierarchy root, or a pod): a later call replaces it.
func (p *Preemption) wakeAt(key string, at time.Time, pods func() []*corev1.Pod) {
	d := at.Sub(p.now()) + wakeMargin
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.wakes == nil {
		p.wakes = map[string]*time.Timer{}
	}
	if t := p.wakes[key]; t != nil {
		t.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(d, func() {
		p.mu.Lock()
		if p.wakes[key] == t {
			delete(p.wakes, key)
		}
		p.mu.Unlock()
		pluginrt.Activate(p.handle, pods())
	})
	p.wakes[key] = t
}

// stopWake drops key's timer.
func (p *Preemption) stopWake(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t := p.wakes[key]; t != nil {
		t.Stop()
		delete(p.wakes, key)
	}
}
