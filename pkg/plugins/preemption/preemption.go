// Package preemption is workload-aware preemption: when a group cannot be
// placed, it evicts the cheapest set of lower-priority victims that lets
// the WHOLE group fit (inside one domain per topology constraint), treating
// disruptionMode: all groups and hierarchies as indivisible units. When no
// victim set can make the whole group fit, nothing is evicted.
//
// The search is pkg/placement.FindVictims; this package only gathers its
// input from the snapshot and the group cache (search.go), and acts on the
// answer: nominations, eviction through upstream's Executor (evict.go), a
// guard against preempting again for a group whose earlier victims are
// still terminating (waiting.go), and one search per group per change of
// the cluster, shared by its members (answers.go).
package preemption

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	upstream "k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	"k8s.io/utils/clock"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groupcache"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = pluginrt.PreemptionName

// Preemption implements the group-level PostFilter.
type Preemption struct {
	handle fwk.Handle
	groups *groupcache.Fed
	status *groupstatus.Writer
	pods   corelisters.PodLister
	pdbs   policylisters.PodDisruptionBudgetLister
	prober *probe.Prober
	// viewProber probes the diagnostics' framework (SearchVictims).
	viewProber planinput.ViewProber

	// podPreemption is upstream's evaluator with unit-aware victims, for
	// plain pods and best-effort group members (pods.go).
	podPreemption *upstream.Evaluator
	// executor is the evaluator's Executor, which evicts every victim of
	// both paths (evict.go).
	executor *upstream.Executor

	// clock tells the time of the waits for victims and of minimum
	// runtimes; nil is the real one.
	clock clock.PassiveClock
	// runtime is the profile's default and cap of minimum runtimes.
	runtime runtimePolicy

	// groupEpoch moves with every group object change (groupChanged).
	groupEpoch atomic.Uint64

	mu      sync.Mutex
	pending map[groups.Key]*pendingEviction
	// answers are the searches kept for the members of each hierarchy
	// root (answers.go).
	answers map[groups.Key]*sharedAnswer
	// wakes try a preemptor again when the protection it waits for ends
	// (protect.go).
	wakes map[string]*time.Timer
}

var (
	_ fwk.PostFilterPlugin = &Preemption{}
	_ pluginrt.Protections = &Preemption{}
)

// Factory returns the plugin's factory for the scheduler that rt serves.
func Factory(rt *pluginrt.Runtime) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		args, err := decodeArgs(obj)
		if err != nil {
			return nil, err
		}
		return newPreemption(ctx, h, rt, args)
	}
}

func newPreemption(ctx context.Context, h fwk.Handle, rt *pluginrt.Runtime, args pluginArgs) (fwk.Plugin, error) {
	inst, err := rt.Instance(ctx, h)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	fed, w := inst.Groups, inst.Status
	p := &Preemption{
		handle:  h,
		groups:  fed,
		status:  w,
		pods:    h.SharedInformerFactory().Core().V1().Pods().Lister(),
		pdbs:    h.SharedInformerFactory().Policy().V1().PodDisruptionBudgets().Lister(),
		pending: map[groups.Key]*pendingEviction{},
		prober:  planinput.NewProber(h),
		clock:   clock.RealClock{},
		runtime: args.runtimePolicy(),
	}
	if p.podPreemption, p.executor, err = newPodEvaluator(ctx, h, p); err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	fed.SubscribeGone(p.forgetGroup)
	fed.Subscribe(p.groupChanged)
	rt.Register(ctx, h, p)
	return p, nil
}

// forgetGroup drops the victims and the answer remembered for a hierarchy
// whose root is gone; victimsLeft only clears the victims when the same
// group asks again.
func (p *Preemption) forgetGroup(k groups.Key) {
	p.mu.Lock()
	delete(p.pending, k)
	delete(p.answers, k)
	p.mu.Unlock()
	p.stopWake(k.String())
	p.prober.Forget(k.String() + "#")
}

// Name returns the plugin name.
func (*Preemption) Name() string { return Name }

// noNomination is a PostFilter result that clears the pod's nominated node
// in the scheduler and, when one is set, in its status.
func noNomination() *fwk.PostFilterResult { return framework.NewPostFilterResultWithNominatedNode("") }

// PostFilter preempts for a group, or for a plain pod or best-effort group
// member pod by pod (pods.go). An invalid group is left to the other
// PostFilter plugins (Unschedulable lets the next one run).
func (p *Preemption) PostFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	v := p.groups.ViewFor(state, pod)
	if !v.Grouped {
		return p.preemptPod(ctx, state, pod, statuses)
	}
	if v.Err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if _, refused := pluginrt.GroupRefused(state); refused {
		// The group itself is invalid, incomplete or too large: evicting
		// cannot help.
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if !v.Gang {
		// Best-effort groups gain from every single pod placed.
		return p.preemptPod(ctx, state, pod, statuses)
	}
	ch, root := v.Chain, v.Chain.Root()
	logger := klog.FromContext(ctx)
	// A label gang or scheduler-plugins PodGroup has no group priority of
	// its own; the view then holds the pod's, which its members share
	// (PreFilter enforces it).
	prio, policy, err := v.Priority, v.Policy, v.PriorityErr
	if err != nil {
		return nil, fwk.NewStatus(fwk.Unschedulable, err.Error())
	}
	if policy == corev1.PreemptNever {
		msg := "not preempting: the group's preemptionPolicy is Never"
		p.status.Set(ch.Leaf().Key, groupstatus.Condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonUnschedulable, msg))
		return nil, fwk.NewStatus(fwk.Unschedulable, msg)
	}
	infos, err := p.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, fwk.AsStatus(err)
	}
	if left := p.victimsLeft(root.Key, infos); left > 0 {
		msg := fmt.Sprintf("waiting for %d preempted pods to terminate", left)
		// Victims may take their whole grace period: the group says why
		// it is still pending, as Gang's PostFilter would if this one
		// had not succeeded.
		p.status.Set(ch.Leaf().Key, groupstatus.Condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonUnschedulable, msg))
		if node := p.plannedNode(root.Key, pod); node != "" && p.nodeExists(node) {
			// The member keeps the node its victims are leaving. A failed
			// attempt without a nomination in its result makes the queue
			// refile the member's nomination from its status, which only
			// the member that preempted has: its siblings would lose the
			// freed room to any pod, even one of lower priority (a
			// victim's Job replacing its pod). Success, as for the
			// preemption itself, keeps later PostFilters from clearing it.
			return framework.NewPostFilterResultWithNominatedNode(node), fwk.NewStatus(fwk.Success, msg)
		}
		return nil, fwk.NewStatus(fwk.Unschedulable, msg)
	}

	search, tree, err := p.searchFor(ctx, root.Key, prio, infos)
	var inf *placement.Infeasible
	var noTree *treeError
	var prot *pluginrt.ProtectedVictims
	// When eviction cannot help, the member gives up any nomination an
	// earlier preemption left in its status, as upstream's preemption does
	// for a pod: the queue refiles it from the status at every failed
	// attempt without one in the result, and the member would hold the
	// node's room against every pod of lower priority for good.
	switch {
	case errors.As(err, &noTree):
		return nil, fwk.NewStatus(fwk.Unschedulable, noTree.err.Error())
	case errors.Is(err, errNoCandidates):
		return noNomination(), fwk.NewStatus(fwk.Unschedulable, err.Error())
	case errors.As(err, &prot):
		// The group waits for the protection to end, and is tried again
		// then: no cluster event marks that moment.
		msg := "preemption waits: " + prot.Error()
		pluginrt.MarkProtected(state, msg)
		p.status.Set(ch.Leaf().Key, groupstatus.Condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonUnschedulable, msg))
		key := root.Key
		p.wakeAt(key.String(), prot.Until, func() []*corev1.Pod { return p.groups.HierarchyMembersOf(key, groups.Is(groups.Pending)) })
		return noNomination(), fwk.NewStatus(fwk.Unschedulable, msg)
	case errors.As(err, &inf):
		return noNomination(), fwk.NewStatus(fwk.Unschedulable, "preemption cannot make the whole group fit: "+inf.Reason)
	case err != nil:
		return nil, fwk.AsStatus(fmt.Errorf("search victims for %s: %w", root.Key, err))
	}
	result, byKey := search.Result, search.Pods
	if len(result.Victims) == 0 {
		// The whole group fits without evicting anyone: this member failed
		// for another reason (a stale plan, another plugin's Filter), which
		// preemption cannot fix. Nominating the search's plan here would
		// leave promises the planner does not know of, and a member
		// nominated beside its siblings' planned nodes makes their Filter
		// fail, attempt after attempt.
		return nil, fwk.NewStatus(fwk.Unschedulable, "preemption would evict nothing: the whole group fits without it")
	}

	chosen := make([]*corev1.Pod, 0, len(result.Victims))
	for _, k := range result.Victims {
		chosen = append(chosen, byKey[k])
	}
	p.remember(root.Key, chosen, result.Plan.Assignments)
	// The freed room is reserved for the group's pending members.
	own := planinput.Nominate(logger, p.handle, tree, result.Plan.Assignments, false)
	go p.evict(context.WithoutCancel(ctx), &groupPreemptor{pod: pod, root: root.Key, prio: prio}, chosen, own)

	node := result.Plan.Assignments[planinput.PodKey(pod)]
	msg := fmt.Sprintf("preempting %d pods (%d units, highest priority %d) so the whole group fits", len(result.Victims), len(result.Units), result.MaxVictimPriority)
	logger.V(2).Info("Group preemption", "group", root.Key, "victims", result.Victims, "node", node)
	preemptions.Inc()
	victimsTotal.Add(float64(len(result.Victims)))
	p.status.Set(ch.Leaf().Key, groupstatus.Condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonUnschedulable, msg))
	if node == "" {
		return nil, fwk.NewStatus(fwk.Unschedulable, msg)
	}
	return framework.NewPostFilterResultWithNominatedNode(node), fwk.NewStatus(fwk.Success, msg)
}

func (p *Preemption) now() time.Time {
	if p.clock == nil {
		return time.Now()
	}
	return p.clock.Now()
}

func (p *Preemption) nodeExists(name string) bool {
	_, err := p.handle.SnapshotSharedLister().NodeInfos().Get(name)
	return err == nil
}
