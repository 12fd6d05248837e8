// Package preemption is workload-aware preemption: when a group cannot be
// placed, it evicts the cheapest set of lower-priority victims that lets
// the WHOLE group fit (inside one domain per topology constraint), treating
// disruptionMode: all groups and hierarchies as indivisible units. When no
// victim set can make the whole group fit, nothing is evicted.
//
// The search is pkg/placement.FindVictims; this package only gathers its
// input from the snapshot and the group cache, and acts on the answer:
// nominations, eviction through upstream's Executor (evict.go), a guard
// against preempting again for a group whose earlier victims are still
// terminating, and one search per group per change of the cluster, shared
// by its members (answers.go).
package preemption

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	upstream "k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	"k8s.io/utils/clock"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = pluginrt.PreemptionName

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

// Preemption implements the group-level PostFilter.
type Preemption struct {
	handle fwk.Handle
	groups *groups.Fed
	status *groupstatus.Writer
	pods   corelisters.PodLister
	pdbs   policylisters.PodDisruptionBudgetLister
	prober *probe.Prober

	// podPreemption is upstream's evaluator with unit-aware victims, for
	// plain pods and best-effort group members (pods.go).
	podPreemption *upstream.Evaluator
	// executor is the evaluator's Executor, which evicts every victim of
	// both paths (evict.go).
	executor *upstream.Executor

	// clock tells the time of the waits for victims; nil is the real one.
	clock clock.PassiveClock

	// groupEpoch moves with every group object change (groupChanged).
	groupEpoch atomic.Uint64

	mu      sync.Mutex
	pending map[groups.Key]*pendingEviction
	// answers are the searches kept for the members of each hierarchy
	// root (answers.go).
	answers map[groups.Key]*sharedAnswer
}

var _ fwk.PostFilterPlugin = &Preemption{}

// Factory returns the plugin's factory for the scheduler that rt serves.
func Factory(rt *pluginrt.Runtime) func(context.Context, runtime.Object, fwk.Handle) (fwk.Plugin, error) {
	return func(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return newPreemption(ctx, h, rt)
	}
}

func newPreemption(ctx context.Context, h fwk.Handle, rt *pluginrt.Runtime) (fwk.Plugin, error) {
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
	// When eviction cannot help, the member gives up any nomination an
	// earlier preemption left in its status, as upstream's preemption does
	// for a pod: the queue refiles it from the status at every failed
	// attempt without one in the result, and the member would hold the
	// node's room against every pod of lower priority for good.
	switch {
	case errors.As(err, &noTree):
		return nil, fwk.NewStatus(fwk.Unschedulable, noTree.err.Error())
	case errors.Is(err, ErrNoCandidates):
		return noNomination(), fwk.NewStatus(fwk.Unschedulable, err.Error())
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

// treeError is a hierarchy searchFor could not read.
type treeError struct{ err error }

func (e *treeError) Error() string { return e.err.Error() }

// searchFor is root's victim search at prio over infos: the answer an
// earlier member got in the same state of the cluster when there is one
// (answers.go), else a search, whose tree is returned with it. An answer
// with victims is never shared, so it always comes with its tree.
func (p *Preemption) searchFor(ctx context.Context, root groups.Key, prio int32, infos []fwk.NodeInfo) (*Searched, *groups.Tree, error) {
	key, keyed := p.searchKeyOf(root, prio, infos)
	if keyed {
		if a := p.sharedSearch(root, key); a != nil {
			return a.search, nil, a.err
		}
	}
	tree, err := p.groups.TreeOf(root)
	if err != nil {
		return nil, nil, &treeError{err: err}
	}
	start := time.Now()
	searches.Inc()
	search, err := p.Search(ctx, p.handle, p.prober, tree, prio, infos, p.handle.NominatedPodsForNode, placement.Options{})
	if err == nil {
		klog.FromContext(ctx).V(4).Info("Searched victims", "group", root, "candidates", len(search.Candidates), "duration", time.Since(start))
	}
	if keyed {
		p.keepSearch(root, key, tree, searchAnswer{search: search, err: err})
	}
	return search, tree, err
}

// ErrNoCandidates says no running pod has a priority below the group's.
var ErrNoCandidates = errors.New("no lower-priority pods to preempt")

// Searched is the outcome of Search.
type Searched struct {
	Result *placement.Preemption
	// Pods are the candidate victims by placement key (PodKey), and
	// Candidates the search's view of them (priority, unit, PDB).
	Pods       map[string]*corev1.Pod
	Candidates map[string]placement.Victim
}

// Search is PostFilter's victim search for the hierarchy tree at priority
// prio: against the nodes infos, with the room nominated to pods outside
// the hierarchy taken from nominated, and the profile's filters run through
// pr over h. PostFilter passes its cycle's snapshot and handle; diagnostics
// pass a snapshot and a framework of the same profile of their own, so
// both search the same way. opts may only ask for explanations
// (ExplainDomains); the domain policy of group preemption is the
// planner's default. The error is ErrNoCandidates, an
// *placement.Infeasible when no set of victims makes the group fit, or a
// failure.
func (p *Preemption) Search(ctx context.Context, h fwk.Handle, pr *probe.Prober, tree *groups.Tree, prio int32, infos []fwk.NodeInfo, nominated func(string) []fwk.PodInfo, opts placement.Options) (*Searched, error) {
	_, members := planinput.PlanInput(tree)
	cons := p.constraints(ctx, h, pr, infos, members, prio)
	input, _, err := planinput.BuildInput(tree, cons)
	if err != nil {
		return nil, err
	}
	nodes := planinput.NodesFromSnapshot(infos, nominated, members)
	victims, byKey := p.candidates(infos, prio, members)
	if len(victims) == 0 {
		return nil, ErrNoCandidates
	}
	for i := range victims {
		for name, n := range cons.FreedDevices(byKey[victims[i].Key]) {
			victims[i].Requests[name] += n
		}
	}
	result, err := mostMembers(nodes, victims, input, prio, placement.Options{ExplainDomains: opts.ExplainDomains, Extra: cons.Extra(),
		Domains: cons.DeviceDomains(ctx, tree, input)})
	if err != nil {
		return nil, err
	}
	cands := make(map[string]placement.Victim, len(victims))
	for _, v := range victims {
		cands[v.Key] = v
	}
	return &Searched{Result: result, Pods: byKey, Candidates: cands}, nil
}

// mostMembers searches victims for as many pending members as eviction can
// make room for, not only those the gang's minimum needs: a member beyond
// minCount, or one joining a running gang, would otherwise wait forever
// beside a lower-priority pod. First all of them; failing that, for a
// single gang, the largest count between its minimum and all (room for k
// members is room for fewer, so a binary search finds it); for a
// hierarchy, its minimums.
func mostMembers(nodes []placement.Node, victims []placement.Victim, input *placement.Group, prio int32, opts placement.Options) (*placement.Preemption, error) {
	search := func(g *placement.Group) (*placement.Preemption, error) {
		return placement.FindVictims(nodes, victims, g, prio, placement.PreemptOptions{Options: opts})
	}
	result, err := search(everyMember(input))
	var inf *placement.Infeasible
	if !errors.As(err, &inf) {
		return result, err
	}
	if len(input.Children) > 0 || input.Policy != placement.Gang {
		return search(input)
	}
	result, err = search(input)
	if err != nil {
		return result, err
	}
	lo, hi := input.MinCount, len(input.Bound)+len(input.Pending)-1
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		g := *input
		g.MinCount = mid
		r, err := search(&g)
		switch {
		case errors.As(err, &inf):
			hi = mid - 1
		case err != nil:
			return nil, err
		default:
			result, lo = r, mid
		}
	}
	return result, nil
}

// everyMember is the tree with every gang leaf asking for all its members
// and every composite for all its children that have members. Without the
// latter, a basic composite (or a gang one whose minimum its running
// children already meet) is satisfied without its pending children, and
// the search evicts nothing for them: a child joining a running hierarchy,
// or gangs under a basic root, would wait forever beside lower-priority
// pods.
func everyMember(g *placement.Group) *placement.Group {
	c := *g
	if len(g.Children) == 0 {
		if c.Policy == placement.Gang {
			c.MinCount = max(c.MinCount, len(c.Bound)+len(c.Pending))
		}
		return &c
	}
	c.Children = make([]*placement.Group, len(g.Children))
	populated := 0
	for i, ch := range g.Children {
		c.Children[i] = everyMember(ch)
		if hasMembers(ch) {
			populated++
		}
	}
	if populated > c.MinGroupCount || c.Policy != placement.Gang {
		c.Policy = placement.Gang
		c.MinGroupCount = max(c.MinGroupCount, populated)
	}
	return &c
}

// hasMembers reports whether a subtree has a pending or bound member.
func hasMembers(g *placement.Group) bool {
	if len(g.Pending) > 0 || len(g.Bound) > 0 {
		return true
	}
	for _, ch := range g.Children {
		if hasMembers(ch) {
			return true
		}
	}
	return false
}

// constraints is the planner's view of the profile's filters for the
// victim search: a node the filters refuse a member on because of pods the
// group may evict is usable once they are evicted. Which pods those are is
// decided as upstream's preemption does per node: everything evictable is
// removed, then put back while the filters still pass.
func (p *Preemption) constraints(ctx context.Context, h fwk.Handle, pr *probe.Prober, infos []fwk.NodeInfo, members map[types.UID]bool, prio int32) *planinput.Constraints {
	c := planinput.ClusterConstraints(ctx, h, pr, infos)
	c.Evictable = func(v *corev1.Pod) bool {
		return !members[v.UID] && v.DeletionTimestamp == nil && p.victimOf(v).priority < prio
	}
	byName := make(map[string]fwk.NodeInfo, len(infos))
	for _, ni := range infos {
		if ni.Node() != nil {
			byName[ni.Node().Name] = ni
		}
	}
	c.Blockers = func(pod *corev1.Pod, node string) ([]string, bool) {
		ni, ok := byName[node]
		if !ok {
			return nil, false
		}
		blockers, ok, err := pr.Blockers(ctx, pod, ni, c.Evictable)
		if err != nil || !ok {
			return nil, false
		}
		keys := make([]string, 0, len(blockers))
		for _, b := range blockers {
			keys = append(keys, planinput.PodKey(b))
		}
		return keys, true
	}
	return c
}

// candidates lists every pod on a node with priority below prio, with its
// eviction unit: the pod alone, its PodGroup with disruptionMode all, or the
// highest CompositePodGroup with disruptionMode all above it.
func (p *Preemption) candidates(infos []fwk.NodeInfo, prio int32, members map[types.UID]bool) ([]placement.Victim, map[string]*corev1.Pod) {
	var out []placement.Victim
	var podInfos []fwk.PodInfo
	byKey := map[string]*corev1.Pod{}
	for _, ni := range infos {
		for _, pi := range ni.GetPods() {
			pod := pi.GetPod()
			if members[pod.UID] || pod.DeletionTimestamp != nil {
				continue
			}
			id := p.victimOf(pod)
			v := placement.Victim{
				Key:      planinput.PodKey(pod),
				Node:     ni.Node().Name,
				Requests: planinput.Requests(pod),
				Priority: id.priority,
				Unit:     id.unit,
				Created:  pod.CreationTimestamp.UnixNano(),
			}
			if v.Priority >= prio {
				// The members of a unit share its priority (victimOf), so
				// this drops a unit whole or not at all.
				continue
			}
			out = append(out, v)
			podInfos = append(podInfos, pi)
			byKey[v.Key] = pod
		}
	}
	p.markPDBViolations(out, podInfos)
	return out, byKey
}

// pdbVictim is one candidate for upstream's PDB accounting, with its index
// in the candidate list.
type pdbVictim struct {
	upstream.Victim
	i int
}

// markPDBViolations sets ViolatesPDB on the candidates whose eviction would
// break a PodDisruptionBudget, with upstream's accounting
// (FilterVictimsWithPDBViolation, which the pod path's evaluator uses too):
// the pods a budget selects use up its DisruptionsAllowed one by one, a pod
// already in its DisruptedPods uses none of it, and each one beyond the
// allowance violates it.
//
// The victim search's cost is a sum over the pods it evicts, not a count
// per budget of the set it tries, so which pods use up an allowance is
// settled here, before the search: the ones it evicts first (lowest
// priority, then youngest, as its cost orders them). Of a budget allowing
// N, the N cheapest pods then cost nothing, and evicting one more costs
// one violation.
func (p *Preemption) markPDBViolations(victims []placement.Victim, pods []fwk.PodInfo) {
	if p.pdbs == nil {
		return
	}
	pdbs, err := p.pdbs.List(labels.Everything())
	if err != nil || len(pdbs) == 0 {
		return
	}
	order := make([]int, len(victims))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		va, vb := &victims[a], &victims[b]
		return cmp.Or(cmp.Compare(va.Priority, vb.Priority), -cmp.Compare(va.Created, vb.Created), cmp.Compare(va.Key, vb.Key))
	})
	list := make([]pdbVictim, 0, len(order))
	for _, i := range order {
		v, err := upstream.NewVictim(pods[i:i+1], victims[i].Priority, fwk.PodKeyType)
		if err != nil {
			continue
		}
		list = append(list, pdbVictim{Victim: v, i: i})
	}
	violating, _ := upstream.FilterVictimsWithPDBViolation(list, pdbs)
	for _, v := range violating {
		victims[v.Victim.i].ViolatesPDB = true
	}
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
	p.mu.Lock()
	pe := p.pending[root]
	var victims map[types.UID]pendingVictim
	if pe != nil {
		// evict drops the victims it rejects in Permit while this runs.
		victims = maps.Clone(pe.victims)
	}
	p.mu.Unlock()
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
