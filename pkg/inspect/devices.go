package inspect

import (
	"sort"

	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/debugapi"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// deviceRoom sums the device room a plan read (opts.Extra, per node) by
// the domains of every topology level of input (labels, or opts.Domains
// for device attribute levels), or over the whole cluster when input has
// no level: what explain shows of a group that claims devices.
func deviceRoom(input *placement.Group, infos []fwk.NodeInfo, opts placement.Options) []debugapi.DomainDevices {
	if len(opts.Extra) == 0 {
		return nil
	}
	var keys []string
	seen := map[string]bool{}
	var walk func(*placement.Group)
	walk = func(g *placement.Group) {
		for _, k := range append([]string{g.TopologyKey}, g.PreferredKeys...) {
			if k != "" && !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		for _, ch := range g.Children {
			walk(ch)
		}
	}
	walk(input)
	if len(keys) == 0 {
		keys = []string{""}
	}
	type cell struct{ key, domain, class string }
	sums := map[cell]*debugapi.DomainDevices{}
	var order []cell
	for _, ni := range infos {
		n := ni.Node()
		if n == nil {
			continue
		}
		room, ok := opts.Extra[n.Name]
		if !ok {
			continue
		}
		for _, k := range keys {
			domain, in := "", true
			switch byNode, device := opts.Domains[k]; {
			case k == "":
			case device:
				domain, in = byNode[n.Name]
			default:
				domain, in = n.Labels[k]
			}
			if !in {
				continue
			}
			for name, total := range room.Allocatable {
				class, ok := placement.DeviceClassOf(name)
				if !ok {
					continue
				}
				c := cell{k, domain, class}
				s := sums[c]
				if s == nil {
					s = &debugapi.DomainDevices{Key: k, Domain: domain, Class: class}
					sums[c] = s
					order = append(order, c)
				}
				s.Total += total
				s.Free += total - room.Requested[name]
			}
		}
	}
	rank := map[string]int{}
	for i, k := range keys {
		rank[k] = i
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.key != b.key {
			return rank[a.key] < rank[b.key]
		}
		if a.domain != b.domain {
			return a.domain < b.domain
		}
		return a.class < b.class
	})
	out := make([]debugapi.DomainDevices, 0, len(order))
	for _, c := range order {
		out = append(out, *sums[c])
	}
	return out
}
