package report

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
)

// Spread says, after a run, over how many domains of a key (racks) the
// gangs went: what a preferred topology level is for. A gang in one rack
// talks over one switch; each more rack is traffic across the fabric.
type Spread struct {
	// Key is the node label whose values are the domains.
	Key string `json:"key"`
	// Gangs counts the case's gangs; Placed those with every member bound.
	Gangs  int `json:"gangs"`
	Placed int `json:"placed"`
	// OneDomain counts placed gangs inside one domain.
	OneDomain int `json:"oneDomain"`
	// MeanDomains and MaxDomains are over the placed gangs.
	MeanDomains float64 `json:"meanDomains"`
	MaxDomains  int     `json:"maxDomains"`
}

// ComputeSpread counts, for every gang whose members are all bound, the
// values of key over its members' nodes.
func ComputeSpread(groups []Group, nodes []*corev1.Node, pods []*corev1.Pod, key string) Spread {
	s := Spread{Key: key, Gangs: len(groups)}
	labelOf := make(map[string]string, len(nodes))
	for _, n := range nodes {
		labelOf[n.Name] = n.Labels[key]
	}
	nodeOf := make(map[string]string, len(pods))
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			nodeOf[p.Name] = p.Spec.NodeName
		}
	}
	total := 0
	for _, g := range groups {
		domains := map[string]bool{}
		complete := len(g.Members) > 0
		for _, m := range g.Members {
			node, ok := nodeOf[m]
			if !ok {
				complete = false
				break
			}
			domains[labelOf[node]] = true
		}
		if !complete {
			continue
		}
		s.Placed++
		total += len(domains)
		s.MaxDomains = max(s.MaxDomains, len(domains))
		if len(domains) == 1 {
			s.OneDomain++
		}
	}
	if s.Placed > 0 {
		s.MeanDomains = float64(total) / float64(s.Placed)
	}
	return s
}

// medianSpread picks the run with the median MeanDomains.
func medianSpread(ss []Spread) *Spread {
	if len(ss) == 0 {
		return nil
	}
	sorted := append([]Spread(nil), ss...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].MeanDomains < sorted[j].MeanDomains })
	s := sorted[(len(sorted)-1)/2]
	return &s
}

func writeSpread(w io.Writer, sums []Summary) error {
	var rows []Summary
	for _, s := range sums {
		if s.Spread != nil {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Spread of the gangs (domains per gang, from the API):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tarrival\tarm\tgangs placed\tin one domain\tdomains per gang (mean)\t(max)\tkey\t")
	for _, s := range rows {
		sp := s.Spread
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%.2f\t%d\t%s\t\n", s.Case, s.Arrival, s.Arm, sp.Placed, sp.Gangs, sp.OneDomain, sp.MeanDomains, sp.MaxDomains, sp.Key)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "gangs placed: every member bound; in one domain: of those, all members in one value of key.")
	return nil
}
