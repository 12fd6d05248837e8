package sim

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
)

// The ring: a gang's bound pods in rank order, as an all-reduce passes
// data around them, and how often it crosses each level's boundaries.
// Ranks are what the scheduler reads (planinput.RankOf); a gang without
// them is taken in the order of its pods' name ordinals, the order a job
// whose controller writes no index would use.

type ringMember struct {
	rank    int64
	ranked  bool
	ordinal uint64
	hasOrd  bool
	name    string
	node    string
}

func memberOf(p *corev1.Pod) ringMember {
	m := ringMember{name: p.Name, node: p.Spec.NodeName}
	m.rank, m.ranked = planinput.RankOf(p)
	if suffix := ordinalSuffix.FindString(p.Name); suffix != "" {
		m.ordinal, m.hasOrd = parseUint(suffix[1:])
	}
	return m
}

// ringLevels are the levels a report counts, widest first; nodes last.
var ringLevels = []string{ZoneLabel, BlockLabel, RackLabel, HostnameLabel}

// ringOf orders members by rank (by ordinal when none has a rank) and
// words the crossings of every level their nodes span.
func ringOf(members []ringMember, labels map[string]map[string]string) ([]string, string) {
	if len(members) < 2 {
		return nil, ""
	}
	ranked, ordinals := true, true
	for _, m := range members {
		ranked = ranked && m.ranked
		ordinals = ordinals && m.hasOrd
	}
	if !ranked && !ordinals {
		return nil, ""
	}
	members = slices.Clone(members)
	slices.SortFunc(members, func(a, b ringMember) int {
		if ranked {
			return cmp.Or(cmp.Compare(a.rank, b.rank), strings.Compare(a.name, b.name))
		}
		return cmp.Or(cmp.Compare(a.ordinal, b.ordinal), strings.Compare(a.name, b.name))
	})
	ring := make([]string, len(members))
	for i, m := range members {
		ring[i] = m.node
	}
	counts := crossings(ring, labels, ringLevels)
	var parts []string
	for i, key := range ringLevels {
		if _, labelled := labels[ring[0]][key]; !labelled {
			continue
		}
		name := keyName(key)
		if key == HostnameLabel {
			name = "node"
		}
		parts = append(parts, fmt.Sprintf("%d %s", counts[i], name))
	}
	by := "ranks"
	if !ranked {
		by = "pods by name (no ranks)"
	}
	return ring, fmt.Sprintf("ring of %d %s crosses %s boundaries", len(ring), by, joinAnd(parts))
}

// crossings counts, per key, the ring's neighbours (and its last and
// first member) on nodes with different values of key.
func crossings(ring []string, labels map[string]map[string]string, keys []string) []int {
	c := placement.Crossings(ring, func(node, key string) string { return labels[node][key] }, keys)
	return c[:len(keys)]
}

func joinAnd(parts []string) string {
	if len(parts) < 2 {
		return strings.Join(parts, "")
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
