package topology

// Reservation and backfill. A gang that has waited past a threshold gets
// the domain it came closest to fitting (the smallest shortfall, within its
// topology key) held for it: room that frees there goes to the gang and
// not to pods that would delay it. Other pods still use held nodes when
// they cannot delay the gang (backfill):
//   - pods whose activeDeadlineSeconds ends before the gang is expected to
//     fit there (expected: the earliest time the pods already running in
//     the domain, ended at their own activeDeadlineSeconds, free the
//     shortfall; unknown when they cannot, and then there is no such
//     backfill);
//   - pods the gang may preempt (lower priority, and the gang's policy
//     preempts): the gang's own preemption evicts them, as a unit, when
//     evicting makes the gang fit;
//   - pods of higher priority than the gang, which could preempt it anyway.
// A reservation never evicts anything by itself. The book keeps
// reservations disjoint, ranked by priority then age, and within a share of
// the cluster's nodes; one ends when the gang binds, its group is deleted,
// after a maximum hold (then the group may not reserve again for as long),
// or when a higher-ranked gang takes its domain. It is written to the
// root group's Reserved condition, from which a scheduler that takes over
// after a failover restores what it could have granted itself (restore.go).

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
)

// ReservationArgs configure reservation and backfill (PhalanxTopology's
// `reservation` argument). Absent, nothing is ever reserved.
//
//	reservation:
//	  afterSeconds: 120      # a gang waiting this long gets a domain held
//	  maxHoldSeconds: 900    # a hold ends after this, and is not renewed for as long
//	  maxSharePercent: 50    # at most this share of the nodes held at once
//	  backfill: true         # let pods that cannot delay the gang use held nodes
type ReservationArgs struct {
	AfterSeconds    int64 `json:"afterSeconds,omitempty"`
	MaxHoldSeconds  int64 `json:"maxHoldSeconds,omitempty"`
	MaxSharePercent int32 `json:"maxSharePercent,omitempty"`
	Backfill        *bool `json:"backfill,omitempty"`
}

// ReserveAfterAnnotation, on a root PodGroup or CompositePodGroup,
// lengthens afterSeconds for that group (a shorter value has no effect);
// "-1" never reserves for it.
const ReserveAfterAnnotation = "scheduling.phalanx.dev/reserve-after-seconds"

// The Reserved condition and its reasons.
const (
	ConditionReserved    = "Reserved"
	ReasonHolding        = "Holding"
	ReasonNotReserved    = "NotReserved"
	ReasonNeverFits      = "NeverFits"
	ReasonReleasedBound  = "Bound"
	ReasonExpired        = "Expired"
	ReasonTakenOver      = "TakenOver"
	ReasonGroupDeleted   = "GroupDeleted"
	ReasonRestoreOverlap = "Overlap"
)

// maxBackfillRuntime is the longest activeDeadlineSeconds believed: a bound
// beyond it (or not positive) is absurd and means no runtime backfill.
const maxBackfillRuntime = 7 * 24 * time.Hour

// explainDomainsForReservation is how many domains a waiting gang's failed
// plan lists, to choose the one to hold.
const explainDomainsForReservation = 16

func (a *ReservationArgs) defaults() error {
	if a.AfterSeconds < 0 {
		return fmt.Errorf("%s args: reservation.afterSeconds=%d is negative", Name, a.AfterSeconds)
	}
	if a.MaxHoldSeconds == 0 {
		a.MaxHoldSeconds = 900
	}
	if a.MaxHoldSeconds < 1 {
		return fmt.Errorf("%s args: reservation.maxHoldSeconds=%d: use a positive number", Name, a.MaxHoldSeconds)
	}
	if a.MaxSharePercent == 0 {
		a.MaxSharePercent = 50
	}
	if a.MaxSharePercent < 1 || a.MaxSharePercent > 100 {
		return fmt.Errorf("%s args: reservation.maxSharePercent=%d: use 1 to 100", Name, a.MaxSharePercent)
	}
	if a.Backfill == nil {
		t := true
		a.Backfill = &t
	}
	return nil
}

// reservation is one held domain.
type reservation struct {
	root        groups.Key
	key, domain string
	nodes       sets.Set[string]
	priority    int32
	preempts    bool  // the gang's policy is PreemptLowerPriority
	created     int64 // the root's creation, for ranking
	since       time.Time
	// expected is when the gang is expected to fit in the domain; zero
	// when unknown.
	expected time.Time
	free     placement.Resources
	short    placement.Resources
	// waiting are pods Filter turned away from the held nodes, activated
	// when the hold ends or its expected start moves.
	waiting map[string]*corev1.Pod
	// members are the UIDs of the hierarchy's pods when last planned.
	members sets.Set[string]
}

// outranks orders reservations: priority, then age, then name.
func (r *reservation) outranks(o *reservation) bool {
	if r.priority != o.priority {
		return r.priority > o.priority
	}
	if r.created != o.created {
		return r.created < o.created
	}
	return r.root.String() < o.root.String()
}

func (r *reservation) message() string {
	exp := "unknown"
	if !r.expected.IsZero() {
		exp = r.expected.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("holds %s=%s (%d nodes; free %s; short %s; expected to fit at %s)",
		r.key, r.domain, len(r.nodes), fmtResources(r.free), fmtResources(r.short), exp)
}

func fmtResources(r placement.Resources) string {
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

// book holds the reservations. It is safe for concurrent use.
type book struct {
	mu     sync.Mutex
	held   map[groups.Key]*reservation
	byNode map[string]*reservation
	// cooldown: a group whose hold expired may not hold again before. It
	// is keyed by namespace and name, not by the object, and outlives the
	// group until it ends: deleting a group and creating it again must not
	// end the wait. The sweep drops ended entries, so the map holds at
	// most the holds that expired within the last maxHoldSeconds (a node
	// is held by one gang at a time, for maxHoldSeconds before it expires,
	// so a couple per node of the share) plus those restored from Expired
	// conditions of existing groups.
	cooldown map[cooldownKey]time.Time
}

// cooldownKey names a group by namespace and name, whatever its kind or
// API: the name is what its owner reuses.
type cooldownKey struct{ namespace, name string }

func cooldownKeyOf(k groups.Key) cooldownKey { return cooldownKey{k.Namespace, k.Name} }

func newBook() *book {
	return &book{held: map[groups.Key]*reservation{}, byNode: map[string]*reservation{}, cooldown: map[cooldownKey]time.Time{}}
}

// domainChoice is a domain a gang could hold, closest first.
type domainChoice struct {
	domain string
	nodes  sets.Set[string]
	free   placement.Resources
	short  placement.Resources
	end    time.Time
}

// offer grants c the first choice it may hold: no overlap with a
// reservation that outranks it, and within maxNodes once lower-ranked
// reservations it overlaps (or, for the share, the lowest-ranked ones) are
// displaced. It returns the reservations displaced, or why none was
// granted.
func (b *book) offer(c *reservation, choices []domainChoice, maxNodes int) (granted bool, displaced []*reservation, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var whys []string
	for _, ch := range choices {
		var over []*reservation
		blocked := ""
		for _, r := range b.held {
			if r.root == c.root || !r.nodes.HasAny(ch.nodes.UnsortedList()...) {
				continue
			}
			if r.outranks(c) {
				blocked = fmt.Sprintf("%s=%s overlaps the reservation of %s", c.key, ch.domain, r.root)
				break
			}
			over = append(over, r)
		}
		if blocked != "" {
			whys = append(whys, blocked)
			continue
		}
		out := sets.New[*reservation](over...)
		used := len(ch.nodes)
		for _, r := range b.held {
			if !out.Has(r) && r.root != c.root {
				used += len(r.nodes)
			}
		}
		if used > maxNodes {
			// Displace the lowest-ranked reservations below c.
			var lower []*reservation
			for _, r := range b.held {
				if !out.Has(r) && r.root != c.root && c.outranks(r) {
					lower = append(lower, r)
				}
			}
			sort.Slice(lower, func(i, j int) bool { return lower[j].outranks(lower[i]) })
			for _, r := range lower {
				if used <= maxNodes {
					break
				}
				out.Insert(r)
				over = append(over, r)
				used -= len(r.nodes)
			}
		}
		if used > maxNodes {
			whys = append(whys, fmt.Sprintf("%s=%s (%d nodes) would exceed the reservable share (%d nodes)", c.key, ch.domain, len(ch.nodes), maxNodes))
			continue
		}
		for _, r := range over {
			b.removeLocked(r)
		}
		if old := b.held[c.root]; old != nil {
			b.removeLocked(old)
		}
		c.domain, c.nodes, c.free, c.short, c.expected = ch.domain, ch.nodes, ch.free, ch.short, ch.end
		if c.waiting == nil {
			c.waiting = map[string]*corev1.Pod{}
		}
		b.held[c.root] = c
		for n := range c.nodes {
			b.byNode[n] = c
		}
		return true, over, ""
	}
	if len(whys) == 0 {
		whys = append(whys, "no domain to hold")
	}
	return false, nil, strings.Join(whys, "; ")
}

func (b *book) removeLocked(r *reservation) {
	if b.held[r.root] != r {
		return
	}
	delete(b.held, r.root)
	for n := range r.nodes {
		if b.byNode[n] == r {
			delete(b.byNode, n)
		}
	}
}

// release ends root's reservation, returning it (nil when none).
func (b *book) release(root groups.Key) *reservation {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.held[root]
	if r != nil {
		b.removeLocked(r)
	}
	return r
}

func (b *book) get(root groups.Key) *reservation {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held[root]
}

func (b *book) list() []*reservation {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]*reservation, 0, len(b.held))
	for _, r := range b.held {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].outranks(out[j]) })
	return out
}

// heldAny says whether any of nodes is held.
func (b *book) heldAny(nodes sets.Set[string]) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for n := range nodes {
		if b.byNode[n] != nil {
			return true
		}
	}
	return false
}

// heldNodes counts the nodes held now.
func (b *book) heldNodes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.byNode)
}

// admits says whether pod, not a member of r's hierarchy, may use a node r
// holds, and if not, why.
func (r *reservation) admits(pod *corev1.Pod, now time.Time, backfill bool) (bool, string) {
	prio := groups.PodPriority(pod)
	if prio > r.priority {
		return true, ""
	}
	if !backfill {
		return false, fmt.Sprintf("node is reserved for %s (backfill is off)", r.root)
	}
	if prio < r.priority && r.preempts {
		// The gang's own preemption evicts it when that makes the gang fit.
		return true, ""
	}
	ads := runtimeBound(pod)
	if ads <= 0 {
		return false, fmt.Sprintf("node is reserved for %s; backfill needs a valid activeDeadlineSeconds", r.root)
	}
	if r.expected.IsZero() {
		return false, fmt.Sprintf("node is reserved for %s, whose start time is unknown, so no runtime fits before it", r.root)
	}
	if now.Add(ads).After(r.expected) {
		return false, fmt.Sprintf("node is reserved for %s, expected to start at %s; the pod's activeDeadlineSeconds ends after that", r.root, r.expected.UTC().Format(time.RFC3339))
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

// podEnd is when a running pod is expected to end: its start plus its
// runtime bound; zero when unknown.
func podEnd(pod *corev1.Pod) time.Time {
	d := runtimeBound(pod)
	if d == 0 || pod.Status.StartTime == nil {
		return time.Time{}
	}
	return pod.Status.StartTime.Add(d)
}

// expectedFit estimates when short frees: pods (those running on the held
// nodes, the gang's own excluded) end in order, preemptible ones
// (evictable(pod)) at now. Zero when the known ends do not free it; now
// when nothing is short.
func expectedFit(now time.Time, short placement.Resources, pods []*corev1.Pod, evictable func(*corev1.Pod) bool) time.Time {
	left := placement.Resources{}
	for n, v := range short {
		if v > 0 {
			left[n] = v
		}
	}
	if len(left) == 0 {
		return now
	}
	type ending struct {
		at  time.Time
		pod *corev1.Pod
	}
	var ends []ending
	for _, p := range pods {
		at := podEnd(p)
		if evictable(p) {
			at = now
		}
		if at.IsZero() {
			continue
		}
		if at.Before(now) {
			at = now
		}
		ends = append(ends, ending{at, p})
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].at.Before(ends[j].at) })
	for _, e := range ends {
		for n, v := range planinput.Requests(e.pod) {
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
			return e.at
		}
	}
	return time.Time{}
}

// podsOn lists the pods on nodes, from the snapshot, except skipped ones.
func podsOn(infos []fwk.NodeInfo, nodes sets.Set[string], skip func(*corev1.Pod) bool) []*corev1.Pod {
	var out []*corev1.Pod
	for _, ni := range infos {
		if !nodes.Has(ni.Node().Name) {
			continue
		}
		for _, pi := range ni.GetPods() {
			if p := pi.GetPod(); !skip(p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// reserver is the plugin's reservation state.
type reserver struct {
	t     *Topology
	args  ReservationArgs
	book  *book
	nodes corelisters.NodeLister
	start sync.Once
	now   func() time.Time
	// tick is the sweep's period.
	tick time.Duration

	mu sync.Mutex
	// due: hierarchies whose plan failed before they waited long enough,
	// with when they will have; the sweep activates them then, since
	// nothing else may retry them.
	due map[groups.Key]time.Time
}

func newReserver(t *Topology, args ReservationArgs, nodes corelisters.NodeLister) *reserver {
	return &reserver{t: t, args: args, book: newBook(), nodes: nodes, now: time.Now, tick: time.Second, due: map[groups.Key]time.Time{}}
}

// run starts the sweep once: on the first scheduling cycle, so only the
// scheduler that schedules (the leader) restores and writes reservations.
func (r *reserver) run(ctx context.Context) {
	r.start.Do(func() {
		r.restore(klog.FromContext(ctx))
		go func() {
			tk := time.NewTicker(r.tick)
			defer tk.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tk.C:
					r.sweep()
				}
			}
		}()
	})
}

// afterFor is how long root must wait before a reservation: afterSeconds,
// or the group's annotation when that is longer; negative: never.
func (r *reserver) afterFor(root groups.Key) time.Duration {
	after := time.Duration(r.args.AfterSeconds) * time.Second
	var ann map[string]string
	if root.Dialect == groups.Phalanx && r.t.groups.PodGroups != nil {
		switch root.Kind {
		case groups.PodGroupKind:
			if pg, err := r.t.groups.PodGroups.PodGroups(root.Namespace).Get(root.Name); err == nil {
				ann = pg.Annotations
			}
		case groups.CompositeKind:
			if r.t.groups.CompositePodGroups != nil {
				if cpg, err := r.t.groups.CompositePodGroups.CompositePodGroups(root.Namespace).Get(root.Name); err == nil {
					ann = cpg.Annotations
				}
			}
		}
	}
	if v, ok := ann[ReserveAfterAnnotation]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			// The annotation is the group owner's, the threshold the
			// administrator's: a group may wait longer (or never hold),
			// not take a domain sooner than every other gang.
			if n < 0 || n > math.MaxInt64/int64(time.Second) {
				return -1
			}
			return max(after, time.Duration(n)*time.Second)
		}
	}
	return after
}

// waitedSince is when the hierarchy started waiting: the later of the
// root's creation and its oldest pending member's. ok is false when
// nothing is pending.
func waitedSince(tree *groups.Tree) (since time.Time, rep *corev1.Pod, ok bool) {
	var oldest *corev1.Pod
	var walk func(*groups.Tree)
	walk = func(tr *groups.Tree) {
		for _, m := range tr.Members {
			if m.State == groups.Pending && (oldest == nil || m.Pod.CreationTimestamp.Before(&oldest.CreationTimestamp)) {
				oldest = m.Pod
			}
		}
		for _, ch := range tr.Children {
			walk(ch)
		}
	}
	walk(tree)
	if oldest == nil {
		return time.Time{}, nil, false
	}
	since = oldest.CreationTimestamp.Time
	if created := time.Unix(0, tree.Created); tree.Created != 0 && created.After(since) {
		since = created
	}
	return since, oldest, true
}

// wantsExplain says whether root's next plan should list its domains: it
// has waited long enough to be reserved for and holds nothing yet, or
// holds a domain whose numbers are refreshed.
func (r *reserver) wantsExplain(tree *groups.Tree) bool {
	if r.book.get(tree.Key) != nil {
		return true
	}
	after := r.afterFor(tree.Key)
	if after < 0 {
		return false
	}
	since, _, ok := waitedSince(tree)
	if !ok || r.now().Sub(since) < after {
		return false
	}
	if until, ok := r.cooldownUntil(tree.Key); ok && r.now().Before(until) {
		return false
	}
	return true
}

// eligibleAt is when tree will have waited long enough (or its cooldown
// ended), if it ever will.
func (r *reserver) eligibleAt(tree *groups.Tree) (time.Time, bool) {
	after := r.afterFor(tree.Key)
	if after < 0 {
		return time.Time{}, false
	}
	since, _, ok := waitedSince(tree)
	if !ok {
		return time.Time{}, false
	}
	at := since.Add(after)
	if until, ok := r.cooldownUntil(tree.Key); ok && until.After(at) {
		at = until
	}
	return at, true
}

// setExpected records res's expected start; when it moved, the pods it
// turned away are tried again.
func (r *reserver) setExpected(res *reservation, at time.Time) {
	r.book.mu.Lock()
	moved := !res.expected.Equal(at)
	res.expected = at
	var waiting map[string]*corev1.Pod
	if moved && len(res.waiting) > 0 {
		waiting, res.waiting = res.waiting, map[string]*corev1.Pod{}
	}
	r.book.mu.Unlock()
	if len(waiting) > 0 {
		r.t.handle.Activate(klog.Background(), waiting)
	}
}

// refresh recomputes the expected start of every hold from the pods the
// informer has on its nodes.
func (r *reserver) refresh(now time.Time) {
	holds := r.book.list()
	if len(holds) == 0 || r.t.podLister == nil {
		return
	}
	pods, err := r.t.podLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, res := range holds {
		r.book.mu.Lock()
		members, short, prio, preempts := res.members, res.short, res.priority, res.preempts
		r.book.mu.Unlock()
		var on []*corev1.Pod
		for _, p := range pods {
			if res.nodes.Has(p.Spec.NodeName) && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && !members.Has(string(p.UID)) {
				on = append(on, p)
			}
		}
		at := expectedFit(now, short, on, func(p *corev1.Pod) bool { return preempts && groups.PodPriority(p) < prio })
		r.setExpected(res, at)
	}
}

func (r *reserver) cooldownUntil(k groups.Key) (time.Time, bool) {
	r.book.mu.Lock()
	defer r.book.mu.Unlock()
	t, ok := r.book.cooldown[cooldownKeyOf(k)]
	return t, ok
}

// coolUntil keeps k from holding again before until (or a later end it
// already has).
func (r *reserver) coolUntil(k groups.Key, until time.Time) {
	r.book.mu.Lock()
	defer r.book.mu.Unlock()
	if cur, ok := r.book.cooldown[cooldownKeyOf(k)]; !ok || until.After(cur) {
		r.book.cooldown[cooldownKeyOf(k)] = until
	}
}

// consider runs after root's plan failed: it reserves a domain for a gang
// that waited long enough, or refreshes the numbers of the one it holds.
func (r *reserver) consider(logger klog.Logger, tree *groups.Tree, inf *placement.Infeasible, infos []fwk.NodeInfo) {
	if inf.Invalid || inf.TopologyKey == "" {
		return
	}
	if !r.wantsExplain(tree) {
		if at, ok := r.eligibleAt(tree); ok {
			r.mu.Lock()
			r.due[tree.Key] = at
			r.mu.Unlock()
		}
		return
	}
	_, rep, ok := waitedSince(tree)
	if !ok {
		return
	}
	now := r.now()
	member := hierarchyUIDs(tree)
	skip := func(p *corev1.Pod) bool { return member.Has(string(p.UID)) }
	prio := groups.PodPriority(rep)
	preempts := groups.PodPolicy(rep) == corev1.PreemptLowerPriority
	evictable := func(p *corev1.Pod) bool { return preempts && groups.PodPriority(p) < prio }

	fits := inf.Domains
	if len(fits) == 0 && inf.BestDomain != "" {
		fits = []placement.DomainFit{{Domain: inf.BestDomain, Fits: inf.Fits, Need: inf.Need, Short: inf.Short}}
	}
	byDomain := map[string]sets.Set[string]{}
	for _, ni := range infos {
		if v, ok := ni.Node().Labels[inf.TopologyKey]; ok {
			if byDomain[v] == nil {
				byDomain[v] = sets.New[string]()
			}
			byDomain[v].Insert(ni.Node().Name)
		}
	}
	var choices []domainChoice
	var never []string
	for _, f := range fits {
		nodes := byDomain[f.Domain]
		if len(nodes) == 0 {
			continue
		}
		used, free := domainUse(infos, nodes, skip)
		if n, res, ok := exceeds(f.Short, used); ok {
			never = append(never, fmt.Sprintf("%s short %d %s with every other pod gone", f.Domain, n, res))
			continue
		}
		choices = append(choices, domainChoice{
			domain: f.Domain, nodes: nodes, free: free, short: f.Short,
			end: expectedFit(now, f.Short, podsOn(infos, nodes, skip), evictable),
		})
	}
	if held := r.book.get(tree.Key); held != nil {
		// Refresh the numbers of the held domain; a gang keeps its domain.
		for _, ch := range choices {
			if ch.domain == held.domain {
				r.book.mu.Lock()
				held.free, held.short, held.members = ch.free, ch.short, member
				r.book.mu.Unlock()
				r.setExpected(held, ch.end)
				r.t.status.Set(tree.Key, r.holding(held))
				return
			}
		}
		return
	}
	if len(choices) == 0 {
		if len(never) > 0 {
			r.t.status.Set(tree.Key, groupstatus.Condition(ConditionReserved, metav1.ConditionFalse, ReasonNeverFits,
				fmt.Sprintf("no %s domain could ever hold the gang: %s", inf.TopologyKey, strings.Join(never, "; "))))
		}
		return
	}
	cand := &reservation{root: tree.Key, key: inf.TopologyKey, priority: prio, preempts: preempts, created: tree.Created, since: now, members: member}
	maxNodes := len(infos) * int(r.args.MaxSharePercent) / 100
	granted, displaced, why := r.book.offer(cand, choices, maxNodes)
	for _, d := range displaced {
		r.ended(d, ReasonTakenOver, fmt.Sprintf("%s=%s was taken over by %s (priority %d)", d.key, d.domain, cand.root, cand.priority))
	}
	if !granted {
		r.t.status.Set(tree.Key, groupstatus.Condition(ConditionReserved, metav1.ConditionFalse, ReasonNotReserved, why))
		return
	}
	logger.V(2).Info("Reserved a domain for a waiting gang", "group", tree.Key, "key", cand.key, "domain", cand.domain, "nodes", len(cand.nodes), "expected", cand.expected)
	reservationsHeld.Set(float64(len(r.book.list())))
	r.t.status.Set(tree.Key, r.holding(cand))
}

func (r *reserver) holding(res *reservation) metav1.Condition {
	r.book.mu.Lock()
	msg := res.message()
	r.book.mu.Unlock()
	c := groupstatus.Condition(ConditionReserved, metav1.ConditionTrue, ReasonHolding, msg)
	c.LastTransitionTime = metav1.NewTime(res.since)
	return c
}

// ended tells the group its hold ended, and activates the pods it turned
// away.
func (r *reserver) ended(res *reservation, reason, msg string) {
	reservationsEnded.WithLabelValues(reason).Inc()
	reservationsHeld.Set(float64(len(r.book.list())))
	if reason != ReasonGroupDeleted {
		r.t.status.Set(res.root, groupstatus.Condition(ConditionReserved, metav1.ConditionFalse, reason, msg))
	}
	r.book.mu.Lock()
	waiting := res.waiting
	res.waiting = map[string]*corev1.Pod{}
	r.book.mu.Unlock()
	if len(waiting) > 0 {
		r.t.handle.Activate(klog.Background(), waiting)
	}
}

// sweep ends holds whose gang bound, whose group is gone, or that expired,
// refreshes the others' expected start, and retries gangs that have now
// waited long enough.
func (r *reserver) sweep() {
	now := r.now()
	defer r.refresh(now)
	r.mu.Lock()
	var retry []groups.Key
	for k, at := range r.due {
		if !now.Before(at) {
			retry = append(retry, k)
			delete(r.due, k)
		}
	}
	r.mu.Unlock()
	for _, k := range retry {
		pods := map[string]*corev1.Pod{}
		for _, p := range r.t.groups.HierarchyMembersIn(k, groups.Pending) {
			pods[p.Namespace+"/"+p.Name] = p
		}
		if len(pods) > 0 {
			r.t.drop(k)
			r.t.handle.Activate(klog.Background(), pods)
		}
	}
	for _, res := range r.book.list() {
		if _, ok := r.t.groups.Get(res.root); !ok {
			if r.book.release(res.root) != nil {
				r.ended(res, ReasonGroupDeleted, "")
			}
			continue
		}
		if ok, _, _ := r.t.groups.Satisfied(res.root, groups.ByBound); ok {
			if r.book.release(res.root) != nil {
				r.ended(res, ReasonReleasedBound, fmt.Sprintf("the gang bound; %s=%s held for %s", res.key, res.domain, now.Sub(res.since).Round(time.Second)))
			}
			continue
		}
		hold := time.Duration(r.args.MaxHoldSeconds) * time.Second
		if now.Sub(res.since) >= hold {
			if r.book.release(res.root) != nil {
				r.coolUntil(res.root, now.Add(hold))
				r.ended(res, ReasonExpired, fmt.Sprintf("%s=%s was held for the maximum %s; no new hold before %s", res.key, res.domain, hold, now.Add(hold).UTC().Format(time.RFC3339)))
			}
		}
	}
	r.book.mu.Lock()
	for k, until := range r.book.cooldown {
		if now.After(until) {
			delete(r.book.cooldown, k)
		}
	}
	r.book.mu.Unlock()
}

// forget ends the hold of a deleted group. Its cooldown stays until it
// ends, for a group created again under the same name.
func (r *reserver) forget(k groups.Key) {
	if res := r.book.release(k); res != nil {
		r.ended(res, ReasonGroupDeleted, "")
	}
	r.mu.Lock()
	delete(r.due, k)
	r.mu.Unlock()
}

// filter refuses pod a node another hierarchy holds, unless it may backfill.
func (r *reserver) filter(pod *corev1.Pod, root groups.Key, grouped bool, node string) *fwk.Status {
	now := r.now()
	r.book.mu.Lock()
	defer r.book.mu.Unlock()
	res := r.book.byNode[node]
	if res == nil || (grouped && res.root == root) {
		return nil
	}
	// Under the lock: the sweep moves expected.
	ok, why := res.admits(pod, now, *r.args.Backfill)
	if ok {
		return nil
	}
	if res.waiting != nil {
		res.waiting[pod.Namespace+"/"+pod.Name] = pod
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
}

// closed lists, for a plan of root, the nodes other hierarchies hold that
// rep may not use, with why.
func (r *reserver) closed(root groups.Key, rep *corev1.Pod) map[string]string {
	now := r.now()
	out := map[string]string{}
	r.book.mu.Lock()
	defer r.book.mu.Unlock()
	for _, res := range r.book.held {
		if res.root == root {
			continue
		}
		if ok, why := res.admits(rep, now, *r.args.Backfill); !ok {
			for n := range res.nodes {
				out[n] = why
			}
		}
	}
	return out
}

// domainUse sums, over nodes, what pods outside the hierarchy use and
// what is free.
func domainUse(infos []fwk.NodeInfo, nodes sets.Set[string], skip func(*corev1.Pod) bool) (used, free placement.Resources) {
	used, free = placement.Resources{}, placement.Resources{}
	for _, ni := range infos {
		if !nodes.Has(ni.Node().Name) {
			continue
		}
		alloc := ni.GetAllocatable()
		free[corev1.ResourceCPU] += alloc.GetMilliCPU() - ni.GetRequested().GetMilliCPU()
		free[corev1.ResourceMemory] += alloc.GetMemory() - ni.GetRequested().GetMemory()
		for n, v := range alloc.GetScalarResources() {
			free[n] += v - ni.GetRequested().GetScalarResources()[n]
		}
		free[corev1.ResourcePods] += int64(alloc.GetAllowedPodNumber() - len(ni.GetPods()))
		for _, pi := range ni.GetPods() {
			if skip(pi.GetPod()) {
				continue
			}
			for n, v := range planinput.Requests(pi.GetPod()) {
				used[n] += v
			}
			used[corev1.ResourcePods]++
		}
	}
	for n, v := range free {
		if v <= 0 {
			delete(free, n)
		}
	}
	return used, free
}

// exceeds reports a resource short beyond everything other pods use: the
// domain could not hold the gang even empty.
func exceeds(short, used placement.Resources) (int64, corev1.ResourceName, bool) {
	for n, v := range short {
		if v > used[n] {
			return v - used[n], n, true
		}
	}
	return 0, "", false
}

func hierarchyUIDs(tree *groups.Tree) sets.Set[string] {
	out := sets.New[string]()
	var walk func(*groups.Tree)
	walk = func(tr *groups.Tree) {
		for _, m := range tr.Members {
			out.Insert(string(m.Pod.UID))
		}
		for _, ch := range tr.Children {
			walk(ch)
		}
	}
	walk(tree)
	return out
}
