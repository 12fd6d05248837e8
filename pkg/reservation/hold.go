package reservation

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// maxBackfillRuntime is the longest activeDeadlineSeconds believed: a bound
// beyond it (or not positive) is absurd and means no runtime backfill.
const maxBackfillRuntime = 7 * 24 * time.Hour

// Gang is what ranks a hold and decides whom it admits.
type Gang struct {
	Root     groups.Key
	Priority int32
	// Preempts: the gang's preemption policy is PreemptLowerPriority.
	Preempts bool
	// Created is the root group's creation, in unix nanoseconds.
	Created int64
}

// outranks orders gangs: priority, then age, then name.
func (g Gang) outranks(o Gang) bool {
	if g.Priority != o.Priority {
		return g.Priority > o.Priority
	}
	if g.Created != o.Created {
		return g.Created < o.Created
	}
	return g.Root.String() < o.Root.String()
}

// MayEvict says whether the gang's own preemption may evict pod.
func (g Gang) MayEvict(pod *corev1.Pod) bool {
	return g.Preempts && groups.PodPriority(pod) < g.Priority
}

// Hold is one held domain, as the book hands it out: a copy. Its sets and
// maps are never modified once handed out (the book replaces them).
type Hold struct {
	Gang
	Key, Domain string
	Nodes       sets.Set[string]
	Since       time.Time
	// Expected is when the gang is expected to fit in the domain; zero
	// when unknown.
	Expected time.Time
	// Protected is when the last pod the expected fit counts on evicting
	// stops being protected by its minimum runtime; zero when it counts
	// on none still protected.
	Protected   time.Time
	Free, Short placement.Resources
	// Members are the UIDs of the hierarchy's pods when last planned.
	Members sets.Set[string]
}

// Message is the Holding condition's message.
func (h Hold) Message() string {
	exp := "unknown"
	if !h.Expected.IsZero() {
		exp = h.Expected.UTC().Format(time.RFC3339)
	}
	prot := ""
	if !h.Protected.IsZero() {
		// Without it, a gang that waits only for its victims' minimum
		// runtime would look as if it waited for nothing.
		prot = fmt.Sprintf("; the pods it would preempt are protected by their minimum runtime until %s", h.Protected.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("holds %s=%s (%d nodes; free %s; short %s; expected to fit at %s%s)",
		h.Key, h.Domain, len(h.Nodes), formatResources(h.Free), formatResources(h.Short), exp, prot)
}

// Record is what the group's status keeps of the hold.
func (h Hold) Record() *Record {
	return &Record{Key: h.Key, Domain: h.Domain, Since: h.Since}
}

// Record is what the scheduler persists about a gang's hold (in its root
// group's status), and reads back after a failover as a claim.
type Record struct {
	Key, Domain string
	Since       time.Time
	// Expired is when the hold reached its maximum and ended; zero while
	// it is held.
	Expired time.Time
}

func formatResources(r placement.Resources) string {
	if len(r) == 0 {
		return "nothing"
	}
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, string(n))
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		v := r[corev1.ResourceName(n)]
		switch corev1.ResourceName(n) {
		case corev1.ResourceCPU:
			parts = append(parts, fmt.Sprintf("%s cpu", strconv.FormatFloat(float64(v)/1000, 'f', -1, 64)))
		case corev1.ResourceMemory:
			parts = append(parts, fmt.Sprintf("%dMi memory", v/(1<<20)))
		default:
			parts = append(parts, fmt.Sprintf("%d %s", v, n))
		}
	}
	return strings.Join(parts, ", ")
}

// admits says whether pod, not a member of h's hierarchy, may use a node h
// holds, and if not, why.
func (h *Hold) admits(pod *corev1.Pod, now time.Time, backfill bool) (bool, string) {
	prio := groups.PodPriority(pod)
	if prio > h.Priority {
		return true, ""
	}
	if !backfill {
		return false, fmt.Sprintf("node is reserved for %s (backfill is off)", h.Root)
	}
	if prio < h.Priority && h.Preempts {
		// The gang's own preemption evicts it when that makes the gang fit.
		return true, ""
	}
	ads := runtimeBound(pod)
	if ads <= 0 {
		return false, fmt.Sprintf("node is reserved for %s; backfill needs a valid activeDeadlineSeconds", h.Root)
	}
	if h.Expected.IsZero() {
		return false, fmt.Sprintf("node is reserved for %s, whose start time is unknown, so no runtime fits before it", h.Root)
	}
	if now.Add(ads).After(h.Expected) {
		return false, fmt.Sprintf("node is reserved for %s, expected to start at %s; the pod's activeDeadlineSeconds ends after that", h.Root, h.Expected.UTC().Format(time.RFC3339))
	}
	return true, ""
}

// runtimeBound is the pod's declared runtime, 0 when missing or absurd.
func runtimeBound(pod *corev1.Pod) time.Duration {
	if pod.Spec.ActiveDeadlineSeconds == nil {
		return 0
	}
	d := time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second
	if d <= 0 || d > maxBackfillRuntime {
		return 0
	}
	return d
}

// PodEnd is when a running pod is expected to end: its start plus its
// runtime bound; zero when unknown.
func PodEnd(pod *corev1.Pod) time.Time {
	d := runtimeBound(pod)
	if d == 0 || pod.Status.StartTime == nil {
		return time.Time{}
	}
	return pod.Status.StartTime.Add(d)
}

// Running is a pod on a domain's nodes (not the gang's), as the estimate
// of the gang's start reads it.
type Running struct {
	// End is when it is expected to end (PodEnd); zero when unknown.
	End time.Time
	// Requests is what it frees when it ends; each pod also frees a pod
	// slot.
	Requests placement.Resources
	// Evictable: the gang's own preemption may evict it (Gang.MayEvict),
	// so it counts as free at once, or once ProtectedUntil has passed.
	Evictable bool
	// ProtectedUntil is when its minimum runtime stops protecting it from
	// preemption; zero when it has none.
	ProtectedUntil time.Time
}

// ExpectedFit estimates when short frees: the pods end in order,
// evictable ones at now, or when their protection ends. at is zero when
// the known ends do not free it, now when nothing is short; protected is
// the latest protection end among the evictable pods it counted on, zero
// when none of them is protected after now.
func ExpectedFit(now time.Time, short placement.Resources, pods []Running) (at, protected time.Time) {
	left := placement.Resources{}
	for n, v := range short {
		if v > 0 {
			left[n] = v
		}
	}
	if len(left) == 0 {
		return now, time.Time{}
	}
	type ending struct {
		at        time.Time
		req       placement.Resources
		protected bool
	}
	var ends []ending
	for _, p := range pods {
		e := ending{at: p.End, req: p.Requests}
		switch {
		case !p.Evictable:
			// It frees at its end.
		case !p.ProtectedUntil.After(now):
			e.at = now
		case p.End.IsZero() || p.ProtectedUntil.Before(p.End):
			e.at, e.protected = p.ProtectedUntil, true
		default:
			// It ends before its protection does.
		}
		if e.at.IsZero() {
			continue
		}
		if e.at.Before(now) {
			e.at = now
		}
		ends = append(ends, e)
	}
	sort.SliceStable(ends, func(i, j int) bool { return ends[i].at.Before(ends[j].at) })
	for _, e := range ends {
		if e.protected {
			protected = e.at
		}
		for n, v := range e.req {
			if _, ok := left[n]; ok {
				left[n] -= v
			}
		}
		if _, ok := left[corev1.ResourcePods]; ok {
			left[corev1.ResourcePods]--
		}
		done := true
		for _, v := range left {
			if v > 0 {
				done = false
			}
		}
		if done {
			return e.at, protected
		}
	}
	return time.Time{}, time.Time{}
}

// Domain is what a failed plan knows of one domain of the gang's key.
type Domain struct {
	// Fit is the planner's account of the domain (its name, what is short).
	Fit placement.DomainFit
	// Nodes are the domain's nodes.
	Nodes sets.Set[string]
	// Used is what the pods outside the gang's hierarchy use there, with a
	// pod slot each; Free is what is free now.
	Used, Free placement.Resources
	// Running are the pods outside the hierarchy on the nodes.
	Running []Running
}

// Choice is a domain a gang could hold, closest first.
type Choice struct {
	Domain              string
	Nodes               sets.Set[string]
	Free, Short         placement.Resources
	Expected, Protected time.Time
}

// Choose turns a failed plan's domains, closest first, into the choices a
// gang may hold. A domain that is short of more than every other pod there
// uses could not hold the gang even empty: it is never held, and never
// lists it with the numbers.
func Choose(now time.Time, domains []Domain) (choices []Choice, never []string) {
	for _, d := range domains {
		if len(d.Nodes) == 0 {
			continue
		}
		if n, res, ok := exceeds(d.Fit.Short, d.Used); ok {
			never = append(never, fmt.Sprintf("%s short %d %s with every other pod gone", d.Fit.Domain, n, res))
			continue
		}
		ch := Choice{Domain: d.Fit.Domain, Nodes: d.Nodes, Free: d.Free, Short: d.Fit.Short}
		ch.Expected, ch.Protected = ExpectedFit(now, d.Fit.Short, d.Running)
		choices = append(choices, ch)
	}
	return choices, never
}

// exceeds reports a resource short beyond everything other pods use: the
// domain could not hold the gang even empty.
func exceeds(short, used placement.Resources) (int64, corev1.ResourceName, bool) {
	names := make([]string, 0, len(short))
	for n := range short {
		names = append(names, string(n))
	}
	sort.Strings(names)
	for _, n := range names {
		if v := short[corev1.ResourceName(n)]; v > used[corev1.ResourceName(n)] {
			return v - used[corev1.ResourceName(n)], corev1.ResourceName(n), true
		}
	}
	return 0, "", false
}
