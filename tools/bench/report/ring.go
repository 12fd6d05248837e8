package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
)

// Ring says, after a run, how often each gang's all-reduce ring crosses
// the boundaries of each topology level. The ring takes a gang's members
// in the order the case lists them (member i is rank i): rank i sends to
// i+1 and the last rank to rank 0, and every such pair on different
// domains of a level is one crossing there. It is computed from the API's
// objects alone, whether or not the scheduler knew the ranks.
type Ring struct {
	// Keys are the levels, widest first; the last is usually the hostname.
	Keys []string `json:"keys"`
	// Gangs counts the case's gangs; Placed those with every member bound.
	Gangs  int `json:"gangs"`
	Placed int `json:"placed"`
	// Mean and Max are the crossings per placed gang, one per key.
	Mean []float64 `json:"mean"`
	Max  []int     `json:"max"`
}

// ComputeRing counts the ring crossings of every gang whose members are
// all bound.
func ComputeRing(groups []Group, nodes []*corev1.Node, pods []*corev1.Pod, keys []string) Ring {
	r := Ring{Keys: keys, Gangs: len(groups), Mean: make([]float64, len(keys)), Max: make([]int, len(keys))}
	labels := make(map[string]map[string]string, len(nodes))
	for _, n := range nodes {
		labels[n.Name] = n.Labels
	}
	nodeOf := make(map[string]string, len(pods))
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			nodeOf[p.Name] = p.Spec.NodeName
		}
	}
	totals := make([]int, len(keys))
	for _, g := range groups {
		ring := make([]string, 0, len(g.Members))
		for _, m := range g.Members {
			if node, ok := nodeOf[m]; ok {
				ring = append(ring, node)
			}
		}
		if len(ring) == 0 || len(ring) < len(g.Members) {
			continue
		}
		r.Placed++
		for k, key := range keys {
			n := 0
			for i := range ring {
				if len(ring) > 1 && labels[ring[i]][key] != labels[ring[(i+1)%len(ring)]][key] {
					n++
				}
			}
			totals[k] += n
			r.Max[k] = max(r.Max[k], n)
		}
	}
	for k := range keys {
		if r.Placed > 0 {
			r.Mean[k] = float64(totals[k]) / float64(r.Placed)
		}
	}
	return r
}

// medianRing picks the run with the median crossings at the last level.
func medianRing(rs []Ring) *Ring {
	if len(rs) == 0 {
		return nil
	}
	sorted := append([]Ring(nil), rs...)
	last := func(r Ring) float64 {
		if len(r.Mean) == 0 {
			return 0
		}
		return r.Mean[len(r.Mean)-1]
	}
	sort.SliceStable(sorted, func(i, j int) bool { return last(sorted[i]) < last(sorted[j]) })
	r := sorted[(len(sorted)-1)/2]
	return &r
}

func writeRing(w io.Writer, sums []Summary) error {
	var rows []Summary
	for _, s := range sums {
		if s.Ring != nil {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Ring boundary crossings per gang (member i sends to i+1, the last to the first; from the API):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tarrival\tarm\tgangs placed\tcrossings per gang, mean (max)\t")
	for _, s := range rows {
		r := s.Ring
		parts := make([]string, len(r.Keys))
		for k, key := range r.Keys {
			parts[k] = fmt.Sprintf("%s %.1f (%d)", shortKey(key), r.Mean[k], r.Max[k])
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t\n", s.Case, s.Arrival, s.Arm, r.Placed, r.Gangs, strings.Join(parts, ", "))
	}
	return tw.Flush()
}

// shortKey is the last path element of a label key: rack, zone, hostname.
func shortKey(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[i+1:]
	}
	return key
}
