package sim

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strings"
)

//go:embed report.html.tmpl
var reportTemplate string

var reportTmpl = template.Must(template.New("report").Parse(reportTemplate))

type reportPage struct {
	Passed, Total int
	Scenarios     []reportScenario
}

type reportScenario struct {
	ID, Name, Description, Cluster, Source string
	Passed                                 bool
	ChecksPassed, Checks                   int
	Duration                               string
	Err                                    string
	Skipped                                int
	Legend                                 []legendEntry
	Frames                                 []reportFrame
}

type legendEntry struct {
	Name, Color, Policy string
}

type reportFrame struct {
	ID, Title, Action, Duration, Err string
	Number, Of                       int
	Passed                           bool
	Picture                          template.HTML
	Rows                             []reportRow
	Evictions                        bool
	Done                             bool
	Checks                           []Check
}

type reportRow struct {
	Name, Color, Policy, Where string
	// Note is the scheduler's word on where a group with preferred
	// levels went and why.
	Note                          string
	Depth                         int
	Bound, Pending, Done, Evicted int
}

// WriteReport writes a self-contained HTML page (inline CSS and SVG, no
// script) with, per scenario, a legend of its groups and one frame per
// step: a picture of the cluster with nodes coloured by the groups placed
// on them, the groups table and the checks.
func WriteReport(w io.Writer, results []*Result) error {
	page := reportPage{Total: len(results)}
	for i, res := range results {
		if res.Passed() {
			page.Passed++
		}
		page.Scenarios = append(page.Scenarios, reportScenarioOf(i, res))
	}
	if err := reportTmpl.Execute(w, page); err != nil {
		return fmt.Errorf("render report: %w", err)
	}
	return nil
}

func reportScenarioOf(i int, res *Result) reportScenario {
	sc := res.Scenario
	colors := groupColors(res)
	passed, total := res.Checks()
	out := reportScenario{
		ID:           fmt.Sprintf("s%d-%s", i+1, sc.Name),
		Name:         sc.Name,
		Description:  sc.Description,
		Cluster:      sc.Cluster.describe(),
		Source:       sc.Source,
		Passed:       res.Passed(),
		ChecksPassed: passed,
		Checks:       total,
		Duration:     roundDuration(res.Duration),
		Skipped:      res.Skipped,
	}
	if res.Err != nil {
		out.Err = res.Err.Error()
	}
	policies := map[string]string{}
	var order []string
	for _, s := range res.Steps {
		for _, g := range s.Snapshot.Groups {
			if !g.Leaf {
				continue
			}
			if _, ok := policies[g.Name]; !ok {
				order = append(order, g.Name)
			}
			policies[g.Name] = g.Policy
		}
	}
	for _, name := range order {
		out.Legend = append(out.Legend, legendEntry{Name: name, Color: colors[name], Policy: policies[name]})
	}
	for j := range res.Steps {
		s := &res.Steps[j]
		f := reportFrame{
			ID:       fmt.Sprintf("%s-step%d", out.ID, j+1),
			Title:    s.Name,
			Action:   s.Action,
			Duration: roundDuration(s.Duration),
			Number:   j + 1,
			Of:       len(sc.Steps),
			Passed:   s.Err == nil,
			Checks:   s.Checks,
			// clusterSVG escapes every string it writes.
			Picture: template.HTML(clusterSVG(s.Snapshot, colors, fmt.Sprintf("%s step %d: %s", sc.Name, j+1, s.Name))),
		}
		if s.Err != nil {
			f.Err = s.Err.Error()
		}
		for _, c := range s.Checks {
			f.Passed = f.Passed && c.Pass
		}
		for _, g := range s.Snapshot.Groups {
			f.Evictions = f.Evictions || g.Evicted > 0
			f.Done = f.Done || g.Done > 0
			color := ""
			if g.Leaf {
				color = colorOf(colors, g.Name)
			}
			row := reportRow{Name: g.Name, Color: color, Policy: g.Policy, Where: g.Where(),
				Depth: g.Depth, Bound: g.Bound, Pending: g.Pending, Done: g.Done, Evicted: g.Evicted}
			if g.Bound > 0 {
				row.Note = g.Choice
			}
			if g.Reservation != "" {
				row.Note = strings.TrimPrefix(row.Note+"; reservation: "+g.Reservation, "; ")
			}
			if g.Ring != "" && g.Kind != KindPods {
				row.Note = strings.TrimPrefix(row.Note+"; "+g.Ring, "; ")
			}
			f.Rows = append(f.Rows, row)
		}
		out.Frames = append(out.Frames, f)
	}
	return out
}

// Indent is the left padding of a row under its CompositePodGroup.
func (r reportRow) Indent() template.CSS {
	return template.CSS(fmt.Sprintf("padding-left:%.1fem", 0.4+1.2*float64(r.Depth)))
}

// Child marks rows below a CompositePodGroup.
func (r reportRow) Child() string {
	if r.Depth == 0 {
		return ""
	}
	return "└ "
}
