package placement_test

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// This file checks FindVictims against a brute force of its own: every
// subset of the evictable units, each planned with PlanGroup on nodes
// rebuilt without the victims, and the cheapest feasible subset by the
// documented order, computed here from scratch.

var (
	preemptCases = flag.Int("placement.preempt-cases", 2500, "randomised preemption cases to run")
	preemptSeed  = flag.Int64("placement.preempt-seed", -1, "run only this randomised preemption seed")
)

// preemptorPriority is the priority of the generated preemptors; victims
// get 0, 1, 2 or this, so some are untouchable.
const preemptorPriority = 5

// preemptScenario is one FindVictims input.
type preemptScenario struct {
	nodes    []placement.Node
	victims  []placement.Victim
	root     *placement.Group
	priority int32
	opts     placement.PreemptOptions
}

// occupy adds every victim's requests and pod to the node it runs on, as the
// snapshot would show them.
func occupy(nodes []placement.Node, victims []placement.Victim) []placement.Node {
	out := slices.Clone(nodes)
	for i := range out {
		out[i].Requested = cloneResources(out[i].Requested)
	}
	for _, v := range victims {
		for i := range out {
			if out[i].Name != v.Node {
				continue
			}
			for r, q := range v.Requests {
				out[i].Requested[r] += q
			}
			out[i].PodCount++
		}
	}
	return out
}

// evict rebuilds nodes without the given victims, clamping at zero as the
// contract says.
func evict(nodes []placement.Node, victims []placement.Victim) []placement.Node {
	out := slices.Clone(nodes)
	for i := range out {
		out[i].Requested = cloneResources(out[i].Requested)
	}
	for _, v := range victims {
		for i := range out {
			if out[i].Name != v.Node {
				continue
			}
			for r, q := range v.Requests {
				out[i].Requested[r] = max(0, out[i].Requested[r]-q)
			}
			out[i].PodCount = max(0, out[i].PodCount-1)
		}
	}
	return out
}

func cloneResources(r placement.Resources) placement.Resources {
	out := placement.Resources{}
	for k, v := range r {
		out[k] = v
	}
	return out
}

// genPreemption makes 1–6 nodes whose room is mostly held by up to 8
// victims, 1–2 per node, of mixed priorities, some grouped into
// all-or-nothing units and some on a node that is gone, and a small group
// tree of one of three kinds: a leaf, a composite of leaves sharing one
// shape, and a composite of leaves with their own shapes and racks.
func genPreemption(src source) preemptScenario {
	resources := 1 + src.intn(2)
	count := 1 + src.intn(6)
	var nodes []placement.Node
	for i := range count {
		n := placement.Node{
			Name:        fmt.Sprintf("n%d", i),
			Labels:      map[string]string{},
			Allocatable: placement.Resources{},
			Requested:   placement.Resources{cpu: int64(src.intn(2)) * 500},
		}
		n.PodCount = src.intn(2)
		if resources > 1 {
			n.Requested[mem] = int64(src.intn(2)) * 512
		}
		if !chance(src, 6) {
			n.Labels[zoneKey] = genZones[src.intn(len(genZones))]
		}
		if !chance(src, 6) {
			n.Labels[rackKey] = genRacks[src.intn(len(genRacks))]
		}
		if chance(src, 2) {
			n.Labels[diskKey] = "ssd"
		}
		if chance(src, 5) {
			n.Taints = []corev1.Taint{{Key: teamKey, Value: teamTol, Effect: corev1.TaintEffectNoSchedule}}
		}
		nodes = append(nodes, n)
	}
	var victims []placement.Victim
	for _, n := range nodes {
		for range 1 + src.intn(2) {
			if len(victims) == 8 {
				break
			}
			v := placement.Victim{
				Key:         fmt.Sprintf("ns/v%d", len(victims)),
				Node:        n.Name,
				Requests:    placement.Resources{cpu: []int64{0, 500, 1000, 1000, 2000}[src.intn(5)]},
				Priority:    []int32{0, 1, 1, 2, 2, preemptorPriority}[src.intn(6)],
				Created:     int64(src.intn(4)),
				ViolatesPDB: chance(src, 4),
				Surplus:     chance(src, 3),
			}
			if resources > 1 {
				v.Requests[mem] = []int64{0, 512, 1024}[src.intn(3)]
			}
			if chance(src, 12) {
				v.Node = "gone"
			}
			if !chance(src, 2) {
				v.Unit = fmt.Sprintf("ns/u%d", src.intn(3))
			}
			victims = append(victims, v)
		}
	}
	nodes = occupy(nodes, victims)
	for i := range nodes {
		// Little is free: victims hold most of the room.
		n := &nodes[i]
		n.Allocatable[cpu] = n.Requested[cpu] + []int64{0, 0, 500, 1000}[src.intn(4)]
		if resources > 1 {
			n.Allocatable[mem] = n.Requested[mem] + []int64{0, 512, 1024}[src.intn(3)]
		}
		n.MaxPods = n.PodCount + src.intn(2)
	}

	groups := 0
	budget := 6
	leaf := func(key string, shared *placement.Shape) *placement.Group {
		groups++
		g := &placement.Group{Name: fmt.Sprintf("ns/g%d", groups), TopologyKey: key}
		if chance(src, 8) {
			g.Policy = placement.Basic
		}
		if shared != nil {
			g.Shapes = []placement.Shape{*shared}
		} else {
			g.Shapes = []placement.Shape{genShape(src, resources)}
			if chance(src, 3) {
				g.Shapes = append(g.Shapes, genShape(src, resources))
			}
		}
		pending := min(budget, 1+src.intn(3))
		budget -= pending
		for i := range pending {
			g.Pending = append(g.Pending, placement.Pod{Key: fmt.Sprintf("%s-p%d", g.Name, i), Shape: src.intn(len(g.Shapes))})
		}
		if chance(src, 5) {
			g.Bound = []placement.BoundPod{{Key: g.Name + "-b0", Node: nodes[src.intn(len(nodes))].Name}}
		}
		// Gangs that need all their pods make preemption matter more often.
		g.MinCount = len(g.Pending) + len(g.Bound)
		if chance(src, 4) {
			g.MinCount = src.intn(g.MinCount + 1)
		}
		return g
	}
	composite := func(key string, children []*placement.Group) *placement.Group {
		groups++
		g := &placement.Group{Name: fmt.Sprintf("ns/c%d", groups), TopologyKey: key, Children: children, MinGroupCount: 1 + src.intn(len(children))}
		if chance(src, 8) {
			g.Policy = placement.Basic
		}
		return g
	}
	pick := func(keys ...string) string { return keys[src.intn(len(keys))] }
	var root *placement.Group
	switch src.intn(4) {
	case 0, 1:
		root = leaf(pick("", zoneKey, rackKey), nil)
	case 2:
		shape := genShape(src, resources)
		var children []*placement.Group
		for range 1 + src.intn(3) {
			children = append(children, leaf("", &shape))
		}
		root = composite(pick("", zoneKey), children)
	default:
		var children []*placement.Group
		for range 1 + src.intn(3) {
			children = append(children, leaf(pick("", rackKey), nil))
		}
		root = composite(pick("", zoneKey), children)
	}
	opts := placement.PreemptOptions{Options: placement.Options{DomainPolicy: placement.DomainPolicy(src.intn(3))}}
	// Last, so that a zero keeps inputs written before preferred levels
	// decoding as they did: blocks, and preferred levels on some leaves.
	for i := range nodes {
		if v := src.intn(len(genBlocks) + 1); v > 0 {
			nodes[i].Labels[blockKey] = genBlocks[v-1]
		}
	}
	var prefer func(g *placement.Group)
	prefer = func(g *placement.Group) {
		for _, c := range g.Children {
			prefer(c)
		}
		if len(g.Children) == 0 && src.intn(5) == 1 {
			ladders := genLadders[g.TopologyKey]
			g.PreferredKeys = ladders[src.intn(len(ladders))]
		}
	}
	prefer(root)
	return preemptScenario{nodes: nodes, victims: victims, root: root, priority: preemptorPriority, opts: opts}
}

// oracleUnits groups the victims into eviction units and keeps those whose
// every pod is of lower priority than the preemptor.
func oracleUnits(victims []placement.Victim, priority int32) [][]placement.Victim {
	byUnit := map[string][]placement.Victim{}
	var units [][]placement.Victim
	for _, v := range victims {
		if v.Unit == "" {
			units = append(units, []placement.Victim{v})
		} else {
			byUnit[v.Unit] = append(byUnit[v.Unit], v)
		}
	}
	ids := make([]string, 0, len(byUnit))
	for id := range byUnit {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		units = append(units, byUnit[id])
	}
	var out [][]placement.Victim
	for _, u := range units {
		if !slices.ContainsFunc(u, func(v placement.Victim) bool { return v.Priority >= priority }) {
			out = append(out, u)
		}
	}
	return out
}

// oracleCost is the documented order as a tuple: highest priority, pods
// not surplus, pods, units, PDB violations, creation times ascending
// (larger is better), keys.
type oracleCost struct {
	prio    int32
	kept    int
	pods    int
	units   int
	pdb     int
	created []int64
	keys    []string
}

func costOfUnits(units [][]placement.Victim) oracleCost {
	c := oracleCost{prio: math.MinInt32, units: len(units)}
	for _, u := range units {
		for _, v := range u {
			c.prio = max(c.prio, v.Priority)
			c.pods++
			if v.ViolatesPDB {
				c.pdb++
			}
			if !v.Surplus {
				c.kept++
			}
			c.created = append(c.created, v.Created)
			c.keys = append(c.keys, v.Key)
		}
	}
	slices.Sort(c.created)
	slices.Sort(c.keys)
	return c
}

// cheaper reports whether a comes strictly before b.
func cheaper(a, b oracleCost) bool {
	switch {
	case a.prio != b.prio:
		return a.prio < b.prio
	case a.kept != b.kept:
		return a.kept < b.kept
	case a.pods != b.pods:
		return a.pods < b.pods
	case a.units != b.units:
		return a.units < b.units
	case a.pdb != b.pdb:
		return a.pdb < b.pdb
	}
	for i := range a.created {
		if a.created[i] != b.created[i] {
			return a.created[i] > b.created[i]
		}
	}
	return strings.Join(a.keys, "\x00") < strings.Join(b.keys, "\x00")
}

// bruteForce returns the cheapest feasible subset of evictable units, or
// ok false when none is feasible.
func bruteForce(sc preemptScenario) (best oracleCost, ok bool) {
	units := oracleUnits(sc.victims, sc.priority)
	for mask := 0; mask < 1<<len(units); mask++ {
		var set [][]placement.Victim
		var pods []placement.Victim
		for i, u := range units {
			if mask&(1<<i) != 0 {
				set = append(set, u)
				pods = append(pods, u...)
			}
		}
		c := costOfUnits(set)
		if ok && !cheaper(c, best) {
			continue
		}
		if _, err := placement.PlanGroup(evict(sc.nodes, pods), sc.root, sc.opts.Options); err == nil {
			best, ok = c, true
		}
	}
	return best, ok
}

// checkSound checks what every FindVictims result must hold, exhaustive or
// not: victims are evictable and whole units, the fields agree with them,
// and the plan is exactly PlanGroup's on the nodes without the victims and
// passes the planner's invariants (no overcommit, constraints, quorums).
// It returns the cost of the result.
func checkSound(sc preemptScenario, pr *placement.Preemption) (oracleCost, error) {
	byKey := map[string]placement.Victim{}
	for _, v := range sc.victims {
		byKey[v.Key] = v
	}
	if !slices.IsSorted(pr.Victims) || !slices.IsSorted(pr.Units) {
		return oracleCost{}, fmt.Errorf("victims %v or units %v are not sorted", pr.Victims, pr.Units)
	}
	chosen := map[string]bool{}
	var pods []placement.Victim
	maxPrio := int32(math.MinInt32)
	for _, key := range pr.Victims {
		v, ok := byKey[key]
		if !ok || chosen[key] {
			return oracleCost{}, fmt.Errorf("victim %q is unknown or repeated", key)
		}
		if v.Priority >= sc.priority {
			return oracleCost{}, fmt.Errorf("victim %q has priority %d, not below %d", key, v.Priority, sc.priority)
		}
		chosen[key] = true
		pods = append(pods, v)
		maxPrio = max(maxPrio, v.Priority)
	}
	if pr.MaxVictimPriority != maxPrio {
		return oracleCost{}, fmt.Errorf("MaxVictimPriority %d, victims' highest %d", pr.MaxVictimPriority, maxPrio)
	}
	var set [][]placement.Victim
	units := map[string]bool{}
	for _, u := range oracleUnits(sc.victims, sc.priority) {
		in := 0
		for _, v := range u {
			if chosen[v.Key] {
				in++
			}
		}
		if in != 0 && in != len(u) {
			return oracleCost{}, fmt.Errorf("unit %q is evicted partly: %d of %d pods", u[0].Unit, in, len(u))
		}
		if in > 0 {
			set = append(set, u)
			if u[0].Unit != "" {
				units[u[0].Unit] = true
			}
		}
	}
	wantUnits := slices.Sorted(func(yield func(string) bool) {
		for id := range units {
			if !yield(id) {
				return
			}
		}
	})
	if !slices.Equal(pr.Units, wantUnits) {
		return oracleCost{}, fmt.Errorf("units %v, want %v", pr.Units, wantUnits)
	}
	rebuilt := evict(sc.nodes, pods)
	want, err := placement.PlanGroup(rebuilt, sc.root, sc.opts.Options)
	if err != nil {
		return oracleCost{}, fmt.Errorf("PlanGroup fails once the victims are gone: %v", err)
	}
	if !reflect.DeepEqual(want, pr.Plan) {
		return oracleCost{}, fmt.Errorf("plan %+v differs from PlanGroup's %+v", pr.Plan, want)
	}
	if err := verify(rebuilt, sc.root, sc.opts.Options, pr.Plan, nil); err != nil {
		return oracleCost{}, fmt.Errorf("plan once the victims are gone: %v", err)
	}
	return costOfUnits(set), nil
}

// rootHomogeneousLeaf is the tree for which PlanGroup is exact, so the
// heuristic search promises to find a set whenever one exists, with the
// lowest highest priority.
func rootHomogeneousLeaf(root *placement.Group) bool {
	if len(root.Children) > 0 {
		return false
	}
	_, ok := homogeneousShape(root)
	return ok
}

// preemptOutcome summarises a checked case for the generator's drift check.
type preemptOutcome struct {
	feasible, needsVictims, heuristicOptimal bool
}

// checkPreemption runs FindVictims exhaustively (the default bound covers
// every generated case) and heuristically, and checks both against the
// brute force.
func checkPreemption(sc preemptScenario) (_ preemptOutcome, err error) {
	var out preemptOutcome
	before := describePreemption(sc)
	defer func() {
		if after := describePreemption(sc); after != before && err == nil {
			err = fmt.Errorf("FindVictims modified its arguments:\n%s", after)
		}
	}()
	best, feasible := bruteForce(sc)
	out.feasible = feasible
	out.needsVictims = feasible && best.pods > 0

	pr, ferr := placement.FindVictims(sc.nodes, sc.victims, sc.root, sc.priority, sc.opts)
	if err := checkInfeasible(pr, ferr, feasible); err != nil {
		return out, fmt.Errorf("exhaustive: %w", err)
	}
	if feasible {
		got, err := checkSound(sc, pr)
		if err != nil {
			return out, fmt.Errorf("exhaustive: %w", err)
		}
		if !pr.Exhaustive {
			return out, errors.New("exhaustive: a small search is not reported exhaustive")
		}
		if !reflect.DeepEqual(got, best) {
			return out, fmt.Errorf("exhaustive: chose %+v, brute force finds %+v", got, best)
		}
	}

	heur := sc.opts
	heur.MaxUnits = -1
	pr, ferr = placement.FindVictims(sc.nodes, sc.victims, sc.root, sc.priority, heur)
	exact := rootHomogeneousLeaf(sc.root)
	var inf *placement.Infeasible
	switch {
	case ferr != nil && !errors.As(ferr, &inf):
		return out, fmt.Errorf("heuristic: plain error %v", ferr)
	case ferr != nil && pr != nil:
		return out, errors.New("heuristic: an error came with a result")
	case ferr != nil && feasible && exact:
		return out, fmt.Errorf("heuristic: infeasible (%v) for a homogeneous leaf, brute force finds %+v", ferr, best)
	case ferr == nil:
		if !feasible {
			return out, fmt.Errorf("heuristic: found %v where brute force finds nothing", pr.Victims)
		}
		got, err := checkSound(sc, pr)
		if err != nil {
			return out, fmt.Errorf("heuristic: %w", err)
		}
		if cheaper(got, best) {
			return out, fmt.Errorf("heuristic: %+v is cheaper than the brute-force minimum %+v", got, best)
		}
		if exact && got.prio != best.prio {
			return out, fmt.Errorf("heuristic: highest priority %d for a homogeneous leaf, brute force %d", got.prio, best.prio)
		}
		out.heuristicOptimal = reflect.DeepEqual(got, best)
	}
	return out, nil
}

func checkInfeasible(pr *placement.Preemption, err error, feasible bool) error {
	var inf *placement.Infeasible
	switch {
	case err != nil && !errors.As(err, &inf):
		return fmt.Errorf("plain error %v", err)
	case err != nil && pr != nil:
		return errors.New("an error came with a result")
	case err != nil && feasible:
		return fmt.Errorf("infeasible (%v) but brute force finds a set", err)
	case err == nil && !feasible:
		return fmt.Errorf("found %v where brute force finds nothing", pr.Victims)
	case err != nil && (inf.Group == "" || inf.Reason == ""):
		return fmt.Errorf("infeasibility without group or reason: %+v", inf)
	}
	return nil
}

func describePreemption(sc preemptScenario) string {
	var b strings.Builder
	b.WriteString(describe(sc.nodes, sc.root, sc.opts.Options))
	fmt.Fprintf(&b, "preemptor priority %d, max units %d\n", sc.priority, sc.opts.MaxUnits)
	for _, v := range sc.victims {
		fmt.Fprintf(&b, "victim %s on %s req=%v prio=%d unit=%q created=%d pdb=%v surplus=%v\n", v.Key, v.Node, v.Requests, v.Priority, v.Unit, v.Created, v.ViolatesPDB, v.Surplus)
	}
	return b.String()
}

func TestFindVictimsMatchesBruteForce(t *testing.T) {
	first, n := int64(0), int64(*preemptCases)
	if *preemptSeed >= 0 {
		first, n = *preemptSeed, 1
	}
	var feasible, needs, optimal int
	for seed := first; seed < first+n; seed++ {
		sc := genPreemption(randSource{rand.New(rand.NewPCG(uint64(seed), 0x5eed5eed5eed5eed))})
		out, err := checkPreemption(sc)
		if err != nil {
			t.Fatalf("seed %d: %v\nreproduce: go test ./pkg/placement/ -run TestFindVictimsMatchesBruteForce -placement.preempt-seed=%d\n%s", seed, err, seed, describePreemption(sc))
		}
		if out.feasible {
			feasible++
		}
		if out.needsVictims {
			needs++
			if out.heuristicOptimal {
				optimal++
			}
		}
	}
	t.Logf("%d cases: %d feasible, %d need victims, the heuristic is optimal on %d of those", n, feasible, needs, optimal)
	// The generator must keep producing cases that need victims and cases
	// that cannot be helped, or the comparison would stop testing anything.
	if n >= 1000 {
		if needs < int(n)/5 || int(n)-feasible < int(n)/20 {
			t.Fatalf("generator drifted: %d of %d cases need victims, %d infeasible", needs, n, int(n)-feasible)
		}
	}
}
