package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/phalanx-sched/phalanx/tools/bench/report"
	"github.com/phalanx-sched/phalanx/tools/sandbox"
)

// Shapes of upstream's scheduler_perf podgroup workloads
// (test/integration/scheduler_perf/podgroup in k8s.io/kubernetes@v1.37.2).
const (
	nodeCPU    = "4"
	nodeMemory = "32Gi"
	nodePods   = 110
	podCPU     = "100m"
	podMemory  = "100Mi"
	podImage   = "registry.k8s.io/pause:3.10.1"
)

// Case is one benchmark scenario: a cluster of identical nodes in racks,
// and either plain pods or gangs, created before the scheduler starts
// (precreated) or while it runs (live). A preemption case first fills the
// cluster with low-priority gangs, then measures one high-priority gang.
type Case struct {
	// Name follows upstream scheduler_perf: <test>/<workload>.
	Name string
	// The nodes: Zones × RacksPerZone × NodesPerRack, each 4 cpu / 32Gi /
	// 110 pods, labelled with zone, rack (sandbox.RackLabel) and hostname.
	Zones, RacksPerZone, NodesPerRack int
	// Gangs of PodsPerGang pods, minCount = PodsPerGang. Zero for a case of
	// plain pods.
	Gangs, PodsPerGang int
	// Pods is the number of plain pods when Gangs is zero.
	Pods int
	// TopologyKey, when set, constrains every gang to one value of this
	// node label (one rack).
	TopologyKey string
	// PreferredTopology, when set, gives every gang these preferred levels
	// below TopologyKey, narrowest first (Phalanx arms only).
	PreferredTopology []string
	// RacksPerBlock labels blocks of this many racks (sandbox.BlockLabel).
	RacksPerBlock int
	// SpreadKey, when set, counts the domains of this label each gang uses
	// (report.Spread), and is where fragmentation is measured.
	SpreadKey string
	// Ranked gives member i of every gang rank i (the
	// scheduling.phalanx.dev/rank annotation; only Phalanx reads it).
	// RingKeys, when set, measures how often each gang's ring of members,
	// in that order, crosses the boundaries of these levels (report.Ring),
	// whether or not the members carry ranks: a ranked case and its
	// unranked twin read side by side.
	Ranked   bool
	RingKeys []string
	// GangSizes, when set, are the gangs' sizes in creation order (a
	// sequence of mixed sizes); Gangs and PodsPerGang are then unused.
	GangSizes []int
	// PodCPU overrides the pods' cpu request (default 100m); "3" fits one
	// pod per 4-cpu node, so that racks fill up and fragment.
	PodCPU string
	// NextGang is the size of the hypothetical next gang that the
	// fragmentation metric asks every rack to host (cases with a
	// TopologyKey); default the case's largest gang.
	NextGang int
	// Arrival is report.ArrivalPrecreated or report.ArrivalLive; empty
	// takes the harness's Options.Arrival.
	Arrival string
	// Preemption, when set, makes a preemption case: the gangs above are
	// the high-priority ones measured, created after the filler has bound.
	Preemption *Preemption
	// AntiAffinity gives every gang member a required pod anti-affinity
	// term on kubernetes.io/hostname against the members of its own gang
	// (selected by GangLabel), so no two members of a gang share a node:
	// the one-member-per-node shape of distributed training. Both
	// schedulers' arms get the same term on the same label.
	AntiAffinity bool
	// GPUs, when set, gives every node GPUs and every measured pod a share
	// of them, as DRA devices or as an extended resource (gpus.go).
	GPUs *GPUs
	// Starvation, when set, makes a starvation case (starvation.go): a
	// stream of small jobs and the case's one gang over a fixed window.
	Starvation *Starvation
	// UpstreamGates are added to the harness's upstream gates for this case.
	UpstreamGates string
	// Timeout bounds one arm's measured window; Stall ends it early when no
	// pod has bound for that long.
	Timeout, Stall time.Duration

	// dialect is the harness's Options.Dialect for this run.
	dialect string
}

// Preemption is a preemption case's filler: LowGangs gangs of LowGangSize
// pods at priority lowPriority, disruptionMode all (a victim gang is
// evicted whole), created and bound with the scheduler running before the
// high-priority gangs (priority highPriority) arrive.
type Preemption struct {
	LowGangs, LowGangSize int
}

// PriorityClasses of the preemption cases.
const (
	lowPriorityClass  = "bench-low"
	highPriorityClass = "bench-high"
	lowPriority       = 100
	highPriority      = 10000
)

// PreemptionUpstreamGates are added to upstream's gates on preemption cases.
// kube-scheduler v1.37.2 has no separate gate for workload-aware
// preemption: its pod-group preemption (DefaultPreemption's
// PodGroupEvaluator, whole victim groups for disruptionMode all) runs
// under GenericWorkload. PodGroupPreemptionPolicy (alpha) adds the
// PodGroup-level preemptionPolicy that the same evaluator reads.
const PreemptionUpstreamGates = "PodGroupPreemptionPolicy=true"

// arrival is the case's arrival mode under a harness default.
func (c Case) arrival(def string) string {
	switch {
	case c.Preemption != nil:
		return report.ArrivalLive
	case c.Arrival != "":
		return c.Arrival
	case def != "":
		return def
	}
	return report.ArrivalPrecreated
}

// gangSizes lists the measured gangs' sizes in creation order.
func (c Case) gangSizes() []int {
	if len(c.GangSizes) > 0 {
		return c.GangSizes
	}
	out := make([]int, c.Gangs)
	for i := range out {
		out[i] = c.PodsPerGang
	}
	return out
}

// GangCount is the number of measured gangs.
func (c Case) GangCount() int { return len(c.gangSizes()) }

func (c Case) podCPU() string {
	if c.PodCPU != "" {
		return c.PodCPU
	}
	return podCPU
}

// podRequests is every pod's resource requests.
func (c Case) podRequests() corev1.ResourceList {
	r := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(c.podCPU()),
		corev1.ResourceMemory: resource.MustParse(podMemory),
	}
	if n := c.extendedGPUs(); n > 0 {
		r[sandbox.GPUResource] = *resource.NewQuantity(int64(n), resource.DecimalSI)
	}
	return r
}

// nextGang is the gang size the fragmentation metric uses.
func (c Case) nextGang() int {
	if c.NextGang > 0 {
		return c.NextGang
	}
	largest := 0
	for _, n := range c.gangSizes() {
		largest = max(largest, n)
	}
	return largest
}

// fragmentationKey is the label whose domains fragmentation counts.
func (c Case) fragmentationKey() string {
	if c.SpreadKey != "" {
		return c.SpreadKey
	}
	return c.TopologyKey
}

// NodeCount is the number of nodes of the case.
func (c Case) NodeCount() int { return c.Zones * c.RacksPerZone * c.NodesPerRack }

// PodCount is the number of measured pods of the case (a preemption
// case's filler not included).
func (c Case) PodCount() int {
	if sizes := c.gangSizes(); len(sizes) > 0 {
		n := 0
		for _, s := range sizes {
			n += s
		}
		return n
	}
	return c.Pods
}

func (c Case) topology() sandbox.Topology {
	t := sandbox.Topology{
		Zones: c.Zones, RacksPerZone: c.RacksPerZone, NodesPerRack: c.NodesPerRack, RacksPerBlock: c.RacksPerBlock,
		CPU: nodeCPU, Memory: nodeMemory, Pods: nodePods,
		Labels: map[string]string{benchPoolLabel: benchPool},
	}
	if c.GPUs != nil && !c.GPUs.DRA {
		t.GPUs = c.GPUs.PerNode
	}
	return t
}

// benchPoolLabel is on every node of every arm, so that the nodes stay
// the same across arms: Kueue's ResourceFlavor needs a label to select its
// nodes by, and the cases' zones differ from node to node.
const (
	benchPoolLabel = "bench.phalanx.dev/pool"
	benchPool      = "bench"
)

// preferredStream is true for the variants of the preferred-topology
// stream (preferredCases), the only cases with blocks of racks.
func (c Case) preferredStream() bool {
	return c.RacksPerBlock > 0 && len(c.GangSizes) > 0 && c.SpreadKey != ""
}

func gangName(g int) string { return fmt.Sprintf("gang-%d", g) }

func lowGangName(g int) string { return fmt.Sprintf("low-%d", g) }

// podNames lists the case's measured pods in creation order, each with its
// gang ("" for a plain pod).
func (c Case) podNames() (names, gangs []string) {
	sizes := c.gangSizes()
	if len(sizes) == 0 {
		for i := 0; i < c.Pods; i++ {
			names = append(names, fmt.Sprintf("pod-%d", i))
			gangs = append(gangs, "")
		}
		return names, gangs
	}
	for g, size := range sizes {
		for i := 0; i < size; i++ {
			names = append(names, fmt.Sprintf("%s-%d", gangName(g), i))
			gangs = append(gangs, gangName(g))
		}
	}
	return names, gangs
}

// groups is the case's measured gangs as the placement check sees them.
func (c Case) groups() []report.Group {
	sizes := c.gangSizes()
	out := make([]report.Group, 0, len(sizes))
	for g, size := range sizes {
		grp := report.Group{Name: gangName(g), MinCount: size, TopologyKey: c.TopologyKey}
		if c.AntiAffinity {
			grp.OnePerValueKey = sandbox.HostnameLabel
		}
		for i := 0; i < size; i++ {
			grp.Members = append(grp.Members, fmt.Sprintf("%s-%d", gangName(g), i))
		}
		out = append(out, grp)
	}
	return out
}

// lowGroups is a preemption case's filler gangs (nil otherwise).
func (c Case) lowGroups() []report.Group {
	if c.Preemption == nil {
		return nil
	}
	out := make([]report.Group, 0, c.Preemption.LowGangs)
	for g := 0; g < c.Preemption.LowGangs; g++ {
		grp := report.Group{Name: lowGangName(g), MinCount: c.Preemption.LowGangSize}
		for i := 0; i < c.Preemption.LowGangSize; i++ {
			grp.Members = append(grp.Members, fmt.Sprintf("%s-%d", lowGangName(g), i))
		}
		out = append(out, grp)
	}
	return out
}

// Cases returns the benchmark cases: the full set (5,000 and 7,500 nodes,
// as upstream's performance labels) or, with quick, small variants that
// finish in seconds per arm for CI.
func Cases(quick bool) []Case {
	if quick {
		// 200 nodes: 2 zones × 5 racks × 20 nodes.
		q := func(name string, c Case) Case {
			c.Name, c.Zones, c.RacksPerZone, c.NodesPerRack = name, 2, 5, 20
			c.Timeout, c.Stall = 90*time.Second, 30*time.Second
			return c
		}
		// No plain-pods case: the quick set is the CI check of the gang
		// paths, and every arm costs a fresh API server.
		seq := q("TopologyAwareScheduling/60Nodes_8Gangs_30Pods_MixedSizes", tasSequence(1))
		seq.Zones, seq.RacksPerZone, seq.NodesPerRack = 2, 3, 10
		pre := q("Preemption/20Nodes_5LowGangs_20Pods_8PodGang", preemptionCase(5, 8))
		pre.Zones, pre.RacksPerZone, pre.NodesPerRack = 1, 2, 10
		return append([]Case{
			q("GangScheduling/200Nodes_20Gangs_60Pods", Case{Gangs: 20, PodsPerGang: 3}),
			q("GangScheduling/200Nodes_2Gangs_100Pods_50PerGroup", Case{Gangs: 2, PodsPerGang: 50}),
			q("TopologyAwareScheduling/200Nodes_10Gangs_40Pods", Case{Gangs: 10, PodsPerGang: 4, TopologyKey: sandbox.RackLabel}),
			// The anti-affinity twin of the full 1000Gangs_8000Pods case
			// without its no-anti-affinity twin: the quick set checks the
			// constrained path, and the plain gang path is covered above.
			q("GangScheduling/200Nodes_20Gangs_160Pods_AntiAffinity", Case{Gangs: 20, PodsPerGang: 8, AntiAffinity: true}),
			seq,
			pre,
			// 100 nodes (1 zone × 5 racks × 20).
			withShape(q("GangScheduling/100Nodes_10Gangs_80Pods_4GPUsPerPod_DRA", gpuCase(10, true)), 1, 5, 20),
			withShape(q("GangScheduling/100Nodes_10Gangs_80Pods_4GPUsPerPod_ExtendedResource", gpuCase(10, false)), 1, 5, 20),
		}, preferredCases("128Nodes_12Gangs_86Pods", 1, 2, 8)...)
	}
	// 5,000 nodes: 5 zones × 10 racks × 100 nodes (upstream's TAS node
	// template puts 100 nodes in a rack); 7,500: 5 × 15 × 100.
	full := func(name string, racksPerZone int, c Case) Case {
		c.Name, c.Zones, c.RacksPerZone, c.NodesPerRack = name, 5, racksPerZone, 100
		c.Timeout, c.Stall = 20*time.Minute, 3*time.Minute
		return c
	}
	cases := append([]Case{
		full("SchedulingBasic/5000Nodes_3000Pods", 10, Case{Pods: 3000}),
		full("GangScheduling/5000Nodes_1000Gangs_3000Pods", 10, Case{Gangs: 1000, PodsPerGang: 3}),
		full("GangScheduling/5000Nodes_3Gangs_3000Pods_1000PerGroup", 10, Case{Gangs: 3, PodsPerGang: 1000}),
		full("TopologyAwareScheduling/5000Nodes_750Gangs_3000Pods", 10, Case{Gangs: 750, PodsPerGang: 4, TopologyKey: sandbox.RackLabel}),
		full("TopologyAwareScheduling/5000Nodes_3Gangs_3000Pods_1000PerGroup", 10, Case{Gangs: 3, PodsPerGang: 1000, TopologyKey: sandbox.RackLabel}),
		full("GangScheduling/7500Nodes_3Gangs_3000Pods_1000PerGroup", 15, Case{Gangs: 3, PodsPerGang: 1000}),
		// One gang too large to reserve within one per-pod Permit timeout
		// at the scheduler's rate: it binds only if the wait follows the
		// gang's progress.
		full("GangScheduling/7500Nodes_1Gang_20000Pods", 15, Case{Gangs: 1, PodsPerGang: 20000}),
		// Gangs of 8 with one member per node (required anti-affinity on
		// the hostname within the gang), and the same gangs without it, so
		// that the constraint's cost is read against its twin.
		full("GangScheduling/5000Nodes_1000Gangs_8000Pods", 10, Case{Gangs: 1000, PodsPerGang: 8}),
		full("GangScheduling/5000Nodes_1000Gangs_8000Pods_AntiAffinity", 10, Case{Gangs: 1000, PodsPerGang: 8, AntiAffinity: true}),
		// The gangs of 8 at upstream scheduler_perf's largest node count
		// (5 zones × 30 racks × 100): what grows with the nodes (the
		// informers' lists, per-plan node scans, memory) shows here.
		full("GangScheduling/15000Nodes_1000Gangs_8000Pods", 30, Case{Gangs: 1000, PodsPerGang: 8}),
		// Gangs of 8 whose members each take 4 of a node's 8 GPUs: through
		// DRA claims, and the same gangs through the extended resource, so
		// that what DRA costs is read against its twin.
		full("GangScheduling/5000Nodes_500Gangs_4000Pods_4GPUsPerPod_DRA", 10, gpuCase(500, true)),
		full("GangScheduling/5000Nodes_500Gangs_4000Pods_4GPUsPerPod_ExtendedResource", 10, gpuCase(500, false)),
		// The same at a fifth of the size (5 zones × 2 racks × 100): the
		// devices' memory is linear in the nodes, so this pair measures a
		// change to it in a fraction of the time.
		full("GangScheduling/1000Nodes_100Gangs_800Pods_4GPUsPerPod_DRA", 2, gpuCase(100, true)),
		full("GangScheduling/1000Nodes_100Gangs_800Pods_4GPUsPerPod_ExtendedResource", 2, gpuCase(100, false)),
		// 1,000 nodes in 100 racks of 10, one pod per node.
		withShape(full("TopologyAwareScheduling/1000Nodes_200Gangs_750Pods_MixedSizes", 20, tasSequence(25)), 5, 20, 10),
		// 1,000 nodes (10 racks of 100) filled by 250 gangs of 4, one pod
		// per node; a 100-pod gang evicts 25 of them.
		withShape(full("Preemption/1000Nodes_250LowGangs_1000Pods_100PodGang", 2, preemptionCase(250, 100)), 5, 2, 100),
	}, preferredCases("1024Nodes_96Gangs_688Pods", 8, 4, 8)...)
	cases = append(cases, rankCases(full)...)
	// The starvation cases are 8 nodes: they measure minutes of a busy
	// cluster, not scale. They are not in the quick set, whose test
	// asserts that every pod binds (a starving gang does not, by design).
	return append(cases, starvationCases()...)
}

// preferredSizes is one round of the preferred-topology stream: gangs of
// one pod per node on racks of 8 nodes, a third of them larger than a
// rack and none larger than a block of 4 racks; 86 pods for 128 nodes.
var preferredSizes = []int{6, 12, 4, 10, 3, 8, 16, 5, 2, 7, 9, 4}

// preferredCases is a stream of mixed gangs (rounds of preferredSizes) on
// 16 racks per round of nodesPerRack one-pod nodes, split over zones, in
// blocks of 4 racks, under four constraints: prefer a rack
// within a required block, the required block alone, a required rack, and
// none. Each reports how many racks its gangs took and how many racks stay
// whole for a next gang of 8.
func preferredCases(shape string, rounds, zones, nodesPerRack int) []Case {
	base := Case{PodCPU: "3", NextGang: 8, RacksPerBlock: 4, SpreadKey: sandbox.RackLabel,
		Zones: zones, RacksPerZone: 16 * rounds / zones, NodesPerRack: nodesPerRack}
	for r := 0; r < rounds; r++ {
		base.GangSizes = append(base.GangSizes, preferredSizes...)
	}
	timeout, stall := 90*time.Second, 30*time.Second
	if rounds > 1 {
		timeout, stall = 20*time.Minute, 3*time.Minute
	}
	variant := func(suffix, key string, preferred ...string) Case {
		c := base
		c.Name = "TopologyAwareScheduling/" + shape + "_" + suffix
		c.TopologyKey, c.PreferredTopology = key, preferred
		c.Timeout, c.Stall = timeout, stall
		return c
	}
	return []Case{
		variant("PreferredRack_RequiredBlock", sandbox.BlockLabel, sandbox.RackLabel),
		variant("RequiredBlock", sandbox.BlockLabel),
		variant("RequiredRack", sandbox.RackLabel),
		variant("Unconstrained", ""),
	}
}

// rankCases are 100 gangs of 32 one-cpu pods (4 per node), each in one
// zone of the 5,000 nodes, with ranks and, as their twin, without: how
// often a 32-rank all-reduce ring crosses rack and node boundaries when
// the scheduler lays ranks out in order, and when it does not.
func rankCases(full func(string, int, Case) Case) []Case {
	base := Case{Gangs: 100, PodsPerGang: 32, PodCPU: "1", TopologyKey: sandbox.ZoneLabel,
		RingKeys: []string{sandbox.ZoneLabel, sandbox.RackLabel, sandbox.HostnameLabel}}
	ranked, unranked := base, base
	ranked.Ranked = true
	return []Case{
		full("TopologyAwareScheduling/5000Nodes_100Gangs_3200Pods_Ranked", 10, ranked),
		full("TopologyAwareScheduling/5000Nodes_100Gangs_3200Pods_Unranked", 10, unranked),
	}
}

// tasSequenceSizes is one round of the mixed-size TAS sequence, 30 pods
// for 6 racks of 10 one-pod nodes. Best fit (the fullest rack that fits)
// packs a round into 3 racks and keeps 3 whole; worst fit (the emptiest
// rack) spreads it over all 6 and leaves no rack able to take an 8-pod gang.
var tasSequenceSizes = []int{6, 4, 5, 5, 3, 3, 2, 2}

// tasSequence is rounds of tasSequenceSizes, every gang inside one rack,
// one pod per node (3 of 4 cpu); the next gang asked for is 8 pods.
func tasSequence(rounds int) Case {
	c := Case{TopologyKey: sandbox.RackLabel, PodCPU: "3", NextGang: 8}
	for r := 0; r < rounds; r++ {
		c.GangSizes = append(c.GangSizes, tasSequenceSizes...)
	}
	return c
}

// preemptionCase fills every node with one low-priority pod (gangs of 4)
// and measures one high-priority gang of size pods, unconstrained, that
// fits only by evicting size/4 filler gangs.
func preemptionCase(lowGangs, size int) Case {
	return Case{
		Gangs: 1, PodsPerGang: size, PodCPU: "3",
		Preemption:    &Preemption{LowGangs: lowGangs, LowGangSize: 4},
		UpstreamGates: PreemptionUpstreamGates,
	}
}

// gpuCase is gangs gangs of 8 pods, each pod taking 4 of its node's 8
// GPUs (two members per node at most): as DRA claims or, for its twin, as
// the extended resource.
func gpuCase(gangs int, dra bool) Case {
	return Case{Gangs: gangs, PodsPerGang: 8, GPUs: &GPUs{PerNode: 8, PerPod: 4, DRA: dra}}
}

func withShape(c Case, zones, racksPerZone, nodesPerRack int) Case {
	c.Zones, c.RacksPerZone, c.NodesPerRack = zones, racksPerZone, nodesPerRack
	return c
}

// SelectCases picks cases by name: a pattern that is a case's whole name
// selects that case alone, any other the cases whose name contains it
// (case-insensitive). No patterns selects all. Whole names come first
// because one case's name can be the start of another's
// ("…_8000Pods" and "…_8000Pods_AntiAffinity"), and a run meant for the
// first also ran the second.
func SelectCases(all []Case, patterns []string) ([]Case, error) {
	if len(patterns) == 0 {
		return all, nil
	}
	var out []Case
	seen := map[string]bool{}
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		exact := slices.ContainsFunc(all, func(c Case) bool { return strings.EqualFold(c.Name, p) })
		matched := false
		for _, c := range all {
			if exact && strings.EqualFold(c.Name, p) || !exact && strings.Contains(strings.ToLower(c.Name), strings.ToLower(p)) {
				matched = true
				if !seen[c.Name] {
					seen[c.Name] = true
					out = append(out, c)
				}
			}
		}
		if !matched {
			names := make([]string, len(all))
			for i, c := range all {
				names[i] = c.Name
			}
			return nil, fmt.Errorf("no case matches %q; cases: %s", p, strings.Join(names, ", "))
		}
	}
	return out, nil
}
