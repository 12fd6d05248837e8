package sim

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
)

// evaluate checks expectations against a snapshot, one Check per field set.
func evaluate(exps []Expectation, snap Snapshot) []Check {
	var checks []Check
	for _, e := range exps {
		g, ok := snap.find(e.Group)
		if !ok {
			names := make([]string, 0, len(snap.Groups))
			for _, g := range snap.Groups {
				names = append(names, g.Name)
			}
			checks = append(checks, Check{Text: fmt.Sprintf("%s: no such group in the namespace (groups: %s)", e.Group, orNone(names))})
			continue
		}
		if e.Bound != nil {
			checks = append(checks, countCheck(g.Name, "bound", g.Bound, *e.Bound))
		}
		if e.Pending != nil {
			checks = append(checks, countCheck(g.Name, "pending", g.Pending, *e.Pending))
		}
		if e.Done != nil {
			checks = append(checks, countCheck(g.Name, "done", g.Done, *e.Done))
		}
		if e.Evicted != nil {
			checks = append(checks, countCheck(g.Name, "evicted", g.Evicted, *e.Evicted))
		}
		if e.SameDomain != "" {
			checks = append(checks, sameDomainCheck(g, snap.nodeLabels, resolveKey(e.SameDomain)))
		}
		if e.Spans != nil {
			checks = append(checks, spansCheck(g, snap.nodeLabels, resolveKey(e.Spans.Key), e.Spans.Count))
		}
		if e.Crossings != nil {
			checks = append(checks, crossingsCheck(g, snap.nodeLabels, resolveKey(e.Crossings.Key), e.Crossings.Count))
		}
	}
	return checks
}

// find looks a group up by name, preferring objects to implicit groups.
func (s Snapshot) find(name string) (GroupState, bool) {
	for _, kind := range []GroupKind{KindPodGroup, KindComposite, KindLabelGang, KindPods} {
		for _, g := range s.Groups {
			if g.Name == name && g.Kind == kind {
				return g, true
			}
		}
	}
	return GroupState{}, false
}

func countCheck(group, what string, got, want int) Check {
	if got == want {
		return Check{Text: fmt.Sprintf("%s: %d %s", group, got, what), Pass: true}
	}
	return Check{Text: fmt.Sprintf("%s: %d %s, want %d", group, got, what, want)}
}

func sameDomainCheck(g GroupState, labels map[string]map[string]string, key string) Check {
	name := domainWord(key)
	if g.Bound == 0 {
		return Check{Text: fmt.Sprintf("%s: all bound pods in one %s: none is bound", g.Name, name)}
	}
	values := sets.New[string]()
	for _, n := range g.nodeNames {
		v, ok := labels[n][key]
		if !ok {
			return Check{Text: fmt.Sprintf("%s: all bound pods in one %s: node %s has no label %s", g.Name, name, n, key)}
		}
		values.Insert(v)
	}
	list := sortedNatural(sets.List(values))
	switch {
	case len(list) == 1 && g.Bound == 1:
		return Check{Text: fmt.Sprintf("%s: its bound pod is in one %s (%s)", g.Name, name, list[0]), Pass: true}
	case len(list) == 1:
		return Check{Text: fmt.Sprintf("%s: all %d bound pods in one %s (%s)", g.Name, g.Bound, name, list[0]), Pass: true}
	}
	return Check{Text: fmt.Sprintf("%s: bound pods span %d %ss (%s), want one", g.Name, len(list), name, strings.Join(list, ", "))}
}

// spansCheck counts the domains of key the group's bound pods use.
func spansCheck(g GroupState, labels map[string]map[string]string, key string, want int) Check {
	name := domainWord(key)
	values := sets.New[string]()
	for _, n := range g.nodeNames {
		if v, ok := labels[n][key]; ok {
			values.Insert(v)
		}
	}
	list := sortedNatural(sets.List(values))
	text := fmt.Sprintf("%s: bound pods span %s (%s)", g.Name, plural(len(list), name), orNone(list))
	if len(list) == want {
		return Check{Text: text, Pass: true}
	}
	return Check{Text: fmt.Sprintf("%s, want %d", text, want)}
}

// domainWord names a domain of key: "rack", or "<key> domain" for keys
// without a short name.
func domainWord(key string) string {
	if short := keyName(key); short != key {
		return short
	}
	return key + " domain"
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

// crossingsCheck counts the ring boundary crossings of the group's bound
// pods at the level key.
func crossingsCheck(g GroupState, labels map[string]map[string]string, key string, want int) Check {
	name := domainWord(key)
	if key == HostnameLabel {
		name = "node"
	}
	got := crossings(g.ring, labels, []string{key})[0]
	noun := " boundaries"
	if got == 1 {
		noun = " boundary"
	}
	text := fmt.Sprintf("%s: the ring of %d bound pods crosses %d %s%s", g.Name, len(g.ring), got, name, noun)
	if got == want {
		return Check{Text: text, Pass: true}
	}
	return Check{Text: fmt.Sprintf("%s, want %d", text, want)}
}
