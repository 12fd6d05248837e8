package report

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// PerfResult is one arm's replay of one of upstream's scheduler_perf
// workloads (tools/bench/schedperf), with the metrics upstream's own runner
// reports for it.
type PerfResult struct {
	// Workload is "<test case>/<workload>" as upstream names it.
	Workload string `json:"workload"`
	Arm      string `json:"arm"`
	Run      int    `json:"run"`
	// Gates are the scheduler's feature gates, "k=v,k=v".
	Gates   string `json:"gates,omitempty"`
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
	// Stop says how the last wait ended ("all scheduled", "no bind for
	// 3m0s", ...).
	Stop string `json:"stop,omitempty"`

	Nodes int `json:"nodes"`
	// Pods counts every pod the workload created; MeasuredPods those of
	// the operations that collect metrics.
	Pods         int `json:"pods"`
	MeasuredPods int `json:"measuredPods"`
	PodGroups    int `json:"podGroups"`

	SetupSeconds float64 `json:"setupSeconds"`
	// Throughput is upstream's SchedulingThroughput (pods/s in 1 s
	// samples while the measured pods are created and scheduled); nil
	// when the window was too short for one sample, as upstream's runner
	// reports then too.
	Throughput *Throughput `json:"schedulingThroughput,omitempty"`
	// DurationSeconds is upstream's SchedulingDuration: from the first
	// measured pod's creation until every measured pod is scheduled.
	DurationSeconds float64 `json:"schedulingDurationSeconds"`
	// PodsPerSecond is MeasuredPods / DurationSeconds.
	PodsPerSecond float64 `json:"podsPerSecond"`
	// Histograms are upstream's histogram metrics of the scheduler over
	// the run (from the scheduler's start, as upstream's runner reads
	// them), in milliseconds, keyed "metric{label=value}".
	Histograms map[string]Quantiles `json:"histograms,omitempty"`
	// Scheduler is what the scheduler's counters saw over the run.
	Scheduler *SchedulerMetrics `json:"scheduler,omitempty"`
	// Verdict is the placement check over every pod at the end.
	Verdict Verdict `json:"verdict"`
	// Unscheduled counts pods of the workload left without a node.
	Unscheduled int `json:"unscheduled"`
	// Victims counts pods created by the workload that no longer exist
	// at the end (preempted and deleted).
	Victims     int     `json:"victims"`
	LoadAverage float64 `json:"loadAverage"`
}

// OK is true when the run completed: nothing skipped or failed, every pod
// scheduled and the placement check clean.
func (r PerfResult) OK() bool {
	return r.Skipped == "" && r.Error == "" && r.Unscheduled == 0 && r.Verdict.OK()
}

// Throughput summarises scheduling-throughput samples as upstream does.
type Throughput struct {
	Average float64 `json:"average"`
	Perc50  float64 `json:"perc50"`
	Perc90  float64 `json:"perc90"`
	Perc95  float64 `json:"perc95"`
	Perc99  float64 `json:"perc99"`
	Samples int     `json:"samples"`
}

// ThroughputSampler turns periodic counts of scheduled pods into
// throughput samples the way upstream's scheduler_perf does: sampling
// starts at the first tick that sees a scheduled pod and that tick only
// sets the baseline; an interval in which nothing was scheduled is not
// recorded as zero but merged into the next one that sees progress, whose
// rate is then recorded once per merged interval.
type ThroughputSampler struct {
	// Interval is the nominal sampling interval.
	Interval time.Duration
	started  bool
	last     int
	lastAt   time.Time
	skipped  int
	samples  []float64
}

// Observe records that scheduled pods were counted at now.
func (s *ThroughputSampler) Observe(now time.Time, scheduled int) {
	if scheduled == 0 {
		return
	}
	if !s.started {
		s.started, s.last, s.lastAt = true, scheduled, now
		return
	}
	if scheduled == s.last {
		s.skipped++
		return
	}
	rate := float64(scheduled-s.last) / now.Sub(s.lastAt).Seconds()
	for i := 0; i <= s.skipped; i++ {
		s.samples = append(s.samples, rate)
	}
	s.last, s.lastAt, s.skipped = scheduled, now, 0
}

// Summary is nil without samples.
func (s *ThroughputSampler) Summary() *Throughput {
	if len(s.samples) == 0 {
		return nil
	}
	sorted := append([]float64(nil), s.samples...)
	sort.Float64s(sorted)
	sum := 0.0
	for _, v := range sorted {
		sum += v
	}
	rank := func(p int) float64 {
		i := int(math.Ceil(float64(len(sorted)*p)/100)) - 1
		return sorted[max(i, 0)]
	}
	return &Throughput{
		Average: sum / float64(len(sorted)),
		Perc50:  rank(50), Perc90: rank(90), Perc95: rank(95), Perc99: rank(99),
		Samples: len(sorted),
	}
}

// Quantiles of a histogram, in milliseconds.
type Quantiles struct {
	Count   float64 `json:"count"`
	Average float64 `json:"average"`
	Perc50  float64 `json:"perc50"`
	Perc90  float64 `json:"perc90"`
	Perc95  float64 `json:"perc95"`
	Perc99  float64 `json:"perc99"`
}

// HistogramQuantiles reads histogram name (in seconds) from two scrapes
// (before may be nil), summing the series whose labels include match, and
// returns its quantiles in milliseconds, interpolated linearly inside a
// bucket as Prometheus does. ok is false when nothing was observed.
func HistogramQuantiles(before, after Samples, name string, match map[string]string) (q Quantiles, ok bool) {
	type bucket struct{ le, count float64 }
	counts := map[float64]float64{}
	add := func(ss Samples, sign float64) {
		for _, s := range ss {
			if s.Name != name+"_bucket" || !labelsInclude(s.Labels, match) {
				continue
			}
			le, err := strconv.ParseFloat(s.Labels["le"], 64)
			if err != nil {
				continue
			}
			counts[le] += sign * s.Value
		}
	}
	add(after, 1)
	add(before, -1)
	total := after.Sum(name+"_count", match) - before.Sum(name+"_count", match)
	if total <= 0 {
		return q, false
	}
	sum := after.Sum(name+"_sum", match) - before.Sum(name+"_sum", match)
	buckets := make([]bucket, 0, len(counts))
	for le, c := range counts {
		buckets = append(buckets, bucket{le, c})
	}
	sort.Slice(buckets, func(i, j int) bool { return buckets[i].le < buckets[j].le })
	if len(buckets) == 0 || !math.IsInf(buckets[len(buckets)-1].le, 1) {
		buckets = append(buckets, bucket{math.Inf(1), total})
	}
	quantile := func(p float64) float64 {
		rank := p * total
		lowerLe, lowerCount := 0.0, 0.0
		for _, b := range buckets {
			if b.count >= rank {
				if math.IsInf(b.le, 1) {
					// Beyond the last finite bucket: its bound is the
					// best known answer.
					return lowerLe
				}
				if b.count == lowerCount {
					return b.le
				}
				return lowerLe + (b.le-lowerLe)*(rank-lowerCount)/(b.count-lowerCount)
			}
			lowerLe, lowerCount = b.le, b.count
		}
		return lowerLe
	}
	const ms = 1000
	return Quantiles{
		Count: total, Average: sum / total * ms,
		Perc50: quantile(0.50) * ms, Perc90: quantile(0.90) * ms,
		Perc95: quantile(0.95) * ms, Perc99: quantile(0.99) * ms,
	}, true
}

func labelsInclude(labels, match map[string]string) bool {
	for k, v := range match {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// PerfHistograms are the histograms a PerfResult reports, with the label
// sets read: upstream's per-pod attempt, its pod-group cycle (which only
// upstream runs) and Phalanx's gang wait (which only Phalanx has: from a
// gang's first member waiting in Permit to quorum).
var PerfHistograms = []struct {
	Name  string
	Match map[string]string
}{
	{"scheduler_scheduling_attempt_duration_seconds", map[string]string{"result": "scheduled"}},
	{"scheduler_pod_scheduling_duration_seconds", nil},
	{"scheduler_podgroup_scheduling_attempt_duration_seconds", map[string]string{"result": "scheduled"}},
	{"scheduler_podgroup_scheduling_attempt_duration_seconds", map[string]string{"result": "unschedulable"}},
	{"scheduler_podgroup_scheduling_algorithm_duration_seconds", nil},
	{"phalanx_group_scheduling_duration_seconds", nil},
}

// HistogramKey names a histogram with its label match, as in
// PerfResult.Histograms.
func HistogramKey(name string, match map[string]string) string {
	if len(match) == 0 {
		return name
	}
	keys := make([]string, 0, len(match))
	for k := range match {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + match[k]
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// Keys of the histograms the table shows.
var (
	keyAttempt         = HistogramKey("scheduler_scheduling_attempt_duration_seconds", map[string]string{"result": "scheduled"})
	keyPodGroupAttempt = HistogramKey("scheduler_podgroup_scheduling_attempt_duration_seconds", map[string]string{"result": "scheduled"})
	keyPhalanxGroup    = HistogramKey("phalanx_group_scheduling_duration_seconds", nil)
)

// WritePerfTable prints one row per run and, for workloads run under both
// a Phalanx arm and upstream, the ratios of their medians.
func WritePerfTable(w io.Writer, results []PerfResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tARM\tNODES\tPODS\tTHROUGHPUT avg/p50/p99\tDURATION\tPODS/S\tATTEMPT p50/p99 ms\tGROUP ATTEMPT p50/p99 ms\tPLACEMENT")
	for _, r := range results {
		if r.Skipped != "" || r.Error != "" {
			why := r.Skipped
			if r.Error != "" {
				why = "ERROR: " + firstLine(r.Error)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t\t\t\t\t\n", r.Workload, r.Arm, r.Nodes, r.MeasuredPods, why)
			continue
		}
		tp := "– (window < 2 samples)"
		if t := r.Throughput; t != nil {
			tp = fmt.Sprintf("%.1f / %.1f / %.1f", t.Average, t.Perc50, t.Perc99)
		}
		attempt := quantilePair(r.Histograms[keyAttempt])
		group := "–"
		if q, ok := r.Histograms[keyPodGroupAttempt]; ok {
			group = quantilePair(q) + " (pod-group cycle)"
		} else if q, ok := r.Histograms[keyPhalanxGroup]; ok {
			group = quantilePair(q) + " (gang Permit wait)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%.2fs\t%.1f\t%s\t%s\t%s\n", r.Workload, r.Arm, r.Nodes, r.MeasuredPods, tp,
			r.DurationSeconds, r.PodsPerSecond, attempt, group, perfPlacement(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return writePerfRatios(w, results)
}

func quantilePair(q Quantiles) string {
	if q.Count == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f / %.1f", q.Perc50, q.Perc99)
}

func perfPlacement(r PerfResult) string {
	v := r.Verdict
	s := fmt.Sprintf("%d/%d bound", v.Bound, v.Pods)
	if r.Victims > 0 {
		s += fmt.Sprintf(", %d victims", r.Victims)
	}
	if r.Unscheduled > 0 {
		s += fmt.Sprintf(", %d UNSCHEDULED (%s)", r.Unscheduled, r.Stop)
	}
	if !v.OK() {
		return s + ", VIOLATED: " + strings.Join(v.Problems, "; ")
	}
	return s + ", ok"
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// writePerfRatios prints, per workload, each Phalanx arm's median
// throughput and duration against upstream's.
func writePerfRatios(w io.Writer, results []PerfResult) error {
	type key struct{ workload, arm string }
	avg := map[key][]float64{}
	dur := map[key][]float64{}
	var order []string
	seen := map[string]bool{}
	for _, r := range results {
		if !r.OK() {
			continue
		}
		k := key{r.Workload, r.Arm}
		if r.Throughput != nil {
			avg[k] = append(avg[k], r.Throughput.Average)
		}
		dur[k] = append(dur[k], r.DurationSeconds)
		if !seen[r.Workload] {
			seen[r.Workload] = true
			order = append(order, r.Workload)
		}
	}
	var rows []string
	for _, wl := range order {
		up := key{wl, ArmUpstream}
		if len(dur[up]) == 0 {
			continue
		}
		for _, arm := range []string{ArmPhalanx, ArmPhalanxProcess} {
			k := key{wl, arm}
			if len(dur[k]) == 0 {
				continue
			}
			tp := "–"
			if len(avg[k]) > 0 && len(avg[up]) > 0 {
				tp = fmt.Sprintf("%.2f×", median(avg[k])/median(avg[up]))
			}
			rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%.2f×", wl, arm, tp, median(dur[k])/median(dur[up])))
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKLOAD\tARM\tTHROUGHPUT avg ÷ upstream (higher is better)\tDURATION ÷ upstream (lower is better)")
	for _, row := range rows {
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}
