package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Starvation is what a starvation case measured: one big gang against a
// stream of small jobs with runtimes, over a fixed window.
type Starvation struct {
	// WindowSeconds is the window: from the stream's start to the
	// measurement.
	WindowSeconds float64 `json:"windowSeconds"`
	// GangStartSeconds is from the gang's creation to its last member's
	// bind; -1 when not every member bound within the window.
	GangStartSeconds float64 `json:"gangStartSeconds"`
	// SmallCreated, SmallStarted (bound), SmallDone (ran to their end) and
	// SmallPending (never bound) count the small jobs.
	SmallCreated int `json:"smallCreated"`
	SmallStarted int `json:"smallStarted"`
	SmallDone    int `json:"smallDone"`
	SmallPending int `json:"smallPending"`
	// SmallDonePerMinute is SmallDone over the window, per minute.
	SmallDonePerMinute float64 `json:"smallDonePerMinute"`
	// MeanWaitSeconds is the mean, over the small jobs that started, of
	// creation to bind.
	MeanWaitSeconds float64 `json:"meanWaitSeconds"`
	// Utilisation is the cpu-seconds the pods (gang included) ran within
	// the window, over the cluster's cpu × the window.
	Utilisation float64 `json:"utilisation"`
}

// StarvationPod is one pod of a starvation run, as the harness saw it.
type StarvationPod struct {
	Gang bool
	// CPU is the pod's cpu request in cores.
	CPU float64
	// Created and Bound are when the harness created the pod and first
	// saw it bound (zero: never).
	Created, Bound time.Time
	// Runtime is how long the node agent runs the pod once bound.
	Runtime time.Duration
	// Done is a pod that ran to its end (Succeeded) within the window.
	Done bool
}

// ComputeStarvation derives a run's measures from its pods. begin and end
// bound the window, gangCreated is when the gang's first object was
// created, clusterCPU is the cluster's cpu in cores. A pod counts as busy
// from its bind to its runtime's end or the window's, whichever is first:
// the node agent starts it as it binds.
func ComputeStarvation(pods []StarvationPod, begin, end, gangCreated time.Time, clusterCPU float64) Starvation {
	window := end.Sub(begin)
	s := Starvation{WindowSeconds: window.Seconds(), GangStartSeconds: -1}
	var busy float64
	var waits time.Duration
	gangMembers, gangBound := 0, 0
	var gangLast time.Time
	for _, p := range pods {
		if p.Gang {
			gangMembers++
		} else {
			s.SmallCreated++
		}
		if p.Bound.IsZero() || p.Bound.After(end) {
			if !p.Gang {
				s.SmallPending++
			}
			continue
		}
		stop := p.Bound.Add(p.Runtime)
		if stop.After(end) {
			stop = end
		}
		if stop.After(p.Bound) {
			busy += p.CPU * stop.Sub(p.Bound).Seconds()
		}
		if p.Gang {
			gangBound++
			if p.Bound.After(gangLast) {
				gangLast = p.Bound
			}
			continue
		}
		s.SmallStarted++
		waits += p.Bound.Sub(p.Created)
		if p.Done {
			s.SmallDone++
		}
	}
	if gangMembers > 0 && gangBound == gangMembers {
		s.GangStartSeconds = gangLast.Sub(gangCreated).Seconds()
	}
	if s.SmallStarted > 0 {
		s.MeanWaitSeconds = waits.Seconds() / float64(s.SmallStarted)
	}
	if window > 0 {
		s.SmallDonePerMinute = float64(s.SmallDone) / window.Minutes()
		if clusterCPU > 0 {
			s.Utilisation = busy / (clusterCPU * window.Seconds())
		}
	}
	return s
}

// medianStarvation picks the run with the median utilisation.
func medianStarvation(ss []Starvation) *Starvation {
	if len(ss) == 0 {
		return nil
	}
	sorted := append([]Starvation(nil), ss...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Utilisation < sorted[j].Utilisation })
	s := sorted[len(sorted)/2]
	return &s
}

// gangStart words a gang start time.
func gangStart(secs float64) string {
	if secs < 0 {
		return "never (in the window)"
	}
	return fmt.Sprintf("%.1fs", secs)
}

// writeStarvation prints the starvation cases.
func writeStarvation(w io.Writer, sums []Summary) error {
	var rows []Summary
	for _, s := range sums {
		if s.Starvation != nil || (s.Skipped != "" && strings.HasPrefix(s.Case, "Starvation/")) {
			rows = append(rows, s)
		}
	}
	if len(rows) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Starvation (one gang that needs a whole rack against a Poisson stream of one-node jobs with runtimes, over a fixed window):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\tarm\tbig gang start\tsmall jobs done\tdone/min\tstarted\tstill pending\tmean wait\tutilisation\twindow\tload\t")
	for _, s := range rows {
		if s.Starvation == nil {
			why := "failed to run"
			if s.Skipped != "" {
				why = "n/a: " + s.Skipped
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t\t\t\t\t\t\t\t\t\n", s.Case, s.Arm, why)
			continue
		}
		st := s.Starvation
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d of %d\t%.1f\t%d\t%d\t%.1fs\t%.0f%%\t%.0fs\t%s\t\n", s.Case, s.Arm, gangStart(st.GangStartSeconds),
			st.SmallDone, st.SmallCreated, st.SmallDonePerMinute, st.SmallStarted, st.SmallPending, st.MeanWaitSeconds,
			100*st.Utilisation, st.WindowSeconds, loadString(s.LoadAverage))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "big gang start: from the gang's creation to its last member's bind. small jobs done: ran to their end in the window, of those created; mean wait: creation to bind, over those that started. utilisation: cpu-seconds run in the window (gang included) ÷ (cluster cpu × window). Median run by utilisation.")
	return nil
}
