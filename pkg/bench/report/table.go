package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Arm names as they appear in results. The harness defines the arms; the
// table needs to know which are Phalanx and which are the baselines.
const (
	ArmPhalanx        = "phalanx"
	ArmPhalanxProcess = "phalanx-proc"
	ArmUpstream       = "upstream"
	ArmCeiling        = "ceiling"
)

// Summary is the median over the repeats of one arm on one case.
type Summary struct {
	Case, Arm string
	Runs      int
	Failed    int
	Pods      int
	// Bound is the smallest bound count over the runs.
	Bound         int
	ReadySeconds  float64
	PodsPerSecond float64
	// APIWritesPerPod is the median of APIWrites(APIRequests) / pods.
	APIWritesPerPod float64
	// LoadAverage is the median machine load at the end of the runs.
	LoadAverage float64
	// PodsPerSecondMin and Max are the range over the runs.
	PodsPerSecondMin, PodsPerSecondMax float64
	FirstGroupSeconds                  float64
	GroupP50Seconds                    float64
	GroupP99Seconds                    float64
	AttemptsPerPod                     float64
	HasAttempts                        bool
	// PhaseSeconds is the median of each SchedulerMetrics phase.
	PhaseSeconds map[string]float64
	PeakRSSBytes uint64
	MemoryScope  string
	SchedulerCPU float64
	HarnessCPU   float64
	Groups       int
	// PlacementOK is true when the Verdict of every run that ran was OK.
	PlacementOK bool
	Stops       []string
}

// Summarize groups results by case and arm, in order of first appearance,
// and takes the median of each measure over the runs that did not fail.
func Summarize(results []Result) []Summary {
	type key struct{ c, a string }
	var order []key
	runs := map[key][]Result{}
	for _, r := range results {
		k := key{r.Case, r.Arm}
		if _, seen := runs[k]; !seen {
			order = append(order, k)
		}
		runs[k] = append(runs[k], r)
	}
	out := make([]Summary, 0, len(order))
	for _, k := range order {
		s := Summary{Case: k.c, Arm: k.a, PlacementOK: true, Bound: -1}
		var writes, load, ready, pps, first, p50, p99, att, mem, sched, harness []float64
		stops := map[string]bool{}
		phases := map[string][]float64{}
		for _, r := range runs[k] {
			s.Runs++
			s.Pods, s.Groups = r.Pods, r.Groups
			if r.Error != "" {
				s.Failed++
				continue
			}
			if s.Bound < 0 || r.Verdict.Bound < s.Bound {
				s.Bound = r.Verdict.Bound
			}
			if !r.Verdict.OK() {
				s.PlacementOK = false
			}
			if !stops[r.Stop] {
				stops[r.Stop] = true
				s.Stops = append(s.Stops, r.Stop)
			}
			pps = append(pps, r.PodsPerSecond)
			if len(r.APIRequests) > 0 && r.Pods > 0 {
				writes = append(writes, APIWrites(r.APIRequests)/float64(r.Pods))
			}
			if r.LoadAverage > 0 {
				load = append(load, r.LoadAverage)
			}
			if r.ReadySeconds > 0 {
				ready = append(ready, r.ReadySeconds)
			}
			if r.FirstGroupSeconds > 0 {
				first = append(first, r.FirstGroupSeconds)
				p50 = append(p50, r.GroupP50Seconds)
				p99 = append(p99, r.GroupP99Seconds)
			}
			if r.Scheduler != nil && r.Scheduler.AttemptsPerBoundPod > 0 {
				att = append(att, r.Scheduler.AttemptsPerBoundPod)
			}
			if r.Scheduler != nil {
				for phase, v := range r.Scheduler.PhaseSeconds {
					phases[phase] = append(phases[phase], v)
				}
			}
			mem = append(mem, float64(r.PeakRSSBytes))
			s.MemoryScope = r.MemoryScope
			sched = append(sched, r.SchedulerCPUSeconds)
			harness = append(harness, r.HarnessCPUSeconds)
		}
		if s.Bound < 0 {
			s.Bound = 0
		}
		s.ReadySeconds = median(ready)
		s.LoadAverage = median(load)
		s.APIWritesPerPod = median(writes)
		s.PodsPerSecond = median(pps)
		s.PodsPerSecondMin, s.PodsPerSecondMax = Percentile(pps, 0), Percentile(pps, 100)
		s.FirstGroupSeconds = median(first)
		s.GroupP50Seconds = median(p50)
		s.GroupP99Seconds = median(p99)
		s.AttemptsPerPod, s.HasAttempts = median(att), len(att) > 0
		s.PeakRSSBytes = uint64(median(mem))
		s.SchedulerCPU = median(sched)
		s.HarnessCPU = median(harness)
		if len(phases) > 0 {
			s.PhaseSeconds = map[string]float64{}
			for phase, vs := range phases {
				s.PhaseSeconds[phase] = median(vs)
			}
		}
		out = append(out, s)
	}
	return out
}

// WriteTable prints the per-arm table and the ratio table.
func WriteTable(w io.Writer, results []Result) error {
	sums := Summarize(results)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tarm\truns\tbound\tready\tpods/s\t1st gang\tp50 gang\tp99 gang\tattempts/pod\tAPI writes/pod\tpeak RSS\tsched CPU\tharness CPU\tload\tplacement\t")
	for _, s := range sums {
		placement := "ok"
		switch {
		case s.Failed == s.Runs:
			placement = "FAILED TO RUN"
		case !s.PlacementOK:
			placement = "VIOLATED"
		}
		if s.Bound < s.Pods && s.Failed < s.Runs {
			placement += fmt.Sprintf(" (stopped: %s)", strings.Join(s.Stops, ", "))
		}
		if s.Failed > 0 && s.Failed < s.Runs {
			placement += fmt.Sprintf(" (%d of %d runs failed to run; see the JSON)", s.Failed, s.Runs)
		}
		att := "-"
		if s.HasAttempts {
			att = fmt.Sprintf("%.2f", s.AttemptsPerPod)
		}
		pps := fmt.Sprintf("%.1f", s.PodsPerSecond)
		if s.Runs-s.Failed > 1 {
			pps += fmt.Sprintf(" (%.0f–%.0f)", s.PodsPerSecondMin, s.PodsPerSecondMax)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1fs\t%s\t%s\t\n",
			s.Case, s.Arm, s.Runs, s.Bound, s.Pods, seconds(s.ReadySeconds), pps,
			seconds(s.FirstGroupSeconds), seconds(s.GroupP50Seconds), seconds(s.GroupP99Seconds),
			att, perPod(s.APIWritesPerPod), memory(s.PeakRSSBytes, s.MemoryScope), seconds(s.SchedulerCPU), s.HarnessCPU, loadString(s.LoadAverage), placement)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "API writes/pod: requests other than GET/LIST/WATCH the API server served in the window (binds, status writes, events), per pod of the case.")
	fmt.Fprintln(w, "load: the machine's 1-minute load average at the end of the window; the benchmark itself accounts for up to about 2, more means other work competed for the cores.")
	fmt.Fprintln(w, "peak RSS: (s) = the scheduler's own process; (h) = the whole harness process (API server, etcd, and an in-process scheduler or binder).")
	fmt.Fprintln(w, "All times are from scheduler start: ready = informers synced, gang = its last member bound; pods/s = bound pods ÷ time to the last bind. Medians over runs (pods/s range in brackets).")

	if err := writePhases(w, sums); err != nil {
		return err
	}
	ratios := Ratios(sums)
	if len(ratios) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Ratios (pods/s: higher is better for Phalanx; gang times and memory: lower is better):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tphalanx arm\tpods/s ÷ upstream\tpods/s ÷ ceiling\tupstream share of ceiling\t1st gang ÷ upstream\tp99 gang ÷ upstream\tpeak RSS ÷ upstream\t")
	for _, r := range ratios {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Case, r.Arm,
			ratio(r.PodsPerSecondVsUpstream), percentOrRatio(r.PodsPerSecondVsCeiling), percentOrRatio(r.UpstreamShareOfCeiling),
			ratio(r.FirstGroupVsUpstream), ratio(r.GroupP99VsUpstream), ratio(r.MemoryVsUpstream))
	}
	return tw.Flush()
}

// phaseColumns orders the phases of SchedulerMetrics.PhaseSeconds in the
// table; others are not shown (they are in the JSON).
var phaseColumns = []string{
	"SchedulingAttempt", "SchedulingAlgorithm", "PreFilter", "Filter", "PostFilter", "Score",
	"Reserve", "PermitWait", "PreBind", "Bind", "PodGroupAttempt", "PodGroupAlgorithm",
}

// writePhases prints where each scheduler's time went, from its metrics.
func writePhases(w io.Writer, sums []Summary) error {
	found := false
	for _, s := range sums {
		found = found || len(s.PhaseSeconds) > 0
	}
	if !found {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Where the schedulers' time went (seconds summed over pods or pod groups, from their metrics; phases overlap):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "case\tarm\t")
	for _, c := range phaseColumns {
		fmt.Fprintf(tw, "%s\t", c)
	}
	fmt.Fprintln(tw)
	for _, s := range sums {
		if len(s.PhaseSeconds) == 0 {
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t", s.Case, s.Arm)
		for _, c := range phaseColumns {
			if v, ok := s.PhaseSeconds[c]; ok {
				fmt.Fprintf(tw, "%.2f\t", v)
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// Ratio compares one Phalanx arm with the baselines on one case. A zero
// field means the comparison is not available (an arm missing, failed, or
// the measures not comparable).
type Ratio struct {
	Case, Arm               string
	PodsPerSecondVsUpstream float64
	PodsPerSecondVsCeiling  float64
	UpstreamShareOfCeiling  float64
	FirstGroupVsUpstream    float64
	GroupP99VsUpstream      float64
	// MemoryVsUpstream is only set when both schedulers ran as their own
	// process (scope ScopeScheduler).
	MemoryVsUpstream float64
}

// Ratios computes Phalanx ÷ upstream and Phalanx ÷ ceiling for every case
// that has a Phalanx arm.
func Ratios(sums []Summary) []Ratio {
	byCase := map[string]map[string]Summary{}
	var cases []string
	for _, s := range sums {
		if byCase[s.Case] == nil {
			byCase[s.Case] = map[string]Summary{}
			cases = append(cases, s.Case)
		}
		byCase[s.Case][s.Arm] = s
	}
	div := func(a, b float64) float64 {
		if a <= 0 || b <= 0 {
			return 0
		}
		return a / b
	}
	var out []Ratio
	for _, c := range cases {
		arms := byCase[c]
		up, hasUp := arms[ArmUpstream]
		ceil, hasCeil := arms[ArmCeiling]
		hasUp = hasUp && up.Failed < up.Runs
		hasCeil = hasCeil && ceil.Failed < ceil.Runs
		for _, name := range []string{ArmPhalanx, ArmPhalanxProcess} {
			p, ok := arms[name]
			if !ok || p.Failed == p.Runs {
				continue
			}
			r := Ratio{Case: c, Arm: name}
			if hasUp {
				r.PodsPerSecondVsUpstream = div(p.PodsPerSecond, up.PodsPerSecond)
				r.FirstGroupVsUpstream = div(p.FirstGroupSeconds, up.FirstGroupSeconds)
				r.GroupP99VsUpstream = div(p.GroupP99Seconds, up.GroupP99Seconds)
				if p.MemoryScope == ScopeScheduler && up.MemoryScope == ScopeScheduler {
					r.MemoryVsUpstream = div(float64(p.PeakRSSBytes), float64(up.PeakRSSBytes))
				}
			}
			if hasCeil {
				r.PodsPerSecondVsCeiling = div(p.PodsPerSecond, ceil.PodsPerSecond)
				if hasUp {
					r.UpstreamShareOfCeiling = div(up.PodsPerSecond, ceil.PodsPerSecond)
				}
			}
			out = append(out, r)
		}
	}
	return out
}

func perPod(v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func loadString(l float64) string {
	if l <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", l)
}

func seconds(s float64) string {
	if s <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fs", s)
}

func memory(b uint64, scope string) string {
	if b == 0 {
		return "-"
	}
	tag := "h"
	if scope == ScopeScheduler {
		tag = "s"
	}
	return fmt.Sprintf("%d MiB (%s)", b>>20, tag)
}

func ratio(r float64) string {
	if r <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", r)
}

func percentOrRatio(r float64) string {
	if r <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", 100*r)
}
