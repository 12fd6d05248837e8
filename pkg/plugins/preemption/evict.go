package preemption

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	fwk "k8s.io/kube-scheduler/framework"
	upstream "k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
)

// Eviction, for both paths, is upstream's Executor, with its per-victim
// step, PreemptPod, replaced by one that evicts by UID (victim.go). The pod
// path hands the Executor a candidate node and lets it run whole (pods.go).
// A group's victims span many nodes, and the Executor takes a victim set
// only from its own evaluators (actuatePodGroupPreemption and
// prepareCandidate are unexported). evict therefore calls PreemptPod for
// each victim and adds what the Executor does around it: the victims in
// parallel, stop at the first failure, then clear the nominations of
// lower-priority pods to the victims' nodes.

// groupPreemptor is a preempting group as the Executor sees it.
type groupPreemptor struct {
	pod  *corev1.Pod // the member whose PostFilter preempts
	root groups.Key
	prio int32
}

var _ upstream.ExecutorPreemptor = &groupPreemptor{}

func (g *groupPreemptor) GetName() string      { return g.root.Name }
func (g *groupPreemptor) GetNamespace() string { return g.root.Namespace }

// UID is the group's key, not an object's UID: the Executor names the
// preemptor by it in each victim's Preempted event ("Preempted by group
// PodGroup ns/name on node ..."), and a label gang has no object of its
// own.
func (g *groupPreemptor) UID() types.UID { return types.UID(g.root.String()) }

// Type completes the event's "Preempted by group" and the victims'
// DisruptionTarget message ("... a higher priority group").
func (g *groupPreemptor) Type() string { return "group" }

func (g *groupPreemptor) SchedulerName() string { return g.pod.Spec.SchedulerName }

// Obj is the preempting member, which each victim's event is related to.
func (g *groupPreemptor) Obj() runtime.Object { return g.pod }

func (g *groupPreemptor) Pods() map[string]*corev1.Pod {
	return map[string]*corev1.Pod{g.pod.Name: g.pod}
}

func (g *groupPreemptor) Priority() int32 { return g.prio }

// victimNode is the candidate PreemptPod evicts one victim for; it reads
// only the node's name, for its logs and the Preempted event.
type victimNode string

func (n victimNode) Name() string                 { return string(n) }
func (n victimNode) Victims() *extenderv1.Victims { return &extenderv1.Victims{} }
func (n victimNode) NumPodGroupDisruptions() int  { return 0 }

// evict preempts a group's victims with the Executor's PreemptPod, in
// parallel (the profile's parallelism, as the Executor does: each victim
// costs two API requests, and one after another a gang that needs a
// thousand victims would wait minutes for its room). A victim waiting in
// Permit is rejected back to the queue instead of deleted; any other gets
// the DisruptionTarget condition, then is deleted, and is not deleted when
// the condition cannot be written (a Job would count the eviction as a
// failure of its own). The first victim of each group gets the group's
// DisruptionTarget condition too. As in the Executor, a failure stops the
// victims not yet started (the group preempts again once its wait for
// them ends, waitEnd); after a complete eviction, the pods of priority
// below the group's nominated to the victims' nodes lose their nomination,
// except the group's own members (own) just nominated there.
func (p *Preemption) evict(ctx context.Context, g *groupPreemptor, victims []*corev1.Pod, own []*corev1.Pod) {
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	msg := fmt.Sprintf("%s: preempted so that group %s can run", Name, g.root)
	var mu sync.Mutex
	var failed error
	marked := map[groups.Key]bool{}
	p.handle.Parallelizer().Until(ctx, len(victims), func(i int) {
		v := victims[i]
		inMemory, err := p.executor.PreemptPod(ctx, victimNode(v.Spec.NodeName), g, v, Name)
		if err != nil {
			mu.Lock()
			failed = err
			mu.Unlock()
			cancel()
			return
		}
		if inMemory {
			// Rejected in Permit: it leaves the snapshot when its
			// reservation is undone, and the API server never bound it, so
			// there is no termination to wait for.
			p.forgetVictim(g.root, v.UID)
		}
		if a, grouped, err := groups.Attach(v); grouped && err == nil {
			mu.Lock()
			first := !marked[a.Key]
			marked[a.Key] = true
			mu.Unlock()
			if first {
				p.status.Set(a.Key, groupstatus.Condition(v1alpha1.DisruptionTarget, metav1.ConditionTrue, v1alpha1.ReasonPreemptionByScheduler, msg))
			}
		}
	}, Name)
	if failed != nil {
		logger.Error(failed, "Group preemption stopped before every victim was evicted", "group", g.root)
		return
	}
	nodes := map[string]bool{}
	for _, v := range victims {
		nodes[v.Spec.NodeName] = true
	}
	if err := p.clearLowerNominations(ctx, g.prio, nodes, own); err != nil {
		// The nominations only delay those pods; the eviction stands.
		logger.Error(err, "Could not clear the nominations of lower-priority pods to the victims' nodes", "group", g.root)
	}
}

// forgetVictim drops a victim from the ones root waits for.
func (p *Preemption) forgetVictim(root groups.Key, uid types.UID) {
	p.mu.Lock()
	if pe := p.pending[root]; pe != nil {
		delete(pe.victims, uid)
	}
	p.mu.Unlock()
}

// clearLowerNominations ends the nominations of the pods of priority below
// prio to nodes, other than own, as the Executor does on the node it
// evicted on: such a pod may no longer fit there beside the preemptor, and
// without its nomination it is tried again at once, elsewhere, rather than
// after the preemptor has bound.
func (p *Preemption) clearLowerNominations(ctx context.Context, prio int32, nodes map[string]bool, own []*corev1.Pod) error {
	skip := make(map[types.UID]bool, len(own))
	for _, m := range own {
		skip[m.UID] = true
	}
	var errs []error
	for node := range nodes {
		for _, pi := range p.handle.NominatedPodsForNode(node) {
			pod := pi.GetPod()
			if skip[pod.UID] || groups.PodPriority(pod) >= prio {
				continue
			}
			if err := clearNomination(ctx, p.handle, pod); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return utilerrors.NewAggregate(errs)
}

// clearNomination writes an empty NominatedNodeName for pod: through the
// scheduler's API cacher when it has one, which also drops the nomination
// the scheduler keeps in memory, or else as a status patch, which the
// queue sees as the pod's update.
func clearNomination(ctx context.Context, h fwk.Handle, pod *corev1.Pod) error {
	if c := h.APICacher(); c != nil {
		_, err := c.PatchPodStatus(pod, nil, &fwk.NominatingInfo{NominatedNodeName: "", NominatingMode: fwk.ModeOverride})
		return err
	}
	if pod.Status.NominatedNodeName == "" {
		return nil
	}
	status := pod.Status.DeepCopy()
	status.NominatedNodeName = ""
	return schedutil.PatchPodStatus(ctx, h.ClientSet(), pod.Name, pod.Namespace, &pod.Status, status)
}
