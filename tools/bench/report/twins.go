package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Twin cases measure one feature's cost: the same gangs on the same
// nodes, once with the feature and once without. twinSuffixes pairs the
// suffix of a case with the feature with its twin's.
var twinSuffixes = []struct{ feature, twin, what string }{
	{"_DRA", "_ExtendedResource", "GPUs through DRA claims ÷ the same GPUs as an extended resource"},
	{"_AntiAffinity", "", "one member per node (anti-affinity) ÷ the same gangs without it"},
}

// Twin is one arm's measures of a case with a feature against its twin
// of the same run.
type Twin struct {
	Case, Twin, Arrival, Arm, What string
	// PodsPerSecond is the case's pods/s ÷ the twin's.
	PodsPerSecond float64
	// CPUPerPod and TwinCPUPerPod are the scheduler's CPU seconds per
	// measured pod (child schedulers only; zero otherwise); CPUPerPod÷
	// TwinCPUPerPod is what the feature costs per pod.
	CPUPerPod, TwinCPUPerPod float64
	// APIWritesPerPod and TwinAPIWritesPerPod are the API writes per pod.
	APIWritesPerPod, TwinAPIWritesPerPod float64
}

// Twins pairs every summarized case that has its twin in sums (same
// arrival and arm, both run).
func Twins(sums []Summary) []Twin {
	type key struct{ c, arrival, arm string }
	byKey := map[key]Summary{}
	for _, s := range sums {
		byKey[key{s.Case, s.Arrival, s.Arm}] = s
	}
	var out []Twin
	for _, s := range sums {
		for _, ts := range twinSuffixes {
			if !strings.HasSuffix(s.Case, ts.feature) {
				continue
			}
			twinName := strings.TrimSuffix(s.Case, ts.feature) + ts.twin
			t, ok := byKey[key{twinName, s.Arrival, s.Arm}]
			if !ok || s.Skipped != "" || t.Skipped != "" || s.Failed == s.Runs || t.Failed == t.Runs {
				continue
			}
			tw := Twin{Case: s.Case, Twin: twinName, Arrival: s.Arrival, Arm: s.Arm, What: ts.what,
				APIWritesPerPod: s.APIWritesPerPod, TwinAPIWritesPerPod: t.APIWritesPerPod}
			if t.PodsPerSecond > 0 {
				tw.PodsPerSecond = s.PodsPerSecond / t.PodsPerSecond
			}
			if s.Pods > 0 && t.Pods > 0 {
				tw.CPUPerPod, tw.TwinCPUPerPod = s.SchedulerCPU/float64(s.Pods), t.SchedulerCPU/float64(t.Pods)
			}
			out = append(out, tw)
		}
	}
	return out
}

// writeTwins prints each case with a feature against its twin, per arm.
func writeTwins(w io.Writer, sums []Summary) error {
	twins := Twins(sums)
	if len(twins) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Against the twin (the same gangs without the feature, same run and arm):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\ttwin\tarrival\tarm\tpods/s ÷ twin\tsched CPU/pod\ttwin sched CPU/pod\tAPI writes/pod\ttwin API writes/pod\t")
	for _, t := range twins {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", t.Case, t.Twin, t.Arrival, t.Arm, ratio(t.PodsPerSecond),
			millis(t.CPUPerPod), millis(t.TwinCPUPerPod), perPod(t.APIWritesPerPod), perPod(t.TwinAPIWritesPerPod))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, t := range twins {
		if !seen[t.What] {
			seen[t.What] = true
			fmt.Fprintf(w, "%s: %s.\n", strings.TrimPrefix(t.Case[strings.LastIndex(t.Case, "_"):], "_"), t.What)
		}
	}
	fmt.Fprintln(w, "sched CPU/pod: a child scheduler's user+system CPU over the window ÷ the case's pods (- for in-process arms and the ceiling).")
	return nil
}

func millis(s float64) string {
	if s <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fms", 1000*s)
}
