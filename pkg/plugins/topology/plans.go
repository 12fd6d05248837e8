package topology

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/placement"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
)

// Plans: making a hierarchy's plan over the snapshot (replan), storing it
// per root, deciding whether a stored one still answers for a member
// (usablePlan, the snapshot fingerprint, the reuse of a failed plan), dropping
// it, and reporting its outcome in the groups' conditions. The extension
// points in topology.go only ask for a plan and read it.

// A failed plan answers for the group's other members while the snapshot
// is unchanged, so a gang that cannot fit costs one planning run per change
// of the cluster, not one per member. infeasibleReuse caps that as a safety.
const infeasibleReuse = 10 * time.Second

// fingerprint changes whenever any node's state in the snapshot changes:
// node generations only grow, so their sum moves with every update.
type fingerprint struct {
	nodes int
	gens  int64
	// devices is the device epoch (watchDevices).
	devices uint64
}

func (t *Topology) fingerprintOf(infos []fwk.NodeInfo) fingerprint {
	f := fingerprint{nodes: len(infos), devices: t.deviceEpoch.Load()}
	for _, ni := range infos {
		f.gens += ni.GetGeneration()
	}
	return f
}

type plan struct {
	created time.Time
	// rev is the hierarchy revision the plan was made at; an infeasible
	// plan answers only for that revision.
	rev         uint64
	snapshot    fingerprint
	assignments map[string]string // pod key -> node
	// allocated names the shared claims (namespace/name) the plan
	// allocated (shared.go).
	allocated map[string]bool
	domains   map[string]string // group key string -> domain value
	// levels are the domains of the device attribute levels the plan
	// used, per key and node (planinput.DeviceDomains): Filter reads a
	// node's domain of such a key there, not in its labels.
	levels map[string]map[string]string
	// nominated are the members the plan nominated, by identity only
	// (identities): withdrawing a nomination needs no more.
	nominated  []memberRef
	infeasible *placement.Infeasible
	// pinned are, for an infeasible plan, the domains the hierarchy's
	// placed members already occupy (pinnedDomains), found once from the
	// tree the plan was made from. The plan only answers while the
	// snapshot is unchanged, and a member reserved or bound changes it.
	pinned map[string]string
}

// usablePlan returns the stored plan for root when it can answer for pod.
func (t *Topology) usablePlan(root groups.Key, key string) *plan {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.plans[root]
	if p == nil {
		return nil
	}
	age := time.Since(p.created)
	if p.infeasible != nil {
		// A group change drops the plan (groupChanged), but a plan made
		// from the hierarchy as it was just before can be stored after
		// that; reused, it would refuse the gang at its old size until
		// the cluster changes.
		rev, known := t.groups.HierarchyRevision(root)
		infos, err := t.handle.SnapshotSharedLister().NodeInfos().List()
		if err == nil && known && rev == p.rev && age < infeasibleReuse && t.fingerprintOf(infos) == p.snapshot {
			return p
		}
		return nil
	}
	if age > time.Duration(t.args.PlanTTLSeconds)*time.Second {
		return nil
	}
	node, ok := p.assignments[key]
	if !ok {
		return nil
	}
	if _, err := t.handle.SnapshotSharedLister().NodeInfos().Get(node); err != nil {
		return nil
	}
	return p
}

func (t *Topology) replan(ctx context.Context, root groups.Key) (*plan, *fwk.Status) {
	logger := klog.FromContext(ctx)
	// Read before the tree, so the plan never claims a newer revision than
	// the hierarchy it was made from.
	rev, _ := t.groups.HierarchyRevision(root)
	tree, err := t.groups.TreeOf(root)
	if err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, err.Error())
	}
	infos, err := t.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("list snapshot nodes: %w", err))
	}
	// Read before planning, as the revision is: a device change while
	// the plan is made must make the plan stale, not be taken as seen.
	seen := t.fingerprintOf(infos)
	cons := t.constraints(ctx, root, infos)
	opts := t.opts
	if t.resv != nil {
		if t.resv.book.HeldNodes() > 0 {
			cons.Closed = func(rep *corev1.Pod) map[string]string { return t.resv.closed(root, rep) }
		}
		if t.resv.wantsExplain(tree) {
			opts.ExplainDomains = explainDomainsForReservation
		}
	}
	input, members, err := planinput.BuildInput(tree, cons)
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("plan group %s: %w", root, err))
	}
	opts.Extra = cons.Extra()
	opts.Domains = cons.DeviceDomains(ctx, tree, input)
	ranked := t.preferRanks(root, input)
	table, reserved, err := t.nodes.Table(infos, t.handle.NominatedPodsForNode, members)
	if err != nil {
		return nil, fwk.AsStatus(fmt.Errorf("prepare snapshot nodes: %w", err))
	}
	t.unusable.report(t.handle.EventRecorder(), table, t.snapshotNode)
	start := time.Now()
	result, err := table.Plan(input, reserved, opts)
	planDuration.Observe(time.Since(start).Seconds())
	p := &plan{created: time.Now(), rev: rev, snapshot: seen, levels: opts.Domains}
	var inf *placement.Infeasible
	switch {
	case errors.As(err, &inf):
		p.infeasible = inf
		p.pinned = t.pinnedDomains(tree)
		// Shared claims allocated for an earlier plan keep the group in
		// their reach; when that no longer fits, free them (unless a
		// member uses them) so the next plan may choose anew.
		t.releaseShared(ctx, root, tree)
		logger.V(3).Info("Group cannot be placed", "group", root, "reason", inf.Reason)
		t.reportInfeasible(tree, inf)
		if t.resv != nil {
			t.resv.consider(logger, tree, inf, infos)
		}
	case err != nil:
		return nil, fwk.AsStatus(fmt.Errorf("plan group %s: %w", root, err))
	default:
		if p.allocated, err = t.allocateShared(ctx, root, cons, result.Assignments); err != nil {
			return nil, fwk.AsStatus(fmt.Errorf("plan group %s: %w", root, err))
		}
		planinput.KeepStatusNominations(input, tree, result)
		p.assignments = result.Assignments
		if ranked {
			t.rememberRanks(root, tree, result.Assignments)
		}
		p.domains = result.Domains
		nominated := planinput.Nominate(logger, t.handle, tree, result.Assignments, true)
		t.promise(p, nominated)
		p.nominated = identities(nominated)
		if stale := planinput.StaleStatusNominations(tree, result.Assignments); len(stale) > 0 {
			go t.correctStatusNominations(t.runCtx, stale)
		}
		t.reportChoices(logger, tree, result.Choices)
		logger.V(4).Info("Planned group", "group", root, "pods", len(result.Assignments), "domains", result.Domains)
	}
	t.mu.Lock()
	old := t.plans[root]
	t.plans[root] = p
	t.mu.Unlock()
	if old != nil {
		t.unnominate(old, p)
	}
	return p, nil
}

// drop forgets root's plan, e.g. when a planned node turned out not to fit.
func (t *Topology) drop(root groups.Key) {
	t.mu.Lock()
	old := t.plans[root]
	delete(t.plans, root)
	t.mu.Unlock()
	if old != nil {
		t.unnominate(old, nil)
	}
}

func (t *Topology) reportInfeasible(tree *groups.Tree, inf *placement.Infeasible) {
	var find func(*groups.Tree) *groups.Tree
	find = func(tr *groups.Tree) *groups.Tree {
		if tr.Key.String() == inf.Group {
			return tr
		}
		for _, ch := range tr.Children {
			if f := find(ch); f != nil {
				return f
			}
		}
		return nil
	}
	target := find(tree)
	if target == nil {
		target = tree
	}
	reason := v1alpha1.ReasonUnschedulable
	if inf.Invalid {
		// The group's own definition contradicts the nodes: no capacity
		// will help until one of them changes.
		reason = v1alpha1.ReasonInvalid
	}
	cond := groupstatus.Condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, reason, inf.Reason)
	t.status.Set(target.Key, cond)
	if target.Key != tree.Key {
		t.status.Set(tree.Key, cond)
	}
}

// reportChoices tells every group with preferred topology levels where
// the plan put it and, after a fallback, why, in a PreferredTopology
// condition. Groups without an object (scheduler-plugins', whose API has
// no conditions) have it in the scheduler's log only.
func (t *Topology) reportChoices(logger klog.Logger, tree *groups.Tree, choices map[string]placement.Choice) {
	if len(choices) == 0 {
		return
	}
	var walk func(*groups.Tree)
	walk = func(tr *groups.Tree) {
		if c, ok := choices[tr.Key.String()]; ok {
			logger.V(3).Info("Preferred topology", "group", tr.Key, "preferred", c.Preferred, "choice", c.Message)
			status, reason := metav1.ConditionTrue, v1alpha1.ReasonPreferred
			if !c.Preferred {
				status, reason = metav1.ConditionFalse, v1alpha1.ReasonFellBack
			}
			t.status.Set(tr.Key, groupstatus.Condition(v1alpha1.PodGroupPreferredTopology, status, reason, c.Message))
		}
		for _, ch := range tr.Children {
			walk(ch)
		}
	}
	walk(tree)
}

// memberRef is a member's identity: what withdrawing its nomination reads.
type memberRef struct {
	namespace, name string
	uid             types.UID
}

func (m memberRef) pod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: m.namespace, Name: m.name, UID: m.uid}}
}

// identities returns the identities of pods. A plan is kept until its
// group is deleted, long after its members bound: with the informer's
// objects it held every member's pending version beside the bound one,
// doubling the pods' share of the heap (16 MB at 8,000 members), and even
// an empty Pod struct takes about a kilobyte.
func identities(pods []*corev1.Pod) []memberRef {
	out := make([]memberRef, len(pods))
	for i, pod := range pods {
		out[i] = memberRef{namespace: pod.Namespace, name: pod.Name, uid: pod.UID}
	}
	return out
}
