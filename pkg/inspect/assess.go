package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/debugapi"
	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// explainDomains is how many domains an infeasible group lists.
const explainDomains = 5

// leaves returns the leaf groups of a hierarchy.
func leaves(t *groups.Tree) []*groups.Tree {
	if t.Key.Kind != groups.CompositeKind {
		return []*groups.Tree{t}
	}
	var out []*groups.Tree
	for _, ch := range t.Children {
		out = append(out, leaves(ch)...)
	}
	return out
}

// live returns the members of a leaf that count: pending, assumed, bound.
func live(t *groups.Tree) []*corev1.Pod {
	var out []*corev1.Pod
	for _, m := range t.Members {
		if m.State != groups.Finished {
			out = append(out, m.Pod)
		}
	}
	return out
}

// firstPending is the member a scheduling attempt would try: a pending
// one, the first by name.
func firstPending(t *groups.Tree) *corev1.Pod {
	var first *corev1.Pod
	for _, l := range leaves(t) {
		for _, m := range l.Members {
			if m.State == groups.Pending && (first == nil || m.Pod.Name < first.Name) {
				first = m.Pod
			}
		}
	}
	return first
}

// tooLarge is PreFilter's size check over every leaf gang of the
// hierarchy, against the nodes' allocatable.
func tooLarge(t *groups.Tree, infos []fwk.NodeInfo) string {
	var alloc []placement.Resources
	for _, ni := range infos {
		n := ni.Node()
		if n == nil {
			continue
		}
		r := placement.Resources{}
		for name, q := range n.Status.Allocatable {
			if name == corev1.ResourceCPU {
				r[name] = q.MilliValue()
			} else {
				r[name] = q.Value()
			}
		}
		alloc = append(alloc, r)
	}
	for _, l := range leaves(t) {
		if !l.Gang {
			continue
		}
		if msg := gangcore.ExceedsAllocatable(l.MinCount, requestsOf(live(l)), alloc); msg != "" {
			return fmt.Sprintf("%s: %s", l.Key, msg)
		}
	}
	return ""
}

// assess is what a scheduling attempt of the hierarchy tree would make of
// it now: PreFilter's size check, the topology plugin's plan and, when it
// does not fit, the preemption plugin's victim search. ref is the member
// that attempt would be for. in.mu is held and infos is the fresh
// snapshot.
// classes resolves the group's priority: the cluster's PriorityClasses, or
// for fit those with the request's own laid over them.
func (in *Inspector) assess(ctx context.Context, p *profile, tree *groups.Tree, ref *corev1.Pod, infos []fwk.NodeInfo, classes schedulinglisters.PriorityClassLister) (*debugapi.Assessment, error) {
	a := &debugapi.Assessment{}
	if msg := tooLarge(tree, infos); msg != "" {
		a.Blocked = msg
		return a, nil
	}
	if p.plugins.Plans == nil {
		a.Blocked = fmt.Sprintf("profile %s does not plan whole groups (it has no %s): members are scheduled one at a time", p.name, pluginrt.TopologyName)
		return a, nil
	}
	pi, err := p.plugins.Plans.PlanInput(ctx, p.view(infos), tree)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", tree.Key, err)
	}
	opts := pi.Options
	opts.ExplainDomains = explainDomains
	a.Devices = deviceRoom(pi.Group, infos, opts)
	plan, err := placement.PlanGroup(pi.Nodes, pi.Group, opts)
	var inf *placement.Infeasible
	switch {
	case err == nil:
		a.Fits = true
		a.Placement = placementOf(plan, tree)
		if len(plan.Unplaced) > 0 && gangs(tree) {
			// The members beyond the minimum that the plan leaves out
			// fail their own attempt once the others are placed, and
			// PostFilter then preempts for them too.
			a.Preemption, err = in.surplus(ctx, p, tree, ref, infos, plan, classes)
		}
		return a, err
	case errors.As(err, &inf):
		a.Infeasible = infeasible(inf)
	default:
		return nil, fmt.Errorf("plan %s: %w", tree.Key, err)
	}
	a.Preemption, err = in.preempt(ctx, p, tree, ref, infos, classes)
	return a, err
}

// gangs reports whether the hierarchy has a gang anywhere: best-effort
// groups are preempted for pod by pod, which fit does not model.
func gangs(t *groups.Tree) bool {
	if t.Gang {
		return true
	}
	for _, ch := range t.Children {
		if gangs(ch) {
			return true
		}
	}
	return false
}

// surplus is the victim search the members a feasible plan leaves out
// meet: the plan's members placed (bound on their planned nodes), the
// others pending. Its placement is the whole hierarchy's.
func (in *Inspector) surplus(ctx context.Context, p *profile, tree *groups.Tree, first *corev1.Pod, infos []fwk.NodeInfo, plan *placement.Plan, classes schedulinglisters.PriorityClassLister) (*debugapi.Preemption, error) {
	placed := map[string][]*corev1.Pod{}
	var mark func(*groups.Tree) *groups.Tree
	mark = func(t *groups.Tree) *groups.Tree {
		c := *t
		c.Members = slices.Clone(t.Members)
		for i := range c.Members {
			m := &c.Members[i]
			// Plans key pods by UID (pluginrt.PlanReader).
			if node, ok := plan.Assignments[string(m.Pod.UID)]; ok && m.State == groups.Pending {
				m.State, m.Node = groups.Bound, node
				placed[node] = append(placed[node], m.Pod)
			}
		}
		c.Children = nil
		for _, ch := range t.Children {
			c.Children = append(c.Children, mark(ch))
		}
		return &c
	}
	after := mark(tree)
	nodes := make([]fwk.NodeInfo, 0, len(infos))
	for _, ni := range infos {
		if ni.Node() == nil || len(placed[ni.Node().Name]) == 0 {
			nodes = append(nodes, ni)
			continue
		}
		c := ni.Snapshot()
		for _, pod := range placed[ni.Node().Name] {
			pod = pod.DeepCopy()
			pod.Spec.NodeName = ni.Node().Name
			pi, err := framework.NewPodInfo(pod)
			if err != nil {
				return nil, err
			}
			c.AddPodInfo(pi)
		}
		nodes = append(nodes, c)
	}
	pr, err := in.preempt(ctx, p, after, first, nodes, classes)
	if err != nil || pr == nil || !pr.Possible {
		// Nothing to evict for them: they wait, and the plan stands.
		return nil, err
	}
	whole := placementOf(plan, tree)
	for pod, node := range pr.Placement.Pods {
		whole.Pods[pod] = node
	}
	whole.Unplaced = slices.DeleteFunc(whole.Unplaced, func(pod string) bool { _, ok := pr.Placement.Pods[pod]; return ok })
	pr.Placement = whole
	return pr, nil
}

// preempt is the preemption plugin's answer for a hierarchy that does not
// fit: its priority and policy as PostFilter resolves them, then the
// victim search.
func (in *Inspector) preempt(ctx context.Context, p *profile, tree *groups.Tree, ref *corev1.Pod, infos []fwk.NodeInfo, classes schedulinglisters.PriorityClassLister) (*debugapi.Preemption, error) {
	if p.plugins.Victims == nil {
		return &debugapi.Preemption{Reason: fmt.Sprintf("profile %s has no %s: groups do not preempt", p.name, pluginrt.PreemptionName)}, nil
	}
	root := tree.Info
	if root.PriorityFromMembers && ref != nil {
		// As PostFilter: the group's priority is its members'.
		root.Priority = ref.Spec.Priority
		if root.Priority == nil {
			zero := int32(0)
			root.Priority = &zero
		}
		root.PreemptionPolicy = ref.Spec.PreemptionPolicy
	}
	prio, pol, err := groups.ResolvePriority(root, classes)
	if err != nil {
		return &debugapi.Preemption{Reason: err.Error()}, nil
	}
	out := &debugapi.Preemption{Priority: prio}
	if pol == corev1.PreemptNever {
		out.Reason = "the group's preemptionPolicy is Never"
		return out, nil
	}
	searched, err := p.plugins.Victims.SearchVictims(ctx, p.view(infos), tree, prio, explainDomains)
	var inf *placement.Infeasible
	var prot *pluginrt.ProtectedVictims
	switch {
	case errors.Is(err, pluginrt.ErrNoCandidates):
		out.Reason = fmt.Sprintf("no running pod has a priority below the group's (%d)", prio)
		return out, nil
	case errors.As(err, &prot):
		out.Reason = "the group waits: " + prot.Error()
		return out, nil
	case errors.As(err, &inf):
		out.Reason = "evicting every pod of lower priority would not be enough: " + inf.Reason
		return out, nil
	case err != nil:
		return nil, fmt.Errorf("search victims for %s: %w", tree.Key, err)
	}
	out.Candidates = len(searched.Candidates)
	if len(searched.Result.Victims) == 0 {
		// PostFilter evicts nothing then; the plan failed for a reason
		// eviction does not change.
		out.Reason = "the victim search places the group without evicting anything; it waits for its next attempt"
		return out, nil
	}
	out.Possible = true
	out.Placement = placementOf(searched.Result.Plan, tree)
	for _, key := range searched.Result.Victims {
		pod, v := searched.Pods[key], searched.Candidates[key]
		vic := debugapi.Victim{Pod: pod.Namespace + "/" + pod.Name, Node: v.Node, Priority: v.Priority, ViolatesPDB: v.ViolatesPDB}
		if v.Unit != "" {
			if a, grouped, err := groups.Attach(pod); grouped && err == nil {
				vic.Group = a.Key.String()
			}
		}
		out.Victims = append(out.Victims, vic)
	}
	sort.Slice(out.Victims, func(i, j int) bool { return out.Victims[i].Pod < out.Victims[j].Pod })
	return out, nil
}

// requestsOf are the requests of each of members, as the planner and
// PhalanxGang's size check read them.
func requestsOf(members []*corev1.Pod) []placement.Resources {
	out := make([]placement.Resources, len(members))
	for i, m := range members {
		out[i] = placement.PodRequests(m)
	}
	return out
}
