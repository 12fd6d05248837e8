package placement_test

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// This file is the independent check of a plan: it re-derives node
// eligibility and capacity from the inputs with its own code (no planner
// internals, no component-helpers), checks the invariants every plan must
// hold, and, for the cases where the planner promises exactness, compares
// feasibility with a brute-force oracle.

// oracleTolerates handles the toleration forms the generator produces and
// the tables use: Equal, Exists, the empty key and, when enabled, Gt and Lt
// on integer values.
func oracleTolerates(tols []corev1.Toleration, t corev1.Taint, comparisons bool) bool {
	for _, tol := range tols {
		if tol.Effect != "" && tol.Effect != t.Effect {
			continue
		}
		if tol.Key != "" && tol.Key != t.Key {
			continue
		}
		switch tol.Operator {
		case corev1.TolerationOpExists:
			return true
		case "", corev1.TolerationOpEqual:
			if tol.Value == t.Value {
				return true
			}
		case corev1.TolerationOpGt, corev1.TolerationOpLt:
			want, err1 := strconv.ParseInt(tol.Value, 10, 64)
			got, err2 := strconv.ParseInt(t.Value, 10, 64)
			if comparisons && err1 == nil && err2 == nil &&
				((tol.Operator == corev1.TolerationOpGt && got > want) || (tol.Operator == corev1.TolerationOpLt && got < want)) {
				return true
			}
		}
	}
	return false
}

func oracleMatchesRequirement(n placement.Node, r corev1.NodeSelectorRequirement, field bool) bool {
	v, ok := n.Labels[r.Key]
	if field {
		v, ok = n.Name, r.Key == "metadata.name"
	}
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		return ok && slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpNotIn:
		return !ok || !slices.Contains(r.Values, v)
	case corev1.NodeSelectorOpExists:
		return ok
	case corev1.NodeSelectorOpDoesNotExist:
		return !ok
	}
	return false
}

func oracleEligible(n placement.Node, s placement.Shape, comparisons bool) bool {
	if c, ok := s.NodeLimit[n.Name]; ok && c <= 0 {
		return false
	}
	if n.Unschedulable && !oracleTolerates(s.Tolerations, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}, comparisons) {
		return false
	}
	for _, t := range n.Taints {
		if (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) && !oracleTolerates(s.Tolerations, t, comparisons) {
			return false
		}
	}
	for k, v := range s.NodeSelector {
		if n.Labels[k] != v {
			return false
		}
	}
	if s.RequiredAffinity != nil {
		any := false
		for _, term := range s.RequiredAffinity.NodeSelectorTerms {
			if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
				continue
			}
			all := true
			for _, r := range term.MatchExpressions {
				all = all && oracleMatchesRequirement(n, r, false)
			}
			for _, r := range term.MatchFields {
				all = all && oracleMatchesRequirement(n, r, true)
			}
			any = any || all
		}
		if !any {
			return false
		}
	}
	return true
}

// oracleFits says whether node n, already holding the listed extra pods,
// can take one more pod of shape s.
func oracleFits(n placement.Node, extra []placement.Shape, s placement.Shape, comparisons bool) bool {
	if !oracleEligible(n, s, comparisons) {
		return false
	}
	if n.PodCount+len(extra)+1 > n.MaxPods {
		return false
	}
	for r, q := range s.Requests {
		if q == 0 || r == corev1.ResourcePods {
			continue
		}
		total := n.Requested[r] + q
		for _, e := range extra {
			total += e.Requests[r]
		}
		if total > n.Allocatable[r] {
			return false
		}
	}
	return true
}

// oracleCapacity is how many pods of shape s the nodes hold, found by adding
// pods one at a time; limit bounds the search.
func oracleCapacity(nodes []placement.Node, s placement.Shape, limit int, comparisons bool) int {
	total := 0
	for _, n := range nodes {
		var extra []placement.Shape
		for total < limit && len(extra) < oracleNodeCap(n, s) && oracleFits(n, extra, s, comparisons) {
			extra = append(extra, s)
			total++
		}
	}
	return total
}

// oracleNodeCap is how many pods of s alone node n may take under the
// shape's per-node limits and node caps.
func oracleNodeCap(n placement.Node, s placement.Shape) int {
	c := math.MaxInt
	if v, ok := s.NodeLimit[n.Name]; ok {
		c = v
	}
	for _, l := range s.Limits {
		if l.Key == "" && slices.Contains(s.Classes, l.Class) {
			c = min(c, l.Max)
		}
	}
	return c
}

// oracleCountable says whether capacity stays additive per node under the
// shape's constraints: no limit spans several nodes or reads another class.
func oracleCountable(s placement.Shape) bool {
	for _, l := range s.Limits {
		if l.Key != "" || !slices.Contains(s.Classes, l.Class) {
			return false
		}
	}
	return true
}

type oracleDomain struct {
	value string
	nodes []placement.Node
}

// oracleDomains lists the domains group g may take inside within, with the
// same pinning rule as the contract: the majority value of the bound pods of
// the subtree, ties to the smallest value.
func oracleDomains(all, within []placement.Node, g *placement.Group) (ds []oracleDomain, pinned bool) {
	if len(g.PreferredKeys) > 0 {
		// Only nodes carrying every preferred level are the group's.
		var labelled []placement.Node
		for _, n := range within {
			if oracleLabelled(n, g) {
				labelled = append(labelled, n)
			}
		}
		within = labelled
	}
	if g.TopologyKey == "" {
		return []oracleDomain{{nodes: within}}, false
	}
	byName := map[string]placement.Node{}
	for _, n := range all {
		byName[n.Name] = n
	}
	votes := map[string]int{}
	var walk func(*placement.Group)
	walk = func(x *placement.Group) {
		for _, b := range x.Bound {
			if n, ok := byName[b.Node]; ok {
				if v, ok := n.Labels[g.TopologyKey]; ok {
					votes[v]++
				}
			}
		}
		for _, c := range x.Children {
			walk(c)
		}
	}
	walk(g)
	if len(votes) > 0 {
		best, bestN := "", 0
		for v, n := range votes {
			if n > bestN || (n == bestN && v < best) {
				best, bestN = v, n
			}
		}
		d := oracleDomain{value: best}
		for _, n := range within {
			if n.Labels[g.TopologyKey] == best {
				d.nodes = append(d.nodes, n)
			}
		}
		return []oracleDomain{d}, true
	}
	byValue := map[string][]placement.Node{}
	for _, n := range within {
		if v, ok := n.Labels[g.TopologyKey]; ok {
			byValue[v] = append(byValue[v], n)
		}
	}
	for v, ns := range byValue {
		ds = append(ds, oracleDomain{value: v, nodes: ns})
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].value < ds[j].value })
	if len(ds) == 0 {
		ds = []oracleDomain{{}}
	}
	return ds, false
}

// homogeneousShape returns the one shape every pending pod of the leaves
// uses, compared by content.
func homogeneousShape(leaves ...*placement.Group) (placement.Shape, bool) {
	var shape *placement.Shape
	for _, l := range leaves {
		for _, p := range l.Pending {
			s := &l.Shapes[p.Shape]
			if shape == nil {
				shape = s
			} else if fmt.Sprint(*shape) != fmt.Sprint(*s) {
				return placement.Shape{}, false
			}
		}
	}
	if shape == nil {
		return placement.Shape{}, true
	}
	return *shape, oracleCountable(*shape)
}

// childMin is the pods a leaf below the root needs to count for its parent:
// its minCount for a gang, one pod for a basic group (Permit's rule too).
func childMin(l *placement.Group) int {
	if l.Policy == placement.Basic {
		return 1
	}
	return l.MinCount
}

func leafNeed(l *placement.Group) int {
	return max(0, childMin(l)-len(l.Bound))
}

// oracleExact returns whether a placement exists, for the trees where the
// planner promises exactness: a homogeneous leaf; a composite whose leaf
// children are unconstrained and share one shape; a composite with a single
// homogeneous leaf child. applies is false for other trees.
func oracleExact(nodes []placement.Node, root *placement.Group, comparisons bool) (feasible, applies bool) {
	if oracleAnyRefused(nodes, root) {
		return false, false
	}
	if len(root.Children) == 0 {
		shape, ok := homogeneousShape(root)
		if !ok {
			return false, false
		}
		if root.Policy == placement.Basic {
			return true, true
		}
		domains, _ := oracleDomains(nodes, nodes, root)
		for _, d := range domains {
			if len(root.Bound)+oracleCapacity(d.nodes, shape, len(root.Pending), comparisons) >= root.MinCount {
				return true, true
			}
		}
		return false, true
	}
	for _, c := range root.Children {
		if len(c.Children) > 0 {
			return false, false
		}
	}
	shape, ok := homogeneousShape(root.Children...)
	if !ok {
		return false, false
	}
	single := len(root.Children) == 1
	if !single {
		for _, c := range root.Children {
			if c.TopologyKey != "" || len(c.PreferredKeys) > 0 {
				return false, false
			}
		}
	}
	switch {
	case root.Policy == placement.Basic || root.MinGroupCount == 0:
		return true, true
	case root.MinGroupCount > len(root.Children):
		return false, true
	}
	domains, _ := oracleDomains(nodes, nodes, root)
	for _, d := range domains {
		if single {
			c := root.Children[0]
			inner, _ := oracleDomains(nodes, d.nodes, c)
			for _, cd := range inner {
				if len(c.Bound)+oracleCapacity(cd.nodes, shape, len(c.Pending), comparisons) >= childMin(c) {
					return true, true
				}
			}
			continue
		}
		// One shape and no sub-domains: capacity is additive, so the
		// smallest quorums that exist decide.
		var needs []int
		for _, c := range root.Children {
			if len(c.Bound)+len(c.Pending) >= childMin(c) {
				needs = append(needs, leafNeed(c))
			}
		}
		if len(needs) < root.MinGroupCount {
			continue
		}
		slices.Sort(needs)
		sum := 0
		for _, n := range needs[:root.MinGroupCount] {
			sum += n
		}
		if sum <= oracleCapacity(d.nodes, shape, sum, comparisons) {
			return true, true
		}
	}
	return false, true
}

// verify checks a PlanGroup result against the invariants and, where it
// applies, the oracle. It returns the first violation.
func verify(nodes []placement.Node, root *placement.Group, opts placement.Options, plan *placement.Plan, err error) error {
	if err != nil {
		var inf *placement.Infeasible
		if !errors.As(err, &inf) {
			return fmt.Errorf("valid input gave a non-infeasibility error: %v", err)
		}
		if plan != nil {
			return errors.New("an error came with a plan")
		}
		if handled, err := verifyRefusal(nodes, root, inf); handled {
			return err
		}
		if root.Policy == placement.Basic {
			return fmt.Errorf("a basic root failed: %v", err)
		}
		if inf.Group == "" || inf.Reason == "" {
			return fmt.Errorf("infeasibility without group or reason: %+v", inf)
		}
		if inf.Fits >= inf.Need {
			return fmt.Errorf("infeasibility with fits %d >= need %d: %v", inf.Fits, inf.Need, err)
		}
		if feasible, applies := oracleExact(nodes, root, opts.TaintComparisonOperators); applies && feasible {
			return fmt.Errorf("planner says infeasible (%v) but the oracle finds a placement", err)
		}
		return nil
	}
	if plan == nil {
		return errors.New("nil plan without error")
	}

	byName := map[string]placement.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	type podRef struct {
		leaf  *placement.Group
		shape placement.Shape
	}
	pods := map[string]podRef{}
	parent := map[*placement.Group]*placement.Group{}
	var leaves []*placement.Group
	var walk func(g *placement.Group)
	walk = func(g *placement.Group) {
		if len(g.Children) == 0 {
			leaves = append(leaves, g)
		}
		for _, p := range g.Pending {
			pods[p.Key] = podRef{leaf: g, shape: g.Shapes[p.Shape]}
		}
		for _, c := range g.Children {
			parent[c] = g
			walk(c)
		}
	}
	walk(root)

	// Every pending pod is either assigned or unplaced, never both.
	var unplaced []string
	for key := range pods {
		if _, ok := plan.Assignments[key]; !ok {
			unplaced = append(unplaced, key)
		}
	}
	slices.Sort(unplaced)
	if !slices.Equal(unplaced, plan.Unplaced) {
		return fmt.Errorf("unplaced %v, want %v", plan.Unplaced, unplaced)
	}

	// No node takes a pod it does not admit, or more than it holds.
	onNode := map[string][]placement.Shape{}
	keys := make([]string, 0, len(plan.Assignments))
	for key := range plan.Assignments {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		node := plan.Assignments[key]
		ref, ok := pods[key]
		if !ok {
			return fmt.Errorf("assigned pod %s is not pending", key)
		}
		n, ok := byName[node]
		if !ok {
			return fmt.Errorf("pod %s assigned to unknown node %s", key, node)
		}
		if !oracleEligible(n, ref.shape, opts.TaintComparisonOperators) {
			return fmt.Errorf("pod %s on node %s that its taints, selector or affinity exclude", key, node)
		}
		onNode[node] = append(onNode[node], ref.shape)
	}
	for name, shapes := range onNode {
		n := byName[name]
		if n.PodCount+len(shapes) > n.MaxPods {
			return fmt.Errorf("node %s overcommitted: %d+%d pods > %d", name, n.PodCount, len(shapes), n.MaxPods)
		}
		asks := map[corev1.ResourceName]bool{}
		sum := placement.Resources{}
		for _, s := range shapes {
			for r, q := range s.Requests {
				if q > 0 && r != corev1.ResourcePods {
					asks[r] = true
					sum[r] += q
				}
			}
		}
		for r := range asks {
			if n.Requested[r]+sum[r] > n.Allocatable[r] {
				return fmt.Errorf("node %s overcommitted on %s: %d+%d > %d", name, r, n.Requested[r], sum[r], n.Allocatable[r])
			}
		}
	}

	// Member limits hold in the final plan: every placed pod with a limit
	// finds fewer than Max other pods of the class in its domain. Node caps
	// hold per shape.
	type placedPod struct {
		key   string
		shape placement.Shape
		node  placement.Node
	}
	var placedPods []placedPod
	for _, key := range keys {
		placedPods = append(placedPods, placedPod{key, pods[key].shape, byName[plan.Assignments[key]]})
	}
	domainOf := func(n placement.Node, key string) (string, bool) {
		if key == "" {
			return n.Name, true
		}
		v, ok := n.Labels[key]
		return v, ok
	}
	for _, x := range placedPods {
		for _, l := range x.shape.Limits {
			d, ok := domainOf(x.node, l.Key)
			if !ok {
				continue
			}
			lim := l.Max
			if m, ok := l.PerDomain[d]; ok {
				lim = m
			}
			others := 0
			for _, y := range placedPods {
				if y.key == x.key || !slices.Contains(y.shape.Classes, l.Class) {
					continue
				}
				if dy, ok := domainOf(y.node, l.Key); ok && dy == d {
					others++
				}
			}
			if others > lim-1 {
				return fmt.Errorf("pod %s in %s=%s beside %d pods of class %s, limit %d", x.key, l.Key, d, others, l.Class, lim)
			}
		}
		if c, ok := x.shape.NodeLimit[x.node.Name]; ok {
			same := 0
			for _, y := range placedPods {
				if y.node.Name == x.node.Name && fmt.Sprint(y.shape) == fmt.Sprint(x.shape) {
					same++
				}
			}
			if same > c {
				return fmt.Errorf("node %s holds %d pods of a shape capped at %d there", x.node.Name, same, c)
			}
		}
	}

	// Placed pods of every constrained subtree share one domain: the one the
	// plan reports, and the pinned one when members are bound.
	placedIn := map[*placement.Group]int{}
	var check func(g *placement.Group) error
	check = func(g *placement.Group) error {
		var placed []string
		var collect func(x *placement.Group)
		collect = func(x *placement.Group) {
			for _, p := range x.Pending {
				if _, ok := plan.Assignments[p.Key]; ok {
					placed = append(placed, p.Key)
				}
			}
			for _, c := range x.Children {
				collect(c)
			}
		}
		collect(g)
		placedIn[g] = len(placed)
		if g.TopologyKey != "" && len(placed) > 0 {
			want, ok := plan.Domains[g.Name]
			if !ok {
				return fmt.Errorf("group %s placed pods but reports no domain", g.Name)
			}
			for _, key := range placed {
				v, ok := byName[plan.Assignments[key]].Labels[g.TopologyKey]
				if !ok || v != want {
					return fmt.Errorf("group %s: pod %s on %s=%q, outside domain %q", g.Name, key, g.TopologyKey, v, want)
				}
			}
			if ds, pinned := oracleDomains(nodes, nodes, g); pinned && ds[0].value != want {
				return fmt.Errorf("group %s: bound pods pin %q but the plan uses %q", g.Name, ds[0].value, want)
			}
		}
		for _, c := range g.Children {
			if err := check(c); err != nil {
				return err
			}
		}
		return nil
	}
	if err := check(root); err != nil {
		return err
	}

	// No gang is placed below its quorum.
	unsat := map[string]bool{}
	for _, u := range plan.Unsatisfied {
		unsat[u.Group] = true
	}
	// A basic group below the root counts once one pod (or child) is
	// placed; a basic root is always satisfied.
	var satisfied func(g *placement.Group) bool
	satisfied = func(g *placement.Group) bool {
		if g.Policy == placement.Basic && g == root {
			return true
		}
		if len(g.Children) == 0 {
			return len(g.Bound)+placedIn[g] >= childMin(g)
		}
		n := 0
		for _, c := range g.Children {
			if satisfied(c) {
				n++
			}
		}
		if g.Policy == placement.Basic {
			return n > 0
		}
		return n >= g.MinGroupCount
	}
	var quorum func(g *placement.Group) error
	quorum = func(g *placement.Group) error {
		if placedIn[g] > 0 && !satisfied(g) {
			return fmt.Errorf("gang %s has %d pods placed but no quorum", g.Name, placedIn[g])
		}
		if unsat[g.Name] && placedIn[g] > 0 {
			return fmt.Errorf("group %s is reported unsatisfied but has %d pods placed", g.Name, placedIn[g])
		}
		for _, c := range g.Children {
			if err := quorum(c); err != nil {
				return err
			}
		}
		return nil
	}
	if err := quorum(root); err != nil {
		return err
	}
	if !satisfied(root) {
		return fmt.Errorf("plan returned for root %s without its quorum", root.Name)
	}

	if hasPreferred(root) {
		return verifyPreferred(nodes, root, opts, plan)
	}

	// Where the planner is exact, it also places everything that fits and,
	// for a leaf, in the domain the policy asks for.
	if len(root.Children) == 0 {
		if shape, ok := homogeneousShape(root); ok {
			return verifyLeafChoice(nodes, root, opts, plan, shape, placedIn[root])
		}
	}
	return nil
}

// verifyLeafChoice checks a homogeneous leaf root: its placed count is the
// most its domain holds, and, unpinned under BestFit, no other feasible
// domain ranks before the chosen one.
func verifyLeafChoice(nodes []placement.Node, root *placement.Group, opts placement.Options, plan *placement.Plan, shape placement.Shape, placed int) error {
	domains, pinned := oracleDomains(nodes, nodes, root)
	pending := len(root.Pending)
	type score struct{ est, left int }
	scoreOf := func(d oracleDomain) score {
		c := oracleCapacity(d.nodes, shape, 1<<20, opts.TaintComparisonOperators)
		return score{est: min(pending, c), left: c - min(pending, c)}
	}
	chosen := domains[0]
	if root.TopologyKey != "" && !pinned {
		v, ok := plan.Domains[root.Name]
		if !ok {
			// Only a key no node carries leaves a satisfied group without a domain.
			if placed > 0 || domains[0].value != "" {
				return fmt.Errorf("no domain reported; %d pods placed, first domain %q", placed, domains[0].value)
			}
			return nil
		}
		for _, d := range domains {
			if d.value == v {
				chosen = d
			}
		}
		if chosen.value != v {
			return fmt.Errorf("plan chose unknown domain %q", v)
		}
	}
	got := scoreOf(chosen)
	if placed != got.est {
		return fmt.Errorf("placed %d pods in %q, which holds %d of %d pending", placed, chosen.value, got.est, pending)
	}
	// Without pending pods every domain is as good as any other.
	if pinned || root.TopologyKey == "" || opts.DomainPolicy != placement.BestFit || pending == 0 {
		return nil
	}
	need := leafNeed(root)
	for _, d := range domains {
		s := scoreOf(d)
		if s.est < need || d.value == chosen.value {
			continue
		}
		better := s.est > got.est ||
			(s.est == got.est && s.left < got.left) ||
			(s.est == got.est && s.left == got.left && d.value < chosen.value)
		if better {
			return fmt.Errorf("best fit chose %q (%+v) over %q (%+v)", chosen.value, got, d.value, s)
		}
	}
	return nil
}

// describe renders a scenario for failure messages.
func describe(nodes []placement.Node, root *placement.Group, opts placement.Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "options: %+v\n", opts)
	for _, n := range nodes {
		fmt.Fprintf(&b, "node %s labels=%v alloc=%v used=%v pods=%d/%d taints=%v unschedulable=%v\n",
			n.Name, n.Labels, n.Allocatable, n.Requested, n.PodCount, n.MaxPods, n.Taints, n.Unschedulable)
	}
	var walk func(g *placement.Group, depth int)
	walk = func(g *placement.Group, depth int) {
		ind := strings.Repeat("  ", depth)
		fmt.Fprintf(&b, "%sgroup %s policy=%d key=%q preferred=%q minCount=%d minGroupCount=%d bound=%v\n", ind, g.Name, g.Policy, g.TopologyKey, g.PreferredKeys, g.MinCount, g.MinGroupCount, g.Bound)
		for i, s := range g.Shapes {
			fmt.Fprintf(&b, "%s  shape %d: %v tolerations=%v selector=%v affinity=%v\n", ind, i, s.Requests, s.Tolerations, s.NodeSelector, s.RequiredAffinity)
		}
		for _, p := range g.Pending {
			fmt.Fprintf(&b, "%s  pod %s shape %d\n", ind, p.Key, p.Shape)
		}
		for _, c := range g.Children {
			walk(c, depth+1)
		}
	}
	walk(root, 0)
	return b.String()
}
