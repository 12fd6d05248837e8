package pluginrt

import (
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// Promises keeps the room promised to pending members that the scheduling
// queue may have dropped, and nominates it again at the start of every
// scheduling cycle, before any pod's Filter reads the nominations.
//
// The queue drops a pod's nomination in two places Phalanx cannot hook:
// when it files a pod it has not seen yet (it takes the nomination the
// pod's status carries, usually none), and when a binding cycle fails (it
// clears it). The first loses a plan's node for a member the group cache
// saw before the queue did; the second loses the node of a member whose
// binding failed after its gang passed Permit. Either way another pod can
// take the room. Nominating again from the queue's own callbacks
// (PreEnqueue, queueing hints) is not possible: the queue runs them under
// its lock, which AddNominatedPod takes too. So the book is written
// anywhere (PreEnqueue only marks what it saw) and read by the scheduling
// loop, which holds no lock of the queue's.
//
// The zero Promises is an empty book; a nil *Promises keeps nothing.
type Promises struct {
	mu      sync.Mutex
	entries map[types.UID]*promise
	// n mirrors len(entries), so the cycles of a scheduler with nothing
	// promised cost one atomic load.
	n atomic.Int32
}

// PromiseKind says why a pending member holds a promise, and so when the
// promise ends.
type PromiseKind int

const (
	// PlanPromise is a plan's node for a member the queue had not filed
	// when the plan nominated it. It ends once the queue has filed the
	// member (and the node is nominated once more after that), or when the
	// plan goes.
	PlanPromise PromiseKind = iota
	// RetryPromise is the node of a member whose binding failed after its
	// gang passed Permit: its bound siblings wait for it there. It ends
	// when the member binds or leaves, or when the gang's recovery ends.
	RetryPromise
)

type promise struct {
	pod  *corev1.Pod
	node string
	kind PromiseKind
}

// Promise records node as promised to pod. A retry promise is never
// replaced by a plan's: a new plan moves it (Move) instead.
func (p *Promises) Promise(pod *corev1.Pod, node string, kind PromiseKind) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.entries[pod.UID]; old != nil && old.kind == RetryPromise && kind == PlanPromise {
		old.node = node
		return
	}
	if p.entries == nil {
		p.entries = map[types.UID]*promise{}
	}
	p.entries[pod.UID] = &promise{pod: pod, node: node, kind: kind}
	p.n.Store(int32(len(p.entries)))
}

// Move changes the node promised to pod, if it holds a promise: a new plan
// put it elsewhere.
func (p *Promises) Move(uid types.UID, node string) {
	if p == nil || p.n.Load() == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e := p.entries[uid]; e != nil {
		e.node = node
	}
}

// Withdraw ends pod's promise of kind (any kind for kinds empty) and
// returns the pod it was made to, nil when it held none. The nomination
// Keep made last stays with the framework: the caller drops it when the
// room must go back at once.
func (p *Promises) Withdraw(uid types.UID, kinds ...PromiseKind) *corev1.Pod {
	if p == nil || p.n.Load() == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.entries[uid]
	if e == nil {
		return nil
	}
	if len(kinds) > 0 {
		match := false
		for _, k := range kinds {
			match = match || e.kind == k
		}
		if !match {
			return nil
		}
	}
	delete(p.entries, uid)
	p.n.Store(int32(len(p.entries)))
	return e.pod
}

// Member is what Keep needs to know of a promised pod from the group
// cache.
type Member interface {
	StateOf(uid types.UID) (groups.State, bool)
	Queued(uid types.UID) bool
}

// Keep nominates every pending promised member to its node, and drops the
// promises that have ended: members bound, finished or gone, and plan
// promises of members the queue has filed (their nomination, made again
// here after the filing, now stays). A member being reserved or bound
// (assumed) is not nominated: the framework dropped its nomination when it
// assumed it, and its room is already counted. Call it from the scheduling
// loop only, never from a callback of the queue.
func (p *Promises) Keep(logger klog.Logger, n Nominator, members Member) {
	if p == nil || p.n.Load() == 0 {
		return
	}
	type nomination struct {
		pod  *corev1.Pod
		node string
	}
	var todo []nomination
	p.mu.Lock()
	for uid, e := range p.entries {
		s, tracked := members.StateOf(uid)
		switch {
		case !tracked || s == groups.Bound || s == groups.Finished:
			delete(p.entries, uid)
			continue
		case s == groups.Assumed:
			continue
		}
		todo = append(todo, nomination{e.pod, e.node})
		if e.kind == PlanPromise && members.Queued(uid) {
			delete(p.entries, uid)
		}
	}
	p.n.Store(int32(len(p.entries)))
	p.mu.Unlock()
	for _, t := range todo {
		pi, err := framework.NewPodInfo(t.pod)
		if err != nil {
			continue
		}
		n.AddNominatedPod(logger, pi, &fwk.NominatingInfo{NominatedNodeName: t.node, NominatingMode: fwk.ModeOverride})
	}
}

// Nominator is the part of the framework's handle that nominates pods.
type Nominator interface {
	AddNominatedPod(logger klog.Logger, pod fwk.PodInfo, nominatingInfo *fwk.NominatingInfo)
}

// PromisesOf returns the book of the scheduler i runs.
func PromisesOf(i *Instance) *Promises {
	p, _ := Shared(i, "promises", func() (*Promises, error) { return &Promises{}, nil })
	return p
}
