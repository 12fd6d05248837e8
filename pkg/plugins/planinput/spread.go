package planinput

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// Topology spread among members: a member's DoNotSchedule spread
// constraints, parsed as the PodTopologySpread filter reads them, written
// into its shape's key, and turned into a per-domain limit the planner (and
// the victim search) enforces. The one member constraint that counts pods per
// domain across the cluster, so it has its own file.

type spreadTerm struct {
	id       string
	c        corev1.TopologySpreadConstraint
	selector labels.Selector
	ns       string
}

// spreadSelector is the constraint's selector with matchLabelKeys merged
// in from the pod's own labels, as the PodTopologySpread filter reads it.
func spreadSelector(pod *corev1.Pod, c corev1.TopologySpreadConstraint) (labels.Selector, error) {
	sel := c.LabelSelector
	if len(c.MatchLabelKeys) > 0 {
		sel = sel.DeepCopy()
		if sel == nil {
			sel = &metav1.LabelSelector{}
		}
		for _, k := range c.MatchLabelKeys {
			if v, ok := pod.Labels[k]; ok {
				sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
			}
		}
	}
	if sel == nil {
		return labels.Nothing(), nil
	}
	return metav1.LabelSelectorAsSelector(sel)
}

// writeSpread writes a spread constraint field by field: %v of one prints
// the addresses of its minDomains and inclusion policies, which made every
// member that sets them a shape of its own, probed on its own.
func writeSpread(b *strings.Builder, c corev1.TopologySpreadConstraint) {
	fmt.Fprintf(b, "%d,%q,%q,%s,%v", c.MaxSkew, c.TopologyKey, c.WhenUnsatisfiable, c.LabelSelector.String(), c.MatchLabelKeys)
	for _, p := range []*string{(*string)(c.NodeAffinityPolicy), (*string)(c.NodeTaintsPolicy)} {
		if p != nil {
			fmt.Fprintf(b, ",%q", *p)
		} else {
			b.WriteString(",-")
		}
	}
	if c.MinDomains != nil {
		fmt.Fprintf(b, ",%d", *c.MinDomains)
	}
	b.WriteByte(';')
}

// spreadLimit bounds what the plan may add per domain so that every
// member, in whatever order the scheduler takes them, passes the
// PodTopologySpread filter: a domain may end up at most maxSkew above the
// least loaded domain as it stands before the plan. That bound is exact
// when the gang is no larger than maxSkew times the domains, and keeps a
// larger gang from being planned into a skew the filter would refuse
// (docs/user-guide.md, topology spread).
//
// For preemption (c.Evictable set) the counted pods the gang may evict are
// named in the limit: the victim search opens a domain by one for each it
// evicts there, and closes every domain by one when an eviction lowers the
// least loaded one.
func (c *Constraints) spreadLimit(rep *corev1.Pod, sp spreadTerm, self bool) placement.DomainLimit {
	key := sp.c.TopologyKey
	counts := map[string]int{}
	var victims map[string]string
	var aff nodeaffinity.RequiredNodeAffinity
	honorAffinity := sp.c.NodeAffinityPolicy == nil || *sp.c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor
	if honorAffinity {
		aff = nodeaffinity.GetRequiredNodeAffinity(rep)
	}
	if c != nil {
		for _, ni := range c.Nodes {
			n := ni.Node()
			if n == nil {
				continue
			}
			v, ok := n.Labels[key]
			if !ok {
				continue
			}
			if honorAffinity {
				if match, _ := aff.Match(n); !match {
					continue
				}
			}
			if _, seen := counts[v]; !seen {
				counts[v] = 0
			}
			for _, pi := range ni.GetPods() {
				p := pi.GetPod()
				if p.Namespace != sp.ns || p.DeletionTimestamp != nil || !sp.selector.Matches(labels.Set(p.Labels)) {
					continue
				}
				counts[v]++
				if c.Evictable != nil && c.Evictable(p) {
					if victims == nil {
						victims = map[string]string{}
					}
					victims[PodKey(p)] = v
				}
			}
		}
	}
	minCount := 0
	first := true
	for _, n := range counts {
		if first || n < minCount {
			minCount, first = n, false
		}
	}
	fixedFloor := sp.c.MinDomains != nil && len(counts) < int(*sp.c.MinDomains)
	if fixedFloor {
		minCount = 0
	}
	skew := int(sp.c.MaxSkew)
	extra := 0
	if !self {
		// A carrier outside its own selector adds nothing to the counts;
		// it may join while the domain is at most maxSkew above the least.
		extra = 1
	}
	l := placement.DomainLimit{
		Key:       key,
		Class:     "spread:" + sp.id,
		Max:       skew + minCount + extra,
		PerDomain: map[string]int{},
		Victims:   victims,
		// Evictions cannot add domains, so the floor minDomains imposes
		// stays.
		FixedFloor: fixedFloor,
		Reason:     fmt.Sprintf("topology spread on %s: at most maxSkew %d above the least loaded domain", key, skew),
	}
	for v, n := range counts {
		// Not clamped at zero: the victim search reads the counts back
		// from these, and a domain past the limit must be brought back
		// before it opens.
		l.PerDomain[v] = skew + minCount + extra - n
	}
	return l
}
