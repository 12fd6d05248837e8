package sim

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

const textWidth = 78

// writeHeader introduces a scenario.
func writeHeader(w io.Writer, sc *Scenario) {
	title := "== " + sc.Name + " "
	fmt.Fprintf(w, "\n%s%s\n", title, strings.Repeat("=", max(textWidth-len(title), 3)))
	for _, line := range wrap(sc.Description, textWidth) {
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "Cluster: %s\n", sc.Cluster.describe())
}

// writeStep prints one step: what it did, the groups table, what the
// scheduler says about placements that changed since prev, and the checks.
func writeStep(w io.Writer, sc *Scenario, i int, sr *StepResult, prev Snapshot) {
	fmt.Fprintf(w, "\n[%d/%d] %s  (%s)\n", i+1, len(sc.Steps), sr.Name, roundDuration(sr.Duration))
	for _, line := range wrap(sr.Action, textWidth-6) {
		fmt.Fprintf(w, "      %s\n", line)
	}
	writeGroups(w, "      ", sr.Snapshot)
	said, reserved, rings := map[string]string{}, map[string]string{}, map[string]string{}
	for _, g := range prev.Groups {
		said[g.Name] = g.Choice
		reserved[g.Name] = g.Reservation
		rings[g.Name] = g.Ring
	}
	note := func(text string) {
		for i, line := range wrap(text, textWidth-8) {
			if i == 0 {
				fmt.Fprintf(w, "      > %s\n", line)
			} else {
				fmt.Fprintf(w, "        %s\n", line)
			}
		}
	}
	for _, g := range sr.Snapshot.Groups {
		if g.Choice != "" && g.Bound > 0 && said[g.Name] != g.Choice {
			note(g.Name + ": " + g.Choice)
		}
		if g.Reservation != "" && reserved[g.Name] != g.Reservation {
			note(g.Name + " reservation: " + g.Reservation)
		}
		if g.Ring != "" && g.Kind != KindPods && rings[g.Name] != g.Ring {
			note(g.Name + ": " + g.Ring)
		}
	}
	for _, c := range sr.Checks {
		fmt.Fprintf(w, "      %s  %s\n", verdict(c.Pass), c.Text)
	}
	if sr.Err != nil {
		fmt.Fprintf(w, "      ERROR %v\n", sr.Err)
	}
}

// writeGroups prints a snapshot's groups as a table.
func writeGroups(w io.Writer, indent string, snap Snapshot) {
	if len(snap.Groups) == 0 {
		fmt.Fprintf(w, "%s(no groups yet)\n", indent)
		return
	}
	evictions, done := false, false
	for _, g := range snap.Groups {
		evictions = evictions || g.Evicted > 0
		done = done || g.Done > 0
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "GROUP\tPOLICY\tBOUND/PENDING\t"
	if done {
		head += "DONE\t"
	}
	if evictions {
		head += "EVICTED\t"
	}
	fmt.Fprintf(tw, "%s%sWHERE\n", indent, head)
	for _, g := range snap.Groups {
		line := fmt.Sprintf("%s\t%s\t%d/%d\t", treeName(g), g.Policy, g.Bound, g.Pending)
		if done {
			line += fmt.Sprintf("%d\t", g.Done)
		}
		if evictions {
			line += fmt.Sprintf("%d\t", g.Evicted)
		}
		fmt.Fprintf(tw, "%s%s%s\n", indent, line, g.Where())
	}
	_ = tw.Flush()
}

// treeName indents a group under its CompositePodGroup.
func treeName(g GroupState) string {
	if g.Depth == 0 {
		return g.Name
	}
	return strings.Repeat("  ", g.Depth-1) + "└ " + g.Name
}

// writeFooter gives a scenario's verdict.
func writeFooter(w io.Writer, res *Result) {
	passed, total := res.Checks()
	fmt.Fprintf(w, "\n%s: %s, %d/%d checks passed in %s (%s)\n", res.Scenario.Name, verdict(res.Passed()),
		passed, total, plural(len(res.Steps), "step"), roundDuration(res.Duration))
	if res.Skipped > 0 {
		fmt.Fprintf(w, "  %s not run after the failure above\n", plural(res.Skipped, "step"))
	}
	if res.Err != nil {
		fmt.Fprintf(w, "  ERROR %v\n", res.Err)
	}
}

// WriteSummary prints one line per scenario and the overall verdict.
func WriteSummary(w io.Writer, results []*Result) {
	fmt.Fprintf(w, "\nSummary\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	failed := 0
	for _, r := range results {
		passed, total := r.Checks()
		if !r.Passed() {
			failed++
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d/%d checks\t%s\t%s\n", r.Scenario.Name, verdict(r.Passed()), passed, total,
			plural(len(r.Steps), "step"), roundDuration(r.Duration))
	}
	_ = tw.Flush()
	if failed == 0 {
		fmt.Fprintf(w, "All %s passed.\n", plural(len(results), "scenario"))
	} else {
		fmt.Fprintf(w, "%d of %s FAILED.\n", failed, plural(len(results), "scenario"))
	}
}

func verdict(pass bool) string {
	if pass {
		return "PASS"
	}
	return "FAIL"
}

func roundDuration(d time.Duration) string {
	return d.Round(100 * time.Millisecond).String()
}

// wrap breaks text into lines of at most width runes at spaces.
func wrap(text string, width int) []string {
	var lines []string
	for _, para := range strings.Split(strings.TrimSpace(text), "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			if line != "" && len([]rune(line))+1+len([]rune(word)) > width {
				lines = append(lines, line)
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += word
		}
		if line != "" {
			lines = append(lines, line)
		}
	}
	return lines
}

// WriteCatalog lists scenarios with their descriptions.
func WriteCatalog(w io.Writer, scenarios []*Scenario) {
	width := 0
	for _, sc := range scenarios {
		width = max(width, len(sc.Name))
	}
	for _, sc := range scenarios {
		lines := wrap(sc.Description, textWidth-width-4)
		if len(lines) == 0 {
			lines = []string{""}
		}
		fmt.Fprintf(w, "  %-*s  %s\n", width, sc.Name, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "  %*s  %s\n", width, "", l)
		}
	}
}
