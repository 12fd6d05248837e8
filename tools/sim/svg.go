package sim

import (
	"fmt"
	"html"
	"sort"
	"strings"
)

// Layout of the cluster picture, in SVG user units (pixels).
const (
	svgMargin = 10
	svgMaxRow = 1240
	nodeW     = 132
	nodeH     = 38
	nodeGap   = 6
	barH      = 13
	rackPad   = 8
	rackHead  = 20
	rackGap   = 10
	zonePad   = 10
	zoneHead  = 24
	zoneGap   = 16
	shelfLine = 20
	podBox    = 11
	maxShown  = 40
)

// palette is Tableau 10: distinct hues that read on white.
var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

// groupColors gives each leaf group of a scenario a colour, in the order
// groups first appear, so a group keeps its colour in every frame.
func groupColors(res *Result) map[string]string {
	colors := map[string]string{}
	for _, s := range res.Steps {
		for _, g := range s.Snapshot.Groups {
			if _, ok := colors[g.Name]; ok || !g.Leaf {
				continue
			}
			colors[g.Name] = palette[len(colors)%len(palette)]
		}
	}
	return colors
}

type rackLayout struct {
	name  string
	nodes []NodeState
}

type zoneLayout struct {
	name  string
	racks []*rackLayout
}

// layoutZones groups nodes by zone and rack, in natural order; nodes
// without the labels go to "no zone" and "no rack", drawn last.
func layoutZones(nodes []NodeState) []*zoneLayout {
	zones := map[string]*zoneLayout{}
	racks := map[[2]string]*rackLayout{}
	for _, n := range nodes {
		z := zones[n.Zone]
		if z == nil {
			z = &zoneLayout{name: n.Zone}
			zones[n.Zone] = z
		}
		key := [2]string{n.Zone, n.Rack}
		r := racks[key]
		if r == nil {
			r = &rackLayout{name: n.Rack}
			racks[key] = r
			z.racks = append(z.racks, r)
		}
		r.nodes = append(r.nodes, n)
	}
	out := make([]*zoneLayout, 0, len(zones))
	for _, z := range zones {
		sort.Slice(z.racks, func(i, j int) bool { return labelLess(z.racks[i].name, z.racks[j].name) })
		out = append(out, z)
	}
	sort.Slice(out, func(i, j int) bool { return labelLess(out[i].name, out[j].name) })
	return out
}

// labelLess sorts naturally with the empty value last.
func labelLess(a, b string) bool {
	if (a == "") != (b == "") {
		return b == ""
	}
	return naturalLess(a, b)
}

func orLabel(v, none string) string {
	if v == "" {
		return none
	}
	return v
}

// clusterSVG draws zones → racks → nodes, each node's bar filled with the
// groups that run there, then the pending pods and evictions.
func clusterSVG(snap Snapshot, colors map[string]string, title string) string {
	var body strings.Builder
	x, y, rowH, width := svgMargin, svgMargin, 0, 0
	for _, z := range layoutZones(snap.Nodes) {
		zoneW := 2*zonePad + len(z.racks)*(nodeW+2*rackPad) + (len(z.racks)-1)*rackGap
		tallest := 0
		for _, r := range z.racks {
			tallest = max(tallest, len(r.nodes))
		}
		rackH := rackHead + tallest*(nodeH+nodeGap) - nodeGap + rackPad
		zoneH := zoneHead + rackH + zonePad
		if x > svgMargin && x+zoneW > svgMaxRow {
			x, y, rowH = svgMargin, y+rowH+zoneGap, 0
		}
		fmt.Fprintf(&body, `<g class="zone"><rect x="%d" y="%d" width="%d" height="%d" rx="8"/><text x="%d" y="%d" class="zl">%s</text>`,
			x, y, zoneW, zoneH, x+zonePad, y+16, esc(orLabel(z.name, "no zone")))
		rx := x + zonePad
		for _, r := range z.racks {
			ry := y + zoneHead
			fmt.Fprintf(&body, `<g class="rack"><rect x="%d" y="%d" width="%d" height="%d" rx="5"/><text x="%d" y="%d" class="rl">%s</text>`,
				rx, ry, nodeW+2*rackPad, rackH, rx+rackPad, ry+14, esc(orLabel(r.name, "no rack")))
			ny := ry + rackHead
			for _, n := range r.nodes {
				writeNode(&body, n, colors, rx+rackPad, ny)
				ny += nodeH + nodeGap
			}
			body.WriteString(`</g>`)
			rx += nodeW + 2*rackPad + rackGap
		}
		body.WriteString(`</g>`)
		width = max(width, x+zoneW)
		rowH = max(rowH, zoneH)
		x += zoneW + zoneGap
	}
	if len(snap.Nodes) == 0 {
		fmt.Fprintf(&body, `<text x="%d" y="%d" class="note">no nodes</text>`, svgMargin, y+14)
		rowH = 20
	}
	y += rowH + 14
	y = writeShelf(&body, snap, colors, y)
	width = max(width, 420) + svgMargin
	return fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" class="cluster" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">%s</svg>`,
		width, y, width, y, esc(title), body.String())
}

func writeNode(b *strings.Builder, n NodeState, colors map[string]string, x, y int) {
	var tip []string
	for _, s := range n.Slots {
		tip = append(tip, fmt.Sprintf("%s: %s (%.0f%%)", s.Group, plural(s.Pods, "pod"), 100*s.Share))
	}
	if len(tip) == 0 {
		tip = append(tip, "free")
	}
	fmt.Fprintf(b, `<g class="node"><title>%s</title><rect x="%d" y="%d" width="%d" height="%d" rx="4"/><text x="%d" y="%d" class="nl">%s</text>`,
		esc(n.Name+" — "+strings.Join(tip, ", ")), x, y, nodeW, nodeH, x+6, y+14, esc(n.Name))
	barX, barY, barW := x+6, y+nodeH-barH-6, nodeW-12
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" class="bar"/>`, barX, barY, barW, barH)
	used := 0.0
	for _, s := range n.Slots {
		share := min(s.Share, 1-used)
		if share <= 0 {
			continue
		}
		fmt.Fprintf(b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" class="seg"/>`,
			float64(barX)+used*float64(barW), barY, share*float64(barW), barH, colorOf(colors, s.Group))
		used += share
	}
	b.WriteString(`</g>`)
}

// writeShelf draws a row of dashed boxes per group with pending pods, and
// a line of evictions; it returns the height used so far.
func writeShelf(b *strings.Builder, snap Snapshot, colors map[string]string, y int) int {
	var pending, evicted []GroupState
	for _, g := range snap.Groups {
		if !g.Leaf {
			continue
		}
		if g.Pending > 0 {
			pending = append(pending, g)
		}
		if g.Evicted > 0 {
			evicted = append(evicted, g)
		}
	}
	if len(pending) == 0 {
		fmt.Fprintf(b, `<text x="%d" y="%d" class="note">No pending pods.</text>`, svgMargin, y)
		y += shelfLine
	}
	for _, g := range pending {
		fmt.Fprintf(b, `<g class="pending"><title>%s</title><text x="%d" y="%d" class="pl">%s</text>`,
			esc(fmt.Sprintf("%s: %d pending", g.Name, g.Pending)), svgMargin, y, esc(fmt.Sprintf("%s: %d pending", g.Name, g.Pending)))
		px := svgMargin + 180
		for i := 0; i < g.Pending && i < maxShown; i++ {
			fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" rx="2" fill="%s" stroke="%s" class="pod"/>`,
				px, y-podBox+1, podBox, podBox, colorOf(colors, g.Name), colorOf(colors, g.Name))
			px += podBox + 3
		}
		if g.Pending > maxShown {
			fmt.Fprintf(b, `<text x="%d" y="%d" class="pl">+%d</text>`, px+2, y, g.Pending-maxShown)
		}
		b.WriteString(`</g>`)
		y += shelfLine
	}
	if len(evicted) > 0 {
		var parts []string
		for _, g := range evicted {
			parts = append(parts, fmt.Sprintf("%s %d", g.Name, g.Evicted))
		}
		fmt.Fprintf(b, `<text x="%d" y="%d" class="ev">Evicted so far: %s</text>`, svgMargin, y, esc(strings.Join(parts, ", ")))
		y += shelfLine
	}
	return y
}

func colorOf(colors map[string]string, group string) string {
	if c, ok := colors[group]; ok {
		return c
	}
	return "#888888"
}

func esc(s string) string { return html.EscapeString(s) }
