package report

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// Fragmentation says, after a run, how many topology domains (racks) could
// still host one more gang of a given shape: GangSize pods of the case's
// requests, all inside one domain. A domain is fragmented when it has room
// for at least one such pod but not for the whole gang: free capacity that
// a topology-constrained gang cannot use.
type Fragmentation struct {
	// TopologyKey is the node label whose values are the domains.
	TopologyKey string `json:"topologyKey"`
	// GangSize is the size of the hypothetical next gang.
	GangSize int `json:"gangSize"`
	// Domains is the number of domains (values of TopologyKey).
	Domains int `json:"domains"`
	// CanHost counts domains with room for the whole next gang.
	CanHost int `json:"canHost"`
	// Fragmented counts domains with room for one pod of the gang or more,
	// but not for all of it.
	Fragmented int `json:"fragmented"`
	// Full counts domains without room for a single pod of the gang.
	Full int `json:"full"`
}

// ComputeFragmentation counts, from the nodes and the pods (bound ones
// hold capacity until they end: a terminating pod still holds its node),
// the domains of key that could host gangSize pods each requesting request
// (pods count as one each against the node's pod capacity). Nodes without
// the label belong to no domain.
func ComputeFragmentation(nodes []*corev1.Node, pods []*corev1.Pod, key string, gangSize int, request corev1.ResourceList) Fragmentation {
	f := Fragmentation{TopologyKey: key, GangSize: gangSize}
	used := map[string]corev1.ResourceList{}
	count := map[string]int64{}
	for _, p := range pods {
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		sum := used[p.Spec.NodeName]
		if sum == nil {
			sum = corev1.ResourceList{}
			used[p.Spec.NodeName] = sum
		}
		addRequests(sum, p)
		count[p.Spec.NodeName]++
	}
	slots := map[string]int64{}
	for _, n := range nodes {
		domain, ok := n.Labels[key]
		if !ok {
			continue
		}
		slots[domain] += nodeSlots(n.Status.Allocatable, used[n.Name], count[n.Name], request)
	}
	domains := make([]string, 0, len(slots))
	for d := range slots {
		domains = append(domains, d)
	}
	sort.Strings(domains)
	f.Domains = len(domains)
	for _, d := range domains {
		switch s := slots[d]; {
		case s >= int64(gangSize):
			f.CanHost++
		case s > 0:
			f.Fragmented++
		default:
			f.Full++
		}
	}
	return f
}

// nodeSlots is how many more pods of request fit on a node with alloc
// allocatable, used requested and pods bound.
func nodeSlots(alloc, used corev1.ResourceList, pods int64, request corev1.ResourceList) int64 {
	slots := int64(-1)
	limit := func(n int64) {
		if n < 0 {
			n = 0
		}
		if slots < 0 || n < slots {
			slots = n
		}
	}
	if a, ok := alloc[corev1.ResourcePods]; ok {
		limit(a.Value() - pods)
	}
	for name, q := range request {
		want := q.MilliValue()
		if want <= 0 {
			continue
		}
		a, ok := alloc[name]
		if !ok {
			limit(0)
			continue
		}
		free := a.MilliValue()
		if u, ok := used[name]; ok {
			free -= u.MilliValue()
		}
		limit(free / want)
	}
	if slots < 0 {
		return 0
	}
	return slots
}

func addRequests(sum corev1.ResourceList, p *corev1.Pod) {
	for _, c := range p.Spec.Containers {
		for name, q := range c.Resources.Requests {
			acc := sum[name]
			acc.Add(q)
			sum[name] = acc
		}
	}
}

// Preemption is what a preemption case did to the low-priority gangs that
// filled the cluster before the high-priority gang arrived.
type Preemption struct {
	// LowGangs and LowPods are the filler gangs and their pods.
	LowGangs int `json:"lowGangs"`
	LowPods  int `json:"lowPods"`
	// VictimPods counts filler pods evicted: deleted, terminating, failed,
	// or carrying a DisruptionTarget condition.
	VictimPods int `json:"victimPods"`
	// VictimGangs counts filler gangs evicted whole.
	VictimGangs int `json:"victimGangs"`
	// PartialGangs counts filler gangs with some members evicted and some
	// still running: a gang split by preemption, below its minCount.
	PartialGangs int `json:"partialGangs"`
	// UntouchedGangs counts filler gangs with no member evicted.
	UntouchedGangs int `json:"untouchedGangs"`
	// Problems names the first few partial gangs.
	Problems []string `json:"problems,omitempty"`
}

// WholeGangs is true when every filler gang was either left alone or
// evicted whole.
func (p Preemption) WholeGangs() bool { return p.PartialGangs == 0 }

// CountVictims classifies the filler gangs after a preemption case from the
// pods left in the API (a victim already removed is simply absent).
func CountVictims(lowGroups []Group, pods []*corev1.Pod) Preemption {
	byName := make(map[string]*corev1.Pod, len(pods))
	for _, p := range pods {
		byName[p.Name] = p
	}
	out := Preemption{LowGangs: len(lowGroups)}
	for _, g := range lowGroups {
		evicted := 0
		for _, m := range g.Members {
			out.LowPods++
			if isEvicted(byName[m]) {
				evicted++
			}
		}
		out.VictimPods += evicted
		switch {
		case evicted == 0:
			out.UntouchedGangs++
		case evicted == len(g.Members):
			out.VictimGangs++
		default:
			out.PartialGangs++
			if len(out.Problems) < maxProblems {
				out.Problems = append(out.Problems, formatPartial(g.Name, evicted, len(g.Members)))
			}
		}
	}
	return out
}

func formatPartial(name string, evicted, members int) string {
	return fmt.Sprintf("gang %s: %d of %d members evicted, the rest still running", name, evicted, members)
}

// isEvicted: a pod gone, terminating, failed or marked DisruptionTarget.
func isEvicted(p *corev1.Pod) bool {
	if p == nil || p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed {
		return true
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
