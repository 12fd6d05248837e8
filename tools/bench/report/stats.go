package report

import (
	"math"
	"sort"
	"time"
)

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// values, or 0 when there are none. values is not modified.
func Percentile(values []float64, p float64) float64 {
	if len(values) == 0 {
		return 0
	}
	sorted := append([]float64(nil), values...)
	sort.Float64s(sorted)
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

// Timing is the measured window of one run: when each pod was first seen
// bound, relative to the scheduler's start.
type Timing struct {
	Start time.Time
	Bound map[string]time.Time
}

// Fill sets the throughput and group-time fields of r from t, for the
// case's groups.
func (t Timing) Fill(r *Result, groups []Group) {
	var first, last time.Duration
	for _, at := range t.Bound {
		d := at.Sub(t.Start)
		if first == 0 || d < first {
			first = d
		}
		if d > last {
			last = d
		}
	}
	r.FirstBindSeconds = first.Seconds()
	r.LastBindSeconds = last.Seconds()
	if last > 0 {
		r.PodsPerSecond = float64(len(t.Bound)) / last.Seconds()
	}
	var full []float64
	for _, g := range groups {
		var done time.Duration
		n := 0
		for _, m := range g.Members {
			at, ok := t.Bound[m]
			if !ok {
				continue
			}
			n++
			if d := at.Sub(t.Start); d > done {
				done = d
			}
		}
		if n == len(g.Members) && n > 0 {
			full = append(full, done.Seconds())
		}
	}
	if len(full) > 0 {
		r.FirstGroupSeconds = Percentile(full, 0)
		r.GroupP50Seconds = Percentile(full, 50)
		r.GroupP99Seconds = Percentile(full, 99)
	}
}

// median returns the median of values (the lower middle for an even
// count, so that it is always a measured value), or 0.
func median(values []float64) float64 {
	if len(values) == 0 {
		return 0
	}
	return Percentile(values, 50)
}
