package topology

// Restoring holds after a failover. The book lives in the leader's memory;
// a scheduler that takes over rebuilds it from the Reserved conditions the
// previous leader wrote on root groups. A group's status is not the
// scheduler's alone, though: whoever may update podgroups/status can write
// any Reserved condition, and a condition can outlive the scheduler that
// wrote it. A condition is therefore read as a claim, never as a grant. A
// hold is restored only when this scheduler could have granted it:
//   - the group exists, is the root of its hierarchy, has pending members,
//     and has waited its threshold;
//   - the key is one of the hierarchy's topology levels, and some node is
//     in the domain;
//   - restored holds, highest-ranked first, stay disjoint and within
//     maxSharePercent of the nodes;
//   - the hold starts at the condition's lastTransitionTime, or now when
//     that lies in the future, so no claim outlives maxHoldSeconds from the
//     restart; one already past its maximum is not restored, and its gang
//     waits maxHoldSeconds from the hold's end before holding again, as it
//     would after an expiry seen live (an Expired condition restores that
//     wait too).
// The rank comes from what the API server sets: the gang's pod priority
// (resolved from PriorityClasses at admission) and the group's creation
// time. What a forged claim can still choose is which of its own gang's
// domains is held, within the share, for at most maxHoldSeconds after a
// restart: no more than the gang would get from its next failed plan.
// Anything else in the message (node count, free room, expected fit) is
// display only and is recomputed.

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
)

// claim is a root group's Reserved condition as found after a restart.
type claim struct {
	root groups.Key
	cond metav1.Condition
}

// restore rebuilds the holds that groups' Reserved conditions claim,
// keeping only what passes the checks above; a claimed hold that is not
// restored gets a False condition saying why.
func (r *reserver) restore(logger klog.Logger) {
	now := r.now()
	nodes, err := r.nodes.List(labels.Everything())
	if err != nil {
		logger.Error(err, "Listing nodes to restore reservations")
		return
	}
	maxNodes := len(nodes) * int(r.args.MaxSharePercent) / 100
	var cands []*reservation
	for _, c := range r.claims() {
		res, reason, why := r.check(c, now, nodes)
		switch {
		case res != nil:
			cands = append(cands, res)
		case reason != "":
			r.notRestored(logger, c.root, reason, why)
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].outranks(cands[j]) })
	for _, c := range cands {
		reason := ReasonNotReserved
		if r.book.heldAny(c.nodes) {
			reason = ReasonRestoreOverlap
		}
		granted, _, why := r.book.offer(c, []domainChoice{{domain: c.domain, nodes: c.nodes}}, maxNodes)
		if !granted {
			r.notRestored(logger, c.root, reason, why)
			continue
		}
		// The condition keeps its message until the gang's next plan
		// recomputes the numbers; expected is unknown until then.
		logger.V(2).Info("Restored a reservation", "group", c.root, "key", c.key, "domain", c.domain, "nodes", len(c.nodes), "since", c.since)
	}
	reservationsHeld.Set(float64(len(r.book.list())))
}

// claims lists the Reserved conditions of Phalanx's own root candidates.
// Upstream scheduling.k8s.io groups get the condition but are not
// restored: their hold starts again after their threshold.
func (r *reserver) claims() []claim {
	var out []claim
	add := func(k groups.Key, conds []metav1.Condition) {
		if c := meta.FindStatusCondition(conds, ConditionReserved); c != nil {
			out = append(out, claim{root: k, cond: *c})
		}
	}
	if r.t.groups.PodGroups != nil {
		if pgs, err := r.t.groups.PodGroups.List(labels.Everything()); err == nil {
			for _, pg := range pgs {
				add(groups.Key{Dialect: groups.Phalanx, Kind: groups.PodGroupKind, Namespace: pg.Namespace, Name: pg.Name}, pg.Status.Conditions)
			}
		}
	}
	if r.t.groups.CompositePodGroups != nil {
		if cpgs, err := r.t.groups.CompositePodGroups.List(labels.Everything()); err == nil {
			for _, c := range cpgs {
				add(groups.Key{Dialect: groups.Phalanx, Kind: groups.CompositeKind, Namespace: c.Namespace, Name: c.Name}, c.Status.Conditions)
			}
		}
	}
	return out
}

// check turns a claim into the hold to offer the book, or says why none is
// restored (reason "" when nothing is to be said: no hold was claimed, or
// the group is gone).
func (r *reserver) check(c claim, now time.Time, nodes []*corev1.Node) (res *reservation, reason, why string) {
	hold := time.Duration(r.args.MaxHoldSeconds) * time.Second
	since := c.cond.LastTransitionTime.Time
	if since.After(now) {
		since = now
	}
	if c.cond.Status == metav1.ConditionFalse && c.cond.Reason == ReasonExpired {
		if !since.IsZero() {
			r.coolUntil(c.root, since.Add(hold))
		}
		return nil, "", ""
	}
	if c.cond.Status != metav1.ConditionTrue {
		return nil, "", ""
	}
	key, domain, ok := parseHolding(c.cond.Message)
	if c.cond.Reason != ReasonHolding || !ok || since.IsZero() {
		return nil, ReasonNotReserved, "the condition names no hold the scheduler wrote"
	}
	info, ok := r.t.groups.Get(c.root)
	if !ok {
		return nil, "", ""
	}
	tree, err := r.t.groups.TreeOf(c.root)
	if err != nil {
		return nil, "", ""
	}
	if tree.Key != c.root {
		// Holds belong to roots: the book would refuse a child's hold to
		// its own siblings' pods.
		return nil, ReasonNotReserved, fmt.Sprintf("holds are made for the root group %s", tree.Key)
	}
	waiting, rep, ok := waitedSince(tree)
	if !ok {
		return nil, ReasonNotReserved, "no member of the gang is pending"
	}
	if !topologyKeys(tree).Has(key) {
		return nil, ReasonNotReserved, fmt.Sprintf("%s is not a topology key of the gang", key)
	}
	after := r.afterFor(c.root)
	if after < 0 {
		return nil, ReasonNotReserved, fmt.Sprintf("the group's %s annotation says never to reserve for it", ReserveAfterAnnotation)
	}
	if waited := now.Sub(waiting); waited < after {
		return nil, ReasonNotReserved, fmt.Sprintf("the gang has waited %s of the %s before a hold", waited.Round(time.Second), after)
	}
	if ended := since.Add(hold); !now.Before(ended) {
		// As the sweep does at expiry, measured from when the hold ended.
		until := ended.Add(hold)
		r.coolUntil(c.root, until)
		msg := fmt.Sprintf("%s=%s reached the maximum hold of %s at %s", key, domain, hold, ended.UTC().Format(time.RFC3339))
		if until.After(now) {
			msg += "; no new hold before " + until.UTC().Format(time.RFC3339)
		}
		return nil, ReasonExpired, msg
	}
	set := sets.New[string]()
	for _, n := range nodes {
		if v, ok := n.Labels[key]; ok && v == domain {
			set.Insert(n.Name)
		}
	}
	if set.Len() == 0 {
		return nil, ReasonNotReserved, fmt.Sprintf("no node has %s=%s", key, domain)
	}
	return &reservation{
		root: c.root, key: key, domain: domain, nodes: set,
		priority: groups.PodPriority(rep), preempts: groups.PodPolicy(rep) == corev1.PreemptLowerPriority,
		created: info.Created, since: since.Truncate(time.Second), members: hierarchyUIDs(tree),
	}, "", ""
}

func (r *reserver) notRestored(logger klog.Logger, k groups.Key, reason, why string) {
	logger.V(2).Info("Did not restore a reservation", "group", k, "reason", reason, "why", why)
	r.t.status.Set(k, groupstatus.Condition(ConditionReserved, metav1.ConditionFalse, reason, "not restored after a scheduler restart: "+why))
}

// parseHolding reads the domain back from a Holding message.
func parseHolding(msg string) (key, domain string, ok bool) {
	rest, found := strings.CutPrefix(msg, "holds ")
	if !found {
		return "", "", false
	}
	kv, _, _ := strings.Cut(rest, " ")
	key, domain, ok = strings.Cut(kv, "=")
	return key, domain, ok && key != "" && domain != ""
}

// topologyKeys lists the levels the hierarchy's groups may be planned at:
// their required and preferred keys, and, for a group without a key, its
// pending members' required pod-affinity keys (a group whose pods must be
// together in a zone is planned within one). They are the only keys a
// failed plan of it can hold a domain of.
func topologyKeys(tree *groups.Tree) sets.Set[string] {
	out := sets.New[string]()
	var walk func(*groups.Tree)
	walk = func(tr *groups.Tree) {
		if tr.TopologyKey != "" {
			out.Insert(tr.TopologyKey)
		}
		out.Insert(tr.PreferredKeys...)
		for _, m := range tr.Members {
			if a := m.Pod.Spec.Affinity; m.State == groups.Pending && a != nil && a.PodAffinity != nil {
				for _, term := range a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
					out.Insert(term.TopologyKey)
				}
			}
		}
		for _, ch := range tr.Children {
			walk(ch)
		}
	}
	walk(tree)
	return out
}
