package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/phalanx-sched/phalanx/pkg/bench/report"
	"github.com/phalanx-sched/phalanx/pkg/sandbox"
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
// and either plain pods or gangs of equal size, all created before the
// scheduler starts.
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
	// Timeout bounds one arm's measured window; Stall ends it early when no
	// pod has bound for that long.
	Timeout, Stall time.Duration
}

// NodeCount is the number of nodes of the case.
func (c Case) NodeCount() int { return c.Zones * c.RacksPerZone * c.NodesPerRack }

// PodCount is the number of pods of the case.
func (c Case) PodCount() int {
	if c.Gangs > 0 {
		return c.Gangs * c.PodsPerGang
	}
	return c.Pods
}

func (c Case) topology() sandbox.Topology {
	return sandbox.Topology{
		Zones: c.Zones, RacksPerZone: c.RacksPerZone, NodesPerRack: c.NodesPerRack,
		CPU: nodeCPU, Memory: nodeMemory, Pods: nodePods,
	}
}

func gangName(g int) string { return fmt.Sprintf("gang-%d", g) }

// podNames lists the case's pods in creation order, each with its gang
// ("" for a plain pod).
func (c Case) podNames() (names, gangs []string) {
	if c.Gangs == 0 {
		for i := 0; i < c.Pods; i++ {
			names = append(names, fmt.Sprintf("pod-%d", i))
			gangs = append(gangs, "")
		}
		return names, gangs
	}
	for g := 0; g < c.Gangs; g++ {
		for i := 0; i < c.PodsPerGang; i++ {
			names = append(names, fmt.Sprintf("%s-%d", gangName(g), i))
			gangs = append(gangs, gangName(g))
		}
	}
	return names, gangs
}

// groups is the case's gangs as the placement check sees them.
func (c Case) groups() []report.Group {
	out := make([]report.Group, 0, c.Gangs)
	for g := 0; g < c.Gangs; g++ {
		grp := report.Group{Name: gangName(g), MinCount: c.PodsPerGang, TopologyKey: c.TopologyKey}
		for i := 0; i < c.PodsPerGang; i++ {
			grp.Members = append(grp.Members, fmt.Sprintf("%s-%d", gangName(g), i))
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
		return []Case{
			q("GangScheduling/200Nodes_20Gangs_60Pods", Case{Gangs: 20, PodsPerGang: 3}),
			q("GangScheduling/200Nodes_2Gangs_100Pods_50PerGroup", Case{Gangs: 2, PodsPerGang: 50}),
			q("TopologyAwareScheduling/200Nodes_10Gangs_40Pods", Case{Gangs: 10, PodsPerGang: 4, TopologyKey: sandbox.RackLabel}),
		}
	}
	// 5,000 nodes: 5 zones × 10 racks × 100 nodes (upstream's TAS node
	// template puts 100 nodes in a rack); 7,500: 5 × 15 × 100.
	full := func(name string, racksPerZone int, c Case) Case {
		c.Name, c.Zones, c.RacksPerZone, c.NodesPerRack = name, 5, racksPerZone, 100
		c.Timeout, c.Stall = 20*time.Minute, 3*time.Minute
		return c
	}
	return []Case{
		full("SchedulingBasic/5000Nodes_3000Pods", 10, Case{Pods: 3000}),
		full("GangScheduling/5000Nodes_1000Gangs_3000Pods", 10, Case{Gangs: 1000, PodsPerGang: 3}),
		full("GangScheduling/5000Nodes_3Gangs_3000Pods_1000PerGroup", 10, Case{Gangs: 3, PodsPerGang: 1000}),
		full("TopologyAwareScheduling/5000Nodes_750Gangs_3000Pods", 10, Case{Gangs: 750, PodsPerGang: 4, TopologyKey: sandbox.RackLabel}),
		full("TopologyAwareScheduling/5000Nodes_3Gangs_3000Pods_1000PerGroup", 10, Case{Gangs: 3, PodsPerGang: 1000, TopologyKey: sandbox.RackLabel}),
		full("GangScheduling/7500Nodes_3Gangs_3000Pods_1000PerGroup", 15, Case{Gangs: 3, PodsPerGang: 1000}),
	}
}

// SelectCases picks cases by name: each pattern selects the cases whose
// name contains it (case-insensitive). No patterns selects all.
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
		matched := false
		for _, c := range all {
			if strings.Contains(strings.ToLower(c.Name), strings.ToLower(p)) {
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
