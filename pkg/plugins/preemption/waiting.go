package preemption

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
)

// Waiting for victims: what a group's last preemption evicted and planned
// (pendingEviction), and how long the group holds back from preempting again
// while those victims terminate and their devices are freed. This
// bookkeeping outlives the cycle that evicted, unlike the search.

// victimMargin is how long past the end of its grace period a group still
// waits for a victim: time for the eviction to reach the API server, for
// the kubelet to kill the containers and report, and for a claim's devices
// to be freed after. A victim still there then is taken to be stuck (its
// node lost, a finalizer nobody removes) and holds the group back no
// longer. With the default grace period of 30 s, the wait is two minutes.
const victimMargin = 90 * time.Second

// defaultGrace is the terminationGracePeriodSeconds the API server gives a
// pod that sets none.
const defaultGrace = 30 * time.Second

type pendingEviction struct {
	victims map[types.UID]pendingVictim
	// planned is the node the search's plan gives each pending member (by
	// planinput.PodKey), the room the evictions free for it.
	planned map[string]string
	at      time.Time
	// claims: some victim used ResourceClaims, whose devices are free only
	// once the claims no longer list it (the resourceclaim controller
	// frees them after the pod is gone).
	claims bool
}

// pendingVictim is one victim a group waits for.
type pendingVictim struct {
	name  string        // namespace/name
	grace time.Duration // its terminationGracePeriodSeconds
}

func (p *Preemption) remember(root groups.Key, victims []*corev1.Pod, planned map[string]string) {
	pe := &pendingEviction{victims: map[types.UID]pendingVictim{}, planned: planned, at: p.now()}
	for _, v := range victims {
		grace := defaultGrace
		if s := v.Spec.TerminationGracePeriodSeconds; s != nil {
			grace = time.Duration(*s) * time.Second
		}
		pe.victims[v.UID] = pendingVictim{name: v.Namespace + "/" + v.Name, grace: grace}
		pe.claims = pe.claims || len(v.Spec.ResourceClaims) > 0
	}
	p.mu.Lock()
	p.pending[root] = pe
	p.mu.Unlock()
}

// plannedNode is the node root's last preemption planned for pod, "" when
// there is none.
func (p *Preemption) plannedNode(root groups.Key, pod *corev1.Pod) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pe := p.pending[root]; pe != nil {
		return pe.planned[planinput.PodKey(pod)]
	}
	return ""
}

// pendingVictims returns root's remembered preemption (nil when none) and
// a copy of its victims: evict drops the victims it rejects in Permit
// while the caller reads them.
func (p *Preemption) pendingVictims(root groups.Key) (*pendingEviction, map[types.UID]pendingVictim) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pe := p.pending[root]
	if pe == nil {
		return nil, nil
	}
	return pe, maps.Clone(pe.victims)
}

// victimsLeft counts earlier victims of root that still exist, so a group
// never preempts again while its last victims terminate: a terminating pod
// is no candidate, yet its room counts as used, so a search then would
// pick a second, needless set of victims, or find none and drop the
// members' nominations to the room on its way. A victim counts while the
// API server still has it or the cycle's snapshot still holds its room
// (the snapshot lags the informer), and only until its wait ends
// (waitEnd), however long its grace period: a victim stuck terminating
// must not hold the group back for good.
func (p *Preemption) victimsLeft(root groups.Key, infos []fwk.NodeInfo) int {
	pe, victims := p.pendingVictims(root)
	if pe == nil {
		return 0
	}
	inSnapshot := map[types.UID]bool{}
	for _, ni := range infos {
		for _, pi := range ni.GetPods() {
			if _, ok := victims[pi.GetPod().UID]; ok {
				inSnapshot[pi.GetPod().UID] = true
			}
		}
	}
	now := p.now()
	left := 0
	gone := map[types.UID]string{}
	for uid, v := range victims {
		pod := p.victimPod(uid, v)
		if now.After(waitEnd(pe.at, v, pod)) {
			continue
		}
		if pod != nil || inSnapshot[uid] {
			left++
			continue
		}
		gone[uid] = v.name
	}
	if pe.claims && len(gone) > 0 {
		left += p.holdingDevices(gone)
	}
	if left == 0 {
		p.mu.Lock()
		if p.pending[root] == pe {
			delete(p.pending, root)
		}
		p.mu.Unlock()
	}
	return left
}

// victimPod is the victim as the API server has it, nil when it is gone
// (or a pod of the same name replaced it).
func (p *Preemption) victimPod(uid types.UID, v pendingVictim) *corev1.Pod {
	ns, n := splitKey(v.name)
	if pod, err := p.pods.Pods(ns).Get(n); err == nil && pod.UID == uid {
		return pod
	}
	return nil
}

// waitEnd is when a group stops waiting for victim v (pod, nil when gone)
// of its preemption at at: its grace period's end plus victimMargin. Once
// the victim is deleted, its deletionTimestamp is that end as the API
// server set it, counted from the delete (which a slow eviction sends
// late, and a later delete with a shorter grace period brings forward);
// before, the end is counted from the preemption.
func waitEnd(at time.Time, v pendingVictim, pod *corev1.Pod) time.Time {
	end := at.Add(v.grace)
	if pod != nil && pod.DeletionTimestamp != nil {
		end = pod.DeletionTimestamp.Time
	}
	return end.Add(victimMargin)
}

// holdingDevices counts the victims, gone from the API, that claims still
// list as consumers: their devices are not free yet, and planning as if
// they were would preempt again for room that is on its way.
func (p *Preemption) holdingDevices(victims map[types.UID]string) int {
	dm := p.handle.SharedDRAManager()
	if dm == nil {
		return 0
	}
	claims, err := dm.ResourceClaims().List()
	if err != nil {
		return 0
	}
	holding := map[types.UID]bool{}
	for _, c := range claims {
		for _, r := range c.Status.ReservedFor {
			if _, ok := victims[r.UID]; ok {
				holding[r.UID] = true
			}
		}
	}
	return len(holding)
}

func splitKey(k string) (string, string) {
	for i := 0; i < len(k); i++ {
		if k[i] == '/' {
			return k[:i], k[i+1:]
		}
	}
	return "", k
}
