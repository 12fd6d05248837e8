package report

import (
	"fmt"
	"io"
	"sort"
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
	// ArmSchedulerPlugins is sigs.k8s.io/scheduler-plugins' own scheduler
	// (Coscheduling) and PodGroup controller: a baseline like upstream.
	ArmSchedulerPlugins = "scheduler-plugins"
	// ArmKueueTAS is Kueue's manager with its topology-aware scheduling,
	// binding through upstream kube-scheduler: a placement baseline.
	ArmKueueTAS = "kueue-tas"
)

// Summary is the median over the repeats of one arm on one case.
type Summary struct {
	Case, Arm string
	// Arrival is the runs' arrival mode (ArrivalPrecreated for results
	// written before the field existed).
	Arrival string
	// Skipped is set when the arm does not apply to the case.
	Skipped string
	Runs    int
	Failed  int
	Pods    int
	// Bound is the smallest bound count over the runs.
	Bound        int
	ReadySeconds float64
	// CreateSeconds is the median time the harness took to create the
	// pods of a live run (zero for precreated runs).
	CreateSeconds float64
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
	// Fragmentation is the median run's (by CanHost) rack count; nil when
	// the case has no topology constraint.
	Fragmentation *Fragmentation
	// Spread is the median run's (by MeanDomains); nil unless the case
	// measures it.
	Spread *Spread
	// Ring is the median run's (by crossings at its last level); nil
	// unless the case measures it.
	Ring *Ring
	// Preemption is the median run's (by VictimPods) victim accounting,
	// with PartialGangs the largest over the runs; nil unless a
	// preemption case.
	Preemption *Preemption
	// Starvation is the median run's (by utilisation); nil unless a
	// starvation case.
	Starvation *Starvation
}

// Summarize groups results by case and arm, in order of first appearance,
// and takes the median of each measure over the runs that did not fail.
func Summarize(results []Result) []Summary {
	type key struct{ c, arrival, a string }
	var order []key
	runs := map[key][]Result{}
	for _, r := range results {
		k := key{r.Case, arrivalOf(r), r.Arm}
		if _, seen := runs[k]; !seen {
			order = append(order, k)
		}
		runs[k] = append(runs[k], r)
	}
	out := make([]Summary, 0, len(order))
	for _, k := range order {
		s := Summary{Case: k.c, Arm: k.a, Arrival: k.arrival, PlacementOK: true, Bound: -1}
		var frags []Fragmentation
		var starves []Starvation
		var spreads []Spread
		var rings []Ring
		var preempts []Preemption
		var create, writes, load, ready, pps, first, p50, p99, att, mem, sched, harness []float64
		stops := map[string]bool{}
		phases := map[string][]float64{}
		for _, r := range runs[k] {
			s.Runs++
			s.Pods, s.Groups = r.Pods, r.Groups
			if r.Skipped != "" {
				s.Skipped = r.Skipped
				continue
			}
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
			if r.Starvation != nil {
				starves = append(starves, *r.Starvation)
			}
			if r.Fragmentation != nil {
				frags = append(frags, *r.Fragmentation)
			}
			if r.Spread != nil {
				spreads = append(spreads, *r.Spread)
			}
			if r.Ring != nil {
				rings = append(rings, *r.Ring)
			}
			if r.Preemption != nil {
				preempts = append(preempts, *r.Preemption)
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
			if r.CreateSeconds > 0 {
				create = append(create, r.CreateSeconds)
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
		s.Fragmentation = medianFragmentation(frags)
		s.Starvation = medianStarvation(starves)
		s.Spread = medianSpread(spreads)
		s.Ring = medianRing(rings)
		s.Preemption = medianPreemption(preempts)
		s.ReadySeconds = median(ready)
		s.CreateSeconds = median(create)
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
	fmt.Fprintln(tw, "case\tarrival\tarm\truns\tbound\tready\tcreate\tpods/s\t1st gang\tp50 gang\tp99 gang\tattempts/pod\tAPI writes/pod\tpeak RSS\tsched CPU\tharness CPU\tload\tplacement\t")
	for _, s := range sums {
		if s.Skipped != "" {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\tn/a: %s\t\n", s.Case, s.Arrival, s.Arm, s.Skipped)
			continue
		}
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
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d/%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1fs\t%s\t%s\t\n",
			s.Case, s.Arrival, s.Arm, s.Runs, s.Bound, s.Pods, seconds(s.ReadySeconds), seconds(s.CreateSeconds), pps,
			seconds(s.FirstGroupSeconds), seconds(s.GroupP50Seconds), seconds(s.GroupP99Seconds),
			att, perPod(s.APIWritesPerPod), memory(s.PeakRSSBytes, s.MemoryScope), seconds(s.SchedulerCPU), s.HarnessCPU, loadString(s.LoadAverage), placement)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "API writes/pod: requests other than GET/LIST/WATCH the API server served in the window (binds, status writes, events), per pod of the case.")
	fmt.Fprintln(w, "load: the machine's 1-minute load average at the end of the window; the benchmark itself accounts for up to about 2, more means other work competed for the cores.")
	fmt.Fprintln(w, "peak RSS: (s) = the scheduler's own process; (h) = the whole harness process (API server, etcd, and an in-process scheduler or binder).")
	fmt.Fprintln(w, "arrival: precreated = every pod created before the scheduler started, times from scheduler start (ready inside the window); live = the scheduler started and ready first (ready before the window), then the harness created the pods, times from the first pod creation; create = how long the creates took (the live window cannot end before).")
	fmt.Fprintln(w, "gang = its last member bound; pods/s = bound pods ÷ time to the last bind. Medians over runs (pods/s range in brackets). Preemption cases: bound, pods/s and gang times are the high-priority gang's.")

	if err := writePreemption(w, sums); err != nil {
		return err
	}
	if err := writeStarvation(w, sums); err != nil {
		return err
	}
	if err := writeSpread(w, sums); err != nil {
		return err
	}
	if err := writeRing(w, sums); err != nil {
		return err
	}
	if err := writeFragmentation(w, sums); err != nil {
		return err
	}
	if err := writeTwins(w, sums); err != nil {
		return err
	}

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
	withSP := false
	for _, r := range ratios {
		withSP = withSP || r.HasSchedulerPlugins
	}
	fmt.Fprint(tw, "case\tarrival\tphalanx arm\tpods/s ÷ upstream\tpods/s ÷ ceiling\tupstream share of ceiling\t1st gang ÷ upstream\tp99 gang ÷ upstream\tpeak RSS ÷ upstream\t")
	if withSP {
		fmt.Fprint(tw, "pods/s ÷ scheduler-plugins\t1st gang ÷ scheduler-plugins\tp99 gang ÷ scheduler-plugins\tpeak RSS ÷ scheduler-plugins\t")
	}
	fmt.Fprintln(tw)
	for _, r := range ratios {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t", r.Case, r.Arrival, r.Arm,
			ratio(r.PodsPerSecondVsUpstream), percentOrRatio(r.PodsPerSecondVsCeiling), percentOrRatio(r.UpstreamShareOfCeiling),
			ratio(r.FirstGroupVsUpstream), ratio(r.GroupP99VsUpstream), ratio(r.MemoryVsUpstream))
		if withSP {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t", ratio(r.PodsPerSecondVsSchedulerPlugins), ratio(r.FirstGroupVsSchedulerPlugins),
				ratio(r.GroupP99VsSchedulerPlugins), ratio(r.MemoryVsSchedulerPlugins))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if withSP {
		fmt.Fprintln(w, "scheduler-plugins: n/a where that arm skipped the case (topology), failed, or bound no complete gang.")
	}
	return nil
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
	Case, Arrival, Arm      string
	PodsPerSecondVsUpstream float64
	PodsPerSecondVsCeiling  float64
	UpstreamShareOfCeiling  float64
	FirstGroupVsUpstream    float64
	GroupP99VsUpstream      float64
	// MemoryVsUpstream is only set when both schedulers ran as their own
	// process (scope ScopeScheduler).
	MemoryVsUpstream float64
	// HasSchedulerPlugins is set when the scheduler-plugins arm ran on the
	// case (not skipped, not failed); the ratios against it follow the
	// same rules as upstream's.
	HasSchedulerPlugins             bool
	PodsPerSecondVsSchedulerPlugins float64
	FirstGroupVsSchedulerPlugins    float64
	GroupP99VsSchedulerPlugins      float64
	MemoryVsSchedulerPlugins        float64
}

// Ratios computes Phalanx ÷ upstream, Phalanx ÷ ceiling and Phalanx ÷
// scheduler-plugins for every case that has a Phalanx arm.
func Ratios(sums []Summary) []Ratio {
	type caseKey struct{ c, arrival string }
	byCase := map[caseKey]map[string]Summary{}
	var cases []caseKey
	for _, s := range sums {
		k := caseKey{s.Case, s.Arrival}
		if byCase[k] == nil {
			byCase[k] = map[string]Summary{}
			cases = append(cases, k)
		}
		byCase[k][s.Arm] = s
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
		hasUp = hasUp && up.Failed < up.Runs && up.Skipped == ""
		hasCeil = hasCeil && ceil.Failed < ceil.Runs && ceil.Skipped == ""
		sp, hasSP := arms[ArmSchedulerPlugins]
		hasSP = hasSP && sp.Failed < sp.Runs && sp.Skipped == ""
		for _, name := range []string{ArmPhalanx, ArmPhalanxProcess} {
			p, ok := arms[name]
			if !ok || p.Failed == p.Runs || p.Skipped != "" {
				continue
			}
			r := Ratio{Case: c.c, Arrival: c.arrival, Arm: name}
			if hasUp {
				r.PodsPerSecondVsUpstream = div(p.PodsPerSecond, up.PodsPerSecond)
				r.FirstGroupVsUpstream = div(p.FirstGroupSeconds, up.FirstGroupSeconds)
				r.GroupP99VsUpstream = div(p.GroupP99Seconds, up.GroupP99Seconds)
				if p.MemoryScope == ScopeScheduler && up.MemoryScope == ScopeScheduler {
					r.MemoryVsUpstream = div(float64(p.PeakRSSBytes), float64(up.PeakRSSBytes))
				}
			}
			if hasSP {
				r.HasSchedulerPlugins = true
				r.PodsPerSecondVsSchedulerPlugins = div(p.PodsPerSecond, sp.PodsPerSecond)
				r.FirstGroupVsSchedulerPlugins = div(p.FirstGroupSeconds, sp.FirstGroupSeconds)
				r.GroupP99VsSchedulerPlugins = div(p.GroupP99Seconds, sp.GroupP99Seconds)
				if p.MemoryScope == ScopeScheduler && sp.MemoryScope == ScopeScheduler {
					r.MemoryVsSchedulerPlugins = div(float64(p.PeakRSSBytes), float64(sp.PeakRSSBytes))
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

// arrivalOf is r's arrival mode; results written before the field existed
// were all precreated.
func arrivalOf(r Result) string {
	if r.Arrival == "" {
		return ArrivalPrecreated
	}
	return r.Arrival
}

// medianFragmentation picks the run with the median CanHost.
func medianFragmentation(fs []Fragmentation) *Fragmentation {
	if len(fs) == 0 {
		return nil
	}
	sorted := append([]Fragmentation(nil), fs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].CanHost < sorted[j].CanHost })
	f := sorted[(len(sorted)-1)/2]
	return &f
}

// medianPreemption picks the run with the median VictimPods and reports
// the largest PartialGangs of any run: one split gang is worth knowing.
func medianPreemption(ps []Preemption) *Preemption {
	if len(ps) == 0 {
		return nil
	}
	sorted := append([]Preemption(nil), ps...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].VictimPods < sorted[j].VictimPods })
	p := sorted[(len(sorted)-1)/2]
	for _, q := range ps {
		if q.PartialGangs > p.PartialGangs {
			p.PartialGangs = q.PartialGangs
		}
	}
	return &p
}

// writePreemption prints the victims of the preemption cases.
func writePreemption(w io.Writer, sums []Summary) error {
	var rows []Summary
	for _, s := range sums {
		if s.Preemption != nil || (s.Skipped != "" && strings.Contains(s.Case, "Preemption")) {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Preemption (a high-priority gang that fits only by evicting low-priority gangs):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tarrival\tarm\tgang bound\ttime to gang bound\tvictim pods\tgangs evicted whole\tpartial gangs left\tuntouched gangs\t")
	for _, s := range rows {
		if s.Preemption == nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\tn/a\tn/a\tn/a\tn/a\tn/a\tn/a\t\n", s.Case, s.Arrival, s.Arm)
			continue
		}
		p := s.Preemption
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%d\t%d of %d\t%d\t%d\t\n", s.Case, s.Arrival, s.Arm, s.Bound, s.Pods,
			seconds(s.FirstGroupSeconds), p.VictimPods, p.VictimGangs, p.LowGangs, p.PartialGangs, p.UntouchedGangs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "victim pods: low-priority pods deleted, terminating or marked DisruptionTarget; partial gangs left: low-priority gangs split by preemption (some members evicted, the rest still running). Median run; partial gangs: the most of any run.")
	return nil
}

// writeFragmentation prints, for topology-constrained cases, how many racks
// could host one more gang after the run.
func writeFragmentation(w io.Writer, sums []Summary) error {
	var rows []Summary
	for _, s := range sums {
		if s.Fragmentation != nil {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Fragmentation after the run (free room per topology domain, from the API):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tarrival\tarm\tnext gang\tdomains able to host it\tfragmented domains\tfull domains\tdomains\t")
	for _, s := range rows {
		f := s.Fragmentation
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d pods\t%d\t%d\t%d\t%d\t\n", s.Case, s.Arrival, s.Arm, f.GangSize, f.CanHost, f.Fragmented, f.Full, f.Domains)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "next gang: the case's gang shape (size × the pods' requests), all in one domain; fragmented: room for at least one of its pods but not all of it.")
	return nil
}
