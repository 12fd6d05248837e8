package sim

import (
	"fmt"
	"strings"
)

// This file says in words what scenario parts do, for tables and reports.

func (st *Step) describe() string {
	switch {
	case st.Create != nil:
		return st.Create.describe()
	case st.AddNodes != nil:
		return st.AddNodes.describe()
	case st.DeleteNodes != nil:
		if st.DeleteNodes.Prefix != "" {
			return fmt.Sprintf("delete the nodes named %s* and the pods on them", st.DeleteNodes.Prefix)
		}
		return fmt.Sprintf("delete %s %s and the pods on them", plural(len(st.DeleteNodes.Names), "node"), strings.Join(st.DeleteNodes.Names, ", "))
	case st.Delete != nil:
		if st.Delete.Prefix != "" {
			return fmt.Sprintf("delete every %s named %s*", st.Delete.Kind, st.Delete.Prefix)
		}
		return "delete " + st.Delete.Kind + " " + st.Delete.Name
	case st.Wait != nil:
		return st.Wait.describe()
	case st.Stream != nil:
		return st.Stream.describe()
	}
	return ""
}

func (c *Create) describe() string {
	var parts []string
	for _, o := range c.objects {
		parts = append(parts, o.kind+" "+o.obj.GetName())
	}
	for i := range c.Gangs {
		g := &c.Gangs[i]
		kind := "gang"
		if g.LabelPair {
			kind = "label-pair gang"
		}
		s := fmt.Sprintf("%s %s: %s of %s", kind, g.Name, podRange("", g.podPrefix(), "%d", g.Size), requests(g.CPU, g.Memory, g.GPUs))
		extra := []string{fmt.Sprintf("min %d", g.minCount())}
		if p := preferredText(g.PreferredTopology); p != "" {
			extra = append(extra, p)
		}
		if g.TopologyKey != "" {
			extra = append(extra, "one "+keyName(resolveKey(g.TopologyKey)))
		}
		if g.DisruptionAll {
			extra = append(extra, "evicted whole")
		}
		if g.Parent != "" {
			extra = append(extra, "in "+g.Parent)
		}
		if g.PriorityClass != "" {
			extra = append(extra, "priority "+g.PriorityClass)
		}
		if g.Runtime != "" {
			extra = append(extra, "each runs "+g.runtime.String())
		}
		switch secs, _ := g.reserveAfterSeconds(); {
		case g.ReserveAfter == "":
		case secs < 0:
			extra = append(extra, "never reserved for")
		default:
			extra = append(extra, fmt.Sprintf("reserve after %ds", secs))
		}
		parts = append(parts, s+" ("+strings.Join(extra, ", ")+")")
	}
	for _, ps := range c.Pods {
		s := fmt.Sprintf("%s of %s", podRange("plain ", ps.Name+"-", "%02d", ps.Count), requests(ps.CPU, ps.Memory, ps.GPUs))
		if ps.PriorityClass != "" {
			s += " (priority " + ps.PriorityClass + ")"
		}
		parts = append(parts, s)
	}
	out := "create " + strings.Join(parts, "; ")
	if c.Interleave {
		out += "; pods created interleaved"
	}
	return out
}

// preferredText words preferred levels: "prefer one rack, else fewest
// racks in a block".
func preferredText(levels []string) string {
	if len(levels) == 0 {
		return ""
	}
	names := make([]string, len(levels))
	for i, k := range levels {
		names[i] = keyName(resolveKey(k))
	}
	s := "prefer one " + names[0]
	for i := 1; i < len(names); i++ {
		s += fmt.Sprintf(", else fewest %ss in a %s", names[i-1], names[i])
	}
	return s
}

// podRange is "8 pods a-0..7" or "1 pod a-0", with an optional adjective
// before "pods".
func podRange(adjective, prefix, numFmt string, n int) string {
	if n == 1 {
		return "1 " + adjective + "pod " + prefix + fmt.Sprintf(numFmt, 0)
	}
	return fmt.Sprintf("%d %spods %s"+numFmt+".."+numFmt, n, adjective, prefix, 0, n-1)
}

// requests is "4 cpu" or "1 cpu + 2 GPUs".
func requests(cpu, memory Amount, gpus int) string {
	if cpu == "" {
		cpu = "1"
	}
	s := string(cpu) + " cpu"
	if memory != "" {
		s += " + " + string(memory)
	}
	if gpus > 0 {
		s += " + " + plural(gpus, "GPU")
	}
	return s
}

func (a *AddNodes) describe() string {
	s := fmt.Sprintf("add %s", plural(a.Count, "node"))
	if a.Count == 1 {
		s += fmt.Sprintf(" %s-0", a.Prefix)
	} else {
		s += fmt.Sprintf(" %s-0..%d", a.Prefix, a.Count-1)
	}
	var res []string
	if a.CPU != "" {
		res = append(res, string(a.CPU)+" cpu")
	}
	if a.Memory != "" {
		res = append(res, string(a.Memory))
	}
	if a.GPUs > 0 {
		res = append(res, plural(a.GPUs, "GPU"))
	}
	if len(res) > 0 {
		s += " (" + strings.Join(res, ", ") + " each)"
	}
	var where []string
	if a.Zone != "" {
		where = append(where, "zone "+a.Zone)
	}
	if a.Rack != "" {
		where = append(where, "rack "+a.Rack)
	}
	if len(where) > 0 {
		s += " in " + strings.Join(where, ", ")
	}
	return s
}

func (w *Wait) describe() string {
	switch w.For {
	case "bound":
		return fmt.Sprintf("wait up to %s until %s %s bound", w.timeout, countOf(w.Count, w.selection()), are(w.Count))
	case "done":
		return fmt.Sprintf("wait up to %s until %s %s done (ran and finished)", w.timeout, countOf(w.Count, w.selection()), are(w.Count))
	}
	return fmt.Sprintf("wait up to %s until %s %s pending with a verdict from the scheduler, then check they stay pending for %s",
		w.timeout, countOf(w.Count, w.selection()), are(w.Count), w.duration)
}

// selection is "of tfjob" or "named tfjob-*".
func (w *Wait) selection() string {
	if w.Prefix != "" {
		return "named " + w.Prefix + "*"
	}
	return "of " + w.Group
}

// countOf is "8 pods of tfjob", or "every pod of tfjob" for count 0.
func countOf(count int, selection string) string {
	switch count {
	case 0:
		return "every pod " + selection
	case 1:
		return "1 pod " + selection
	}
	return fmt.Sprintf("%d pods %s", count, selection)
}

// are is the verb for countOf's phrase.
func are(count int) string {
	if count > 1 {
		return "are"
	}
	return "is"
}

// describe is "1 zone × 1 rack × 2 nodes (2 nodes), each 8 cpu, 64Gi memory, 2 GPUs".
func (c *ClusterSpec) describe() string {
	cpu, memory := c.CPU, c.Memory
	if cpu == "" {
		cpu = "8"
	}
	if memory == "" {
		memory = "64Gi"
	}
	s := fmt.Sprintf("%s × %s × %s (%d in all), each %s cpu, %s memory",
		plural(c.Zones, "zone"), plural(c.Racks, "rack"), plural(c.NodesPerRack, "node"),
		c.Zones*c.Racks*c.NodesPerRack, cpu, memory)
	if c.RacksPerBlock > 0 {
		s = strings.Replace(s, plural(c.Racks, "rack"), plural(c.Racks, "rack")+" (blocks of "+plural(c.RacksPerBlock, "rack")+")", 1)
	}
	if c.GPUs > 0 {
		s += ", " + plural(c.GPUs, "GPU")
	}
	return s
}
