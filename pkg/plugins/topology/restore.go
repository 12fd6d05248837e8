package topology

// Restoring holds after a failover (the rules are pkg/reservation's
// Check and Book.Restore). The book lives in the leader's memory; a
// scheduler that takes over reads the records its predecessor kept in root
// groups' status.reservation, as claims to check, never as grants. The
// Reserved condition is for people; it is read only to notice a Holding
// condition without a record (written by an earlier version of the
// scheduler, which kept holds only in the condition's message), which is
// not restored but corrected: the gang gets its next hold from its next
// failed plan, as it would without a restart.

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/reservation"
)

// restore rebuilds the holds that groups' records claim, keeping only
// what passes the book's checks; a claimed hold that is not restored gets
// a False condition saying why.
func (r *reserver) restore(logger klog.Logger) {
	now := r.now()
	nodes, err := r.nodes.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing nodes to restore reservations")
		return
	}
	nodeLabels := make(map[string]map[string]string, len(nodes))
	for _, n := range nodes {
		nodeLabels[n.Name] = n.Labels
	}
	var verdicts []reservation.Verdict
	for _, c := range r.claims() {
		f := reservation.Facts{After: r.afterFor(c.Root), Nodes: nodeLabels}
		if _, ok := r.t.groups.Get(c.Root); ok {
			f.Tree, _ = r.t.groups.TreeOf(c.Root)
		}
		verdicts = append(verdicts, reservation.Check(c, f, r.args, now))
	}
	for _, v := range r.book.Restore(verdicts, r.args.MaxNodes(len(nodes))) {
		logger.V(2).Info("Did not restore a reservation", "group", v.Root, "reason", v.Reason, "why", v.Why)
		r.setEnded(v.Root, v.Reason, "not restored after a scheduler restart: "+v.Why, v.Record)
	}
	for _, h := range r.book.List() {
		// The condition keeps its message until the gang's next plan
		// recomputes the numbers; expected is unknown until then.
		logger.V(2).Info("Restored a reservation", "group", h.Root, "key", h.Key, "domain", h.Domain, "nodes", len(h.Nodes), "since", h.Since)
	}
	reservationsHeld.Set(float64(r.book.Len()))
}

// claims lists what Phalanx's own root candidates say of their holds.
// Upstream scheduling.k8s.io groups get the condition but no record, and
// are not restored: their hold starts again after their threshold.
func (r *reserver) claims() []reservation.Claim {
	var out []reservation.Claim
	add := func(k groups.Key, conds []metav1.Condition, rec *v1alpha1.GroupReservation) {
		c := reservation.Claim{Root: k, Record: recordOf(rec)}
		if cond := meta.FindStatusCondition(conds, reservation.ConditionReserved); cond != nil {
			c.Holding = cond.Status == metav1.ConditionTrue && cond.Reason == reservation.ReasonHolding
		}
		if c.Record != nil || c.Holding {
			out = append(out, c)
		}
	}
	if r.t.groups.PodGroups != nil {
		if pgs, err := r.t.groups.PodGroups.List(labels.Everything()); err == nil {
			for _, pg := range pgs {
				add(groups.Key{Dialect: groups.Phalanx, Kind: groups.PodGroupKind, Namespace: pg.Namespace, Name: pg.Name}, pg.Status.Conditions, pg.Status.Reservation)
			}
		}
	}
	if r.t.groups.CompositePodGroups != nil {
		if cpgs, err := r.t.groups.CompositePodGroups.List(labels.Everything()); err == nil {
			for _, c := range cpgs {
				add(groups.Key{Dialect: groups.Phalanx, Kind: groups.CompositeKind, Namespace: c.Namespace, Name: c.Name}, c.Status.Conditions, c.Status.Reservation)
			}
		}
	}
	return out
}
