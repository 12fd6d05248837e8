package inspect

import (
	"context"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/debugapi"
	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// zoneKey is always in the capacity table unless the caller picks keys.
const zoneKey = "topology.kubernetes.io/zone"

// Top lists every hierarchy by its root with its stage, and the room of
// the topology domains of keys (the zone and every group's topology key
// when keys is empty). Stages come from what the scheduler holds (its
// stored plans, Permit, evictions): nothing is planned, so it stays cheap
// with thousands of groups.
func (in *Inspector) Top(ctx context.Context, keys []string) (*debugapi.Top, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	infos, err := in.refresh(ctx)
	if err != nil {
		return nil, err
	}
	out := &debugapi.Top{TypeMeta: typeMeta("Top"), Answer: in.answer(len(infos)), Groups: []debugapi.TopGroup{}, Domains: []debugapi.DomainCapacity{}}
	waiting := map[string]bool{}
	for _, name := range in.names {
		in.profiles[name].real.IterateOverWaitingPods(func(wp fwk.WaitingPod) { waiting[string(wp.GetPod().UID)] = true })
	}
	usedKeys := map[string]bool{}
	for _, e := range in.fed.Entries() {
		if e.TopologyKey != "" {
			usedKeys[e.TopologyKey] = true
		}
		if !e.Exists || e.ParentName != "" {
			continue
		}
		tree, err := in.fed.TreeOf(e.Key)
		if err != nil {
			continue
		}
		out.Groups = append(out.Groups, in.topGroup(tree, waiting))
	}
	sort.SliceStable(out.Groups, func(i, j int) bool {
		a, b := out.Groups[i], out.Groups[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	if len(keys) == 0 {
		keys = []string{zoneKey}
		for k := range usedKeys {
			if k != zoneKey && k != corev1.LabelHostname {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys[1:])
	}
	out.Keys = keys
	nominated := in.profiles[in.names[0]].real.NominatedPodsForNode
	for _, key := range keys {
		out.Domains = append(out.Domains, capacity(infos, key, nominated)...)
	}
	return out, nil
}

func (in *Inspector) topGroup(tree *groups.Tree, waiting map[string]bool) debugapi.TopGroup {
	g := debugapi.TopGroup{GroupRef: ref(tree.Key), Policy: policy(tree.Gang)}
	s := stateIn(in.fed.Cache, tree)
	g.Min, g.Bound, g.Placed, g.Present = s.Min, s.Bound, s.Placed, s.Present
	held := placement.Resources{}
	inPermit, schedulerName := 0, ""
	for _, l := range leaves(tree) {
		g.Leaves++
		for _, m := range l.Members {
			switch m.State {
			case groups.Pending:
				g.Pending++
			case groups.Assumed, groups.Bound:
				for name, v := range placement.PodRequests(m.Pod) {
					held[name] += v
				}
			}
			if waiting[string(m.Pod.UID)] {
				inPermit++
			}
			if schedulerName == "" {
				schedulerName = m.Pod.Spec.SchedulerName
			}
		}
	}
	g.Held = quantities(held)
	conds := in.conditionsOf(tree.Key)
	since := func(reason string) *metav1.Time {
		for _, c := range conds {
			if c.Reason == reason {
				t := c.Since
				return &t
			}
		}
		return nil
	}
	p, _ := in.profileFor(schedulerName)
	msg := invalid(tree)
	if first := firstPending(tree); msg == "" && first != nil {
		var all []*corev1.Pod
		for _, l := range leaves(tree) {
			all = append(all, live(l)...)
		}
		msg = gangcore.Disagreement(first, all, tree.Info, in.fed.PriorityClasses)
	}
	switch {
	case msg != "":
		g.Stage, g.Since = debugapi.StageInvalid, since("Invalid")
	case satisfied(in.fed.Cache, tree.Key, groups.ByBound):
		g.Stage, g.Since = debugapi.StageScheduled, since("Scheduled")
	case !satisfied(in.fed.Cache, tree.Key, groups.ByExisting):
		g.Stage, g.Since = debugapi.StageWaitingForPods, since("WaitingForPods")
	case inPermit > 0:
		g.Stage = debugapi.StageWaitingInPermit
		if p != nil && p.plugins.Permits != nil {
			if t, ok := p.plugins.Permits.PermitSince(tree.Key); ok {
				g.Since = timeOf(t)
			}
		}
	case countState(tree, groups.Assumed) > 0:
		g.Stage = debugapi.StageBinding
	default:
		g.Stage, g.Since = debugapi.StageQueued, pendingSince(tree)
		if p == nil {
			break
		}
		if p.plugins.Victims != nil {
			if ev, ok := p.plugins.Victims.LastEviction(tree.Key); ok && len(ev.Left) > 0 {
				g.Stage, g.Since = debugapi.StagePreempting, timeOf(ev.At)
				break
			}
		}
		if p.plugins.Plans != nil {
			if sp, ok := p.plugins.Plans.StoredPlan(tree.Key); ok && sp.Infeasible != nil {
				g.Stage = debugapi.StageInfeasible
				if t := since("Unschedulable"); t != nil {
					g.Since = t
				}
			}
		}
	}
	return g
}

func satisfied(c *groups.Cache, k groups.Key, count groups.Counter) bool {
	ok, _, _ := c.Satisfied(k, count)
	return ok
}

// capacity sums the nodes of each domain of key: allocatable, what pods
// bound or assumed there request, what is nominated to pending pods, and
// what is left.
func capacity(infos []fwk.NodeInfo, key string, nominated func(string) []fwk.PodInfo) []debugapi.DomainCapacity {
	type sums struct {
		nodes                 int
		alloc, req, nom, free placement.Resources
	}
	byValue := map[string]*sums{}
	for _, ni := range infos {
		n := ni.Node()
		if n == nil {
			continue
		}
		v, ok := n.Labels[key]
		if !ok {
			continue
		}
		s := byValue[v]
		if s == nil {
			s = &sums{alloc: placement.Resources{}, req: placement.Resources{}, nom: placement.Resources{}, free: placement.Resources{}}
			byValue[v] = s
		}
		s.nodes++
		alloc, req := resourcesOf(ni.GetAllocatable()), resourcesOf(ni.GetRequested())
		nom := placement.Resources{}
		for _, p := range nominated(n.Name) {
			for name, q := range placement.PodRequests(p.GetPod()) {
				nom[name] += q
			}
		}
		for name, a := range alloc {
			if a == 0 {
				continue
			}
			s.alloc[name] += a
			s.req[name] += req[name]
			s.nom[name] += nom[name]
			s.free[name] += max(0, a-req[name]-nom[name])
		}
	}
	values := make([]string, 0, len(byValue))
	for v := range byValue {
		values = append(values, v)
	}
	sort.Strings(values)
	out := make([]debugapi.DomainCapacity, 0, len(values))
	for _, v := range values {
		s := byValue[v]
		out = append(out, debugapi.DomainCapacity{Key: key, Value: v, Nodes: s.nodes,
			Allocatable: quantities(s.alloc), Requested: quantities(nonZero(s.req)), Nominated: quantities(nonZero(s.nom)), Free: quantities(s.free)})
	}
	return out
}

func nonZero(r placement.Resources) placement.Resources {
	for k, v := range r {
		if v == 0 {
			delete(r, k)
		}
	}
	return r
}

// resourcesOf is the planner's reading of a NodeInfo resource, without
// ephemeral storage, which no group asks about in practice and which
// would crowd the table.
func resourcesOf(r fwk.Resource) placement.Resources {
	out := placement.Resources{corev1.ResourceCPU: r.GetMilliCPU(), corev1.ResourceMemory: r.GetMemory()}
	for name, v := range r.GetScalarResources() {
		if !strings.HasPrefix(string(name), "hugepages-") {
			out[name] = v
		}
	}
	return out
}
