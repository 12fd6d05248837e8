package preemption

import (
	"cmp"
	"slices"
	"time"
)

// Minimum runtime and surplus: the rules, free of the framework.
//
// A running pod is protected from preemption for its minimum runtime after
// its protection starts. For a member of a gang that is when the gang last
// became whole: the minCount-th bind among its members bound now (fewer
// bound than minCount: the latest of their binds). A member bound after
// that, beyond the minimum, starts from its own bind. A pod alone, or in a
// group that is no gang, starts from its own bind. A pod the scheduler has
// placed but not yet bound has not started, and is not protected.
//
// A gang's surplus is how many of its placed members exceed its minCount:
// evicting that many costs it speed, not progress. Which members count as
// surplus is settled before the search (as PDB allowances are), latest
// bound first: the members an elastic gang grew by last go first.

// runRecord is what the rules read of one placed pod.
type runRecord struct {
	group    string // leaf group key; "" for a pod alone
	minCount int    // the leaf gang's minimum; 0 outside a gang
	// bound is the pod's bind; zero while it is not bound.
	bound time.Time
	// runtime is its minimum runtime, resolved and capped (resolve).
	runtime time.Duration
	created int64 // for ties: younger goes first
	key     string
}

// resolve is a pod's minimum runtime: what its group (or, outside a group,
// the pod) declares, else its PriorityClass's, else the profile's default,
// never above the profile's cap.
func (rp runtimePolicy) resolve(declared, class *time.Duration) time.Duration {
	d := rp.byDefault
	if class != nil {
		d = *class
	}
	if declared != nil {
		d = *declared
	}
	return max(0, min(d, rp.cap))
}

// protectedUntil is when each record's protection ends; zero when it has
// none.
func protectedUntil(recs []runRecord) []time.Time {
	binds := map[string][]time.Time{}
	minCount := map[string]int{}
	for _, r := range recs {
		if r.group != "" && r.minCount > 0 && !r.bound.IsZero() {
			binds[r.group] = append(binds[r.group], r.bound)
			minCount[r.group] = r.minCount
		}
	}
	whole := make(map[string]time.Time, len(binds))
	for g, ts := range binds {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		whole[g] = ts[min(minCount[g], len(ts))-1]
	}
	out := make([]time.Time, len(recs))
	for i, r := range recs {
		if r.runtime <= 0 || r.bound.IsZero() {
			continue
		}
		start := r.bound
		if w := whole[r.group]; w.After(start) {
			start = w
		}
		out[i] = start.Add(r.runtime)
	}
	return out
}

// surplusMembers marks, in each gang, as many of the records eligible says
// may be evicted as the gang has placed members beyond its minCount: the
// latest bound first (one not yet bound before any), then the youngest.
func surplusMembers(recs []runRecord, eligible []bool) []bool {
	placed := map[string]int{}
	var order []int
	for i, r := range recs {
		if r.group == "" || r.minCount <= 0 {
			continue
		}
		placed[r.group]++
		if eligible[i] {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		ra, rb := &recs[a], &recs[b]
		return cmp.Or(cmp.Compare(ra.group, rb.group), laterBound(ra.bound, rb.bound), -cmp.Compare(ra.created, rb.created), cmp.Compare(ra.key, rb.key))
	})
	out := make([]bool, len(recs))
	taken := map[string]int{}
	for _, i := range order {
		r := &recs[i]
		if taken[r.group] < placed[r.group]-r.minCount {
			out[i] = true
			taken[r.group]++
		}
	}
	return out
}

// laterBound orders binds latest first, an unbound pod (zero) before all.
func laterBound(a, b time.Time) int {
	switch {
	case a.Equal(b):
		return 0
	case a.IsZero():
		return -1
	case b.IsZero():
		return 1
	}
	return -a.Compare(b)
}
