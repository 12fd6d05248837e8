package topology

// The reservation adapter: PhalanxTopology's side of reservation and
// backfill. The rules (which domain a gang holds, whom a held node admits,
// when a hold ends, which claimed holds a new leader restores) are the
// book's, in pkg/reservation; this file only translates. It reads the
// snapshot, the pod informer and the group cache into the book's plain
// inputs, and turns the book's answers into Filter statuses, the root
// group's Reserved condition and status record, activations of the pods a
// hold turned away, and metrics.

import (
	"context"
	"fmt"
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

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
	"github.com/phalanx-sched/phalanx/pkg/reservation"
)

// explainDomainsForReservation is how many domains a waiting gang's failed
// plan lists, to choose the one to hold.
const explainDomainsForReservation = 16

// reserver is the plugin's reservation state: the book, and what it needs
// to feed it.
type reserver struct {
	t     *Topology
	args  reservation.Args
	book  *reservation.Book
	nodes corelisters.NodeLister
	start sync.Once
	now   func() time.Time
	// tick is the sweep's period.
	tick time.Duration
	// protections returns the profile's PhalanxPreemption, which knows
	// the minimum runtimes; nil when the profile runs none.
	protections func() pluginrt.Protections
}

func newReserver(t *Topology, args reservation.Args, nodes corelisters.NodeLister, protections func() pluginrt.Protections) *reserver {
	return &reserver{t: t, args: args, book: reservation.NewBook(), nodes: nodes, now: time.Now, tick: time.Second, protections: protections}
}

// protect sets ProtectedUntil of every evictable pod in running, whose
// pods are pods.
func (r *reserver) protect(running []reservation.Running, pods []*corev1.Pod) {
	if r.protections == nil {
		return
	}
	pr := r.protections()
	if pr == nil {
		return
	}
	var ask []*corev1.Pod
	var at []int
	for i := range running {
		if running[i].Evictable {
			ask, at = append(ask, pods[i]), append(at, i)
		}
	}
	if len(ask) == 0 {
		return
	}
	for j, until := range pr.ProtectedUntil(ask) {
		running[at[j]].ProtectedUntil = until
	}
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

// afterFor is how long root must wait before a hold, from its annotations
// (only Phalanx's own groups carry the annotation).
func (r *reserver) afterFor(root groups.Key) time.Duration {
	var ann map[string]string
	if root.Dialect == groups.Phalanx {
		switch {
		case root.Kind == groups.PodGroupKind && r.t.groups.PodGroups != nil:
			if pg, err := r.t.groups.PodGroups.PodGroups(root.Namespace).Get(root.Name); err == nil {
				ann = pg.Annotations
			}
		case root.Kind == groups.CompositeKind && r.t.groups.CompositePodGroups != nil:
			if cpg, err := r.t.groups.CompositePodGroups.CompositePodGroups(root.Namespace).Get(root.Name); err == nil {
				ann = cpg.Annotations
			}
		}
	}
	return r.args.AfterFor(ann)
}

// wantsExplain says whether root's next plan should list its domains: it
// has waited long enough to be reserved for and holds nothing yet, or
// holds a domain whose numbers are refreshed.
func (r *reserver) wantsExplain(tree *groups.Tree) bool {
	since, _, waiting := reservation.WaitedSince(tree)
	ok, _ := r.book.Due(tree.Key, waiting, since, r.afterFor(tree.Key), r.now())
	return ok
}

// consider runs after root's plan failed: it reserves a domain for a gang
// that waited long enough, or refreshes the numbers of the one it holds.
func (r *reserver) consider(logger klog.Logger, tree *groups.Tree, inf *placement.Infeasible, infos []fwk.NodeInfo) {
	if inf.Invalid || inf.TopologyKey == "" {
		return
	}
	now := r.now()
	since, rep, waiting := reservation.WaitedSince(tree)
	if ok, at := r.book.Due(tree.Key, waiting, since, r.afterFor(tree.Key), now); !ok {
		if !at.IsZero() {
			r.book.Remind(tree.Key, at)
		}
		return
	}
	if !waiting {
		return
	}
	members := reservation.Members(tree)
	gang := reservation.Gang{
		Root: tree.Key, Priority: groups.PodPriority(rep),
		Preempts: groups.PodPolicy(rep) == corev1.PreemptLowerPriority, Created: tree.Created,
	}
	choices, never := reservation.Choose(now, r.domainsOf(inf, infos, members, gang))
	if held, activate, ok := r.book.Refresh(tree.Key, choices, members); ok {
		r.activate(activate)
		r.setHolding(held)
		return
	}
	if _, holds := r.book.Get(tree.Key); holds {
		// The held domain is no longer among the plan's: keep it as it is.
		return
	}
	if len(choices) == 0 {
		if len(never) > 0 {
			r.t.status.Set(tree.Key, groupstatus.Condition(reservation.ConditionReserved, metav1.ConditionFalse, reservation.ReasonNeverFits,
				fmt.Sprintf("no %s domain could ever hold the gang: %s", inf.TopologyKey, strings.Join(never, "; "))))
		}
		return
	}
	cand := reservation.Hold{Gang: gang, Key: inf.TopologyKey, Since: now, Members: members}
	granted, ok, displaced, why := r.book.Offer(cand, choices, r.args.MaxNodes(len(infos)))
	for _, d := range displaced {
		r.ended(d)
	}
	if !ok {
		r.t.status.Set(tree.Key, groupstatus.Condition(reservation.ConditionReserved, metav1.ConditionFalse, reservation.ReasonNotReserved, why))
		return
	}
	logger.V(2).Info("Reserved a domain for a waiting gang", "group", tree.Key, "key", granted.Key, "domain", granted.Domain, "nodes", len(granted.Nodes), "expected", granted.Expected)
	reservationsHeld.Set(float64(r.book.Len()))
	r.setHolding(granted)
}

// domainsOf reads, for each domain the failed plan lists (closest first),
// its nodes, what pods outside the hierarchy use and run there (with the
// protection of those the gang may preempt), and what is free, from the
// snapshot.
func (r *reserver) domainsOf(inf *placement.Infeasible, infos []fwk.NodeInfo, members sets.Set[string], gang reservation.Gang) []reservation.Domain {
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
	out := make([]reservation.Domain, 0, len(fits))
	for _, f := range fits {
		d := reservation.Domain{Fit: f, Nodes: byDomain[f.Domain], Used: placement.Resources{}, Free: placement.Resources{}}
		var pods []*corev1.Pod
		for _, ni := range infos {
			if d.Nodes.Has(ni.Node().Name) {
				pods = addNode(&d, ni, members, gang, pods)
			}
		}
		r.protect(d.Running, pods)
		for n, v := range d.Free {
			if v <= 0 {
				delete(d.Free, n)
			}
		}
		out = append(out, d)
	}
	return out
}

// addNode adds node ni's free room and its pods outside the hierarchy to
// d, and those pods to pods, one for each of d.Running.
func addNode(d *reservation.Domain, ni fwk.NodeInfo, members sets.Set[string], gang reservation.Gang, pods []*corev1.Pod) []*corev1.Pod {
	alloc, req := ni.GetAllocatable(), ni.GetRequested()
	d.Free[corev1.ResourceCPU] += alloc.GetMilliCPU() - req.GetMilliCPU()
	d.Free[corev1.ResourceMemory] += alloc.GetMemory() - req.GetMemory()
	for n, v := range alloc.GetScalarResources() {
		d.Free[n] += v - req.GetScalarResources()[n]
	}
	d.Free[corev1.ResourcePods] += int64(alloc.GetAllowedPodNumber() - len(ni.GetPods()))
	for _, pi := range ni.GetPods() {
		p := pi.GetPod()
		if members.Has(string(p.UID)) {
			continue
		}
		requests := placement.PodRequests(p)
		for n, v := range requests {
			d.Used[n] += v
		}
		d.Used[corev1.ResourcePods]++
		d.Running = append(d.Running, reservation.Running{End: reservation.PodEnd(p), Requests: requests, Evictable: gang.MayEvict(p)})
		pods = append(pods, p)
	}
	return pods
}

// setHolding writes h to its group: the Holding condition for people, the
// record for a scheduler that takes over.
func (r *reserver) setHolding(h reservation.Hold) {
	c := groupstatus.Condition(reservation.ConditionReserved, metav1.ConditionTrue, reservation.ReasonHolding, h.Message())
	c.LastTransitionTime = metav1.NewTime(h.Since)
	r.t.status.Set(h.Root, c)
	r.t.status.SetReservation(h.Root, apiRecord(h.Record()))
}

// setEnded writes a False Reserved condition, and the record the group's
// status keeps instead of its hold (nil: none).
func (r *reserver) setEnded(root groups.Key, reason, msg string, rec *reservation.Record) {
	r.t.status.Set(root, groupstatus.Condition(reservation.ConditionReserved, metav1.ConditionFalse, reason, msg))
	r.t.status.SetReservation(root, apiRecord(rec))
}

// ended tells the group its hold ended, and activates the pods it turned
// away.
func (r *reserver) ended(e reservation.Ended) {
	reservationsEnded.WithLabelValues(e.Reason).Inc()
	reservationsHeld.Set(float64(r.book.Len()))
	if e.Reason != reservation.ReasonGroupDeleted {
		r.setEnded(e.Root, e.Reason, e.Message, e.Record)
	}
	r.activate(e.Waiting)
}

func (r *reserver) activate(pods map[string]*corev1.Pod) {
	if len(pods) > 0 {
		r.t.handle.Activate(klog.Background(), pods)
	}
}

// sweep ends holds whose gang bound, whose group is gone, or that expired,
// refreshes the others' expected start, and retries gangs that have now
// waited long enough.
func (r *reserver) sweep() {
	now := r.now()
	for _, k := range r.book.Reminders(now) {
		pods := map[string]*corev1.Pod{}
		for _, p := range r.t.groups.HierarchyMembersIn(k, groups.Pending) {
			pods[p.Namespace+"/"+p.Name] = p
		}
		if len(pods) > 0 {
			r.t.drop(k)
			r.activate(pods)
		}
	}
	fates := map[groups.Key]reservation.Fate{}
	for _, h := range r.book.List() {
		if _, ok := r.t.groups.Get(h.Root); !ok {
			fates[h.Root] = reservation.Gone
		} else if ok, _, _ := r.t.groups.Satisfied(h.Root, groups.ByBound); ok {
			fates[h.Root] = reservation.Bound
		}
	}
	for _, e := range r.book.Sweep(now, r.args.MaxHold(), fates) {
		r.ended(e)
	}
	r.refresh(now)
}

// refresh recomputes the expected start of every hold from the pods the
// informer has on its nodes.
func (r *reserver) refresh(now time.Time) {
	holds := r.book.List()
	if len(holds) == 0 || r.t.podLister == nil {
		return
	}
	pods, err := r.t.podLister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, h := range holds {
		var on []reservation.Running
		var onPods []*corev1.Pod
		for _, p := range pods {
			if h.Nodes.Has(p.Spec.NodeName) && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && !h.Members.Has(string(p.UID)) {
				on = append(on, reservation.Running{End: reservation.PodEnd(p), Requests: placement.PodRequests(p), Evictable: h.MayEvict(p)})
				onPods = append(onPods, p)
			}
		}
		r.protect(on, onPods)
		at, protected := reservation.ExpectedFit(now, h.Short, on)
		r.activate(r.book.Expect(h.Root, at, protected))
	}
}

// forget ends the hold of a deleted group.
func (r *reserver) forget(k groups.Key) {
	if e, ok := r.book.Forget(k); ok {
		r.ended(e)
	}
}

// filter refuses pod a node another hierarchy holds, unless it may backfill.
func (r *reserver) filter(pod *corev1.Pod, root groups.Key, grouped bool, node string) *fwk.Status {
	if ok, why := r.book.Admit(pod, root, grouped, node, r.now(), r.args.BackfillOn()); !ok {
		return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, why)
	}
	return nil
}

// closed lists, for a plan of root, the nodes other hierarchies hold that
// rep may not use, with why.
func (r *reserver) closed(root groups.Key, rep *corev1.Pod) map[string]string {
	return r.book.Closed(root, rep, r.now(), r.args.BackfillOn())
}

// apiRecord and recordOf translate the book's record to and from the
// groups' status.reservation.
func apiRecord(rec *reservation.Record) *v1alpha1.GroupReservation {
	if rec == nil {
		return nil
	}
	out := &v1alpha1.GroupReservation{TopologyKey: rec.Key, Domain: rec.Domain, Since: metav1.NewTime(rec.Since)}
	if !rec.Expired.IsZero() {
		t := metav1.NewTime(rec.Expired)
		out.Expired = &t
	}
	return out
}

func recordOf(g *v1alpha1.GroupReservation) *reservation.Record {
	if g == nil {
		return nil
	}
	rec := &reservation.Record{Key: g.TopologyKey, Domain: g.Domain, Since: g.Since.Time}
	if g.Expired != nil {
		rec.Expired = g.Expired.Time
	}
	return rec
}
