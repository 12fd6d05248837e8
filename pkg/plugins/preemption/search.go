package preemption

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	upstream "k8s.io/kubernetes/pkg/scheduler/framework/preemption"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// The victim search: gathering placement.FindVictims' input from the
// snapshot and the group cache (the candidate victims with their eviction
// units and PDB violations, the profile's filters as constraints) and asking
// for as many members as eviction can make room for. It decides nothing about
// acting on the answer, which PostFilter does, so it is kept apart from the
// plugin's extension points and from the waits that follow an eviction.

// treeError is a hierarchy searchFor could not read.
type treeError struct{ err error }

func (e *treeError) Error() string { return e.err.Error() }

// searchFor is root's victim search at prio over infos: the answer an
// earlier member got in the same state of the cluster when there is one
// (answers.go), else a search, whose tree is returned with it. An answer
// with victims is never shared, so it always comes with its tree.
func (p *Preemption) searchFor(ctx context.Context, root groups.Key, prio int32, infos []fwk.NodeInfo) (*searched, *groups.Tree, error) {
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
	search, expires, err := p.search(ctx, p.handle, p.prober, tree, prio, infos, p.handle.NominatedPodsForNode, placement.Options{})
	if err == nil {
		klog.FromContext(ctx).V(4).Info("Searched victims", "group", root, "candidates", len(search.Candidates), "duration", time.Since(start))
	}
	if keyed {
		p.keepSearch(root, key, tree, searchAnswer{search: search, err: err, expires: expires})
	}
	return search, tree, err
}

// errNoCandidates says no running pod has a priority below the group's.
// It is the diagnostics' sentinel, so they can tell it apart.
var errNoCandidates = pluginrt.ErrNoCandidates

// searched is the outcome of search.
type searched = pluginrt.VictimSearch

// search is PostFilter's victim search for the hierarchy tree at priority
// prio: against the nodes infos, with the room nominated to pods outside
// the hierarchy taken from nominated, and the profile's filters run through
// pr over h. PostFilter passes its cycle's snapshot and handle; diagnostics
// pass a snapshot and a framework of the same profile of their own, so
// both search the same way. opts may only ask for explanations
// (ExplainDomains); the domain policy of group preemption is the
// planner's default. The error is errNoCandidates, an
// *placement.Infeasible when no set of victims makes the group fit, or a
// failure.
//
// Pods within their minimum runtime are no candidates. When the group
// could fit only by evicting some of them, the error is a *pluginrt.ProtectedVictims that
// says until when it waits. The time returned is when the first
// protection of a pod below prio ends (zero when none is protected): the
// answer holds until then at most.
func (p *Preemption) search(ctx context.Context, h fwk.Handle, pr *probe.Prober, tree *groups.Tree, prio int32, infos []fwk.NodeInfo, nominated func(string) []fwk.PodInfo, opts placement.Options) (*searched, time.Time, error) {
	_, members := planinput.PlanInput(tree)
	cons := p.constraints(ctx, h, pr, infos, members, prio)
	input, _, err := planinput.BuildInput(tree, cons)
	if err != nil {
		return nil, time.Time{}, err
	}
	nodes := planinput.NodesFromSnapshot(infos, nominated, members)
	victims, byKey, shielded := p.candidates(infos, prio, members)
	var firstEnd time.Time
	for _, sv := range shielded {
		firstEnd = earliest(firstEnd, sv.until)
	}
	if len(victims) == 0 && len(shielded) == 0 {
		return nil, firstEnd, errNoCandidates
	}
	freed := func(v *placement.Victim) {
		for name, n := range cons.FreedDevices(byKey[v.Key]) {
			v.Requests[name] += n
		}
	}
	for i := range victims {
		freed(&victims[i])
	}
	popts := placement.Options{ExplainDomains: opts.ExplainDomains, Extra: cons.Extra(), Domains: cons.DeviceDomains(ctx, tree, input)}
	var result *placement.Preemption
	err = errNoCandidates
	if len(victims) > 0 {
		result, err = mostMembers(nodes, victims, input, prio, popts)
	}
	var inf *placement.Infeasible
	if len(shielded) > 0 && (errors.Is(err, errNoCandidates) || errors.As(err, &inf)) {
		// Whether the group waits for protection to end, and until when:
		// the same search with the protected pods as candidates.
		all := slices.Clone(victims)
		for _, sv := range shielded {
			v := sv.Victim
			v.Requests = maps.Clone(v.Requests)
			freed(&v)
			all = append(all, v)
		}
		hyp, herr := mostMembers(nodes, all, input, prio, popts)
		switch {
		case herr == nil && len(hyp.Victims) > 0:
			return nil, firstEnd, protectedBy(hyp.Victims, shielded)
		case errors.Is(err, errNoCandidates):
			result, err = hyp, herr
		}
	}
	if err != nil {
		return nil, firstEnd, err
	}
	cands := make(map[string]placement.Victim, len(victims))
	for _, v := range victims {
		cands[v.Key] = v
	}
	return &searched{Result: result, Pods: byKey, Candidates: cands}, firstEnd, nil
}

// protectedBy is the wait of a group whose search needs chosen, some of
// them shielded: until the last of those may go.
func protectedBy(chosen []string, shielded []shieldedVictim) *pluginrt.ProtectedVictims {
	in := make(map[string]bool, len(chosen))
	for _, k := range chosen {
		in[k] = true
	}
	prot := &pluginrt.ProtectedVictims{}
	for _, sv := range shielded {
		if !in[sv.Key] {
			continue
		}
		prot.Victims++
		if sv.until.After(prot.Until) {
			prot.Until, prot.MinRuntime = sv.until, sv.runtime
		}
	}
	return prot
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
// highest CompositePodGroup with disruptionMode all above it. The members
// of each gang beyond its minimum are marked Surplus. Pods within their
// minimum runtime are not candidates: they are returned apart, as
// shielded, with when their protection ends.
func (p *Preemption) candidates(infos []fwk.NodeInfo, prio int32, members map[types.UID]bool) ([]placement.Victim, map[string]*corev1.Pod, []shieldedVictim) {
	placed := p.placedPods(infos, members, false)
	guard := p.guardOf(placed)
	var out []placement.Victim
	var podInfos []fwk.PodInfo
	var shielded []shieldedVictim
	byKey := map[string]*corev1.Pod{}
	eligible := make([]bool, len(placed))
	at := make([]int, len(placed))
	for i, pp := range placed {
		pod := pp.pi.GetPod()
		id := pp.id
		v := placement.Victim{
			Key:      planinput.PodKey(pod),
			Node:     pp.node,
			Requests: placement.PodRequests(pod),
			Priority: id.priority,
			Unit:     id.unit,
			Created:  pod.CreationTimestamp.UnixNano(),
		}
		if v.Priority >= prio {
			// The members of a unit share its priority (victimOf), so
			// this drops a unit whole or not at all.
			continue
		}
		byKey[v.Key] = pod
		if guard.shielded(i) {
			shielded = append(shielded, shieldedVictim{Victim: v, until: guard.unitUntil(i), runtime: guard.runtimeOf(i)})
			continue
		}
		eligible[i], at[i] = true, len(out)
		out = append(out, v)
		podInfos = append(podInfos, pp.pi)
	}
	for i, spare := range surplusMembers(guard.recs, eligible) {
		if spare {
			out[at[i]].Surplus = true
		}
	}
	p.markPDBViolations(out, podInfos)
	return out, byKey, shielded
}

// shieldedVictim is a pod below the preemptor's priority that its minimum
// runtime protects until until.
type shieldedVictim struct {
	placement.Victim
	until   time.Time
	runtime time.Duration
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
