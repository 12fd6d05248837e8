package topology

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// constraints is the planner's view of what the profile's filters enforce
// for root's next plan.
func (t *Topology) constraints(ctx context.Context, root groups.Key, infos []fwk.NodeInfo) *planinput.Constraints {
	return t.ConstraintsFor(ctx, t.handle, t.prober, root, infos)
}

// ConstraintsFor is what root's next plan would be given against infos,
// with the profile's filters run through pr over h. The scheduling cycle
// passes its own handle; diagnostics, which must not touch the cycle's
// snapshot, pass a framework of the same profile over a snapshot of their
// own. The nodes earlier plans of root were refused on are this plugin's.
func (t *Topology) ConstraintsFor(ctx context.Context, h fwk.Handle, pr *probe.Prober, root groups.Key, infos []fwk.NodeInfo) *planinput.Constraints {
	c := planinput.ClusterConstraints(ctx, h, pr, infos)
	c.Unknown = t.unknownFilters()
	c.AntiTerms = t.antiTerms
	c.Rejected = func(shape string) map[string]planinput.Rejection {
		t.mu.Lock()
		defer t.mu.Unlock()
		out := map[string]planinput.Rejection{}
		for node, r := range t.rejected[root][shape] {
			if time.Since(r.at) > rejectionTTL {
				delete(t.rejected[root][shape], node)
				continue
			}
			out[node] = r.Rejection
		}
		return out
	}
	return c
}

// recordRejection remembers that the profile's Filter refused pod on node,
// its planned node, with how many members of its shape the node held then.
// Rejections for lack of room are not remembered: the next plan sees the
// room as it is. Neither are Phalanx's own.
func (t *Topology) recordRejection(ctx context.Context, root groups.Key, pod *corev1.Pod, node string, planned map[string]string, st *fwk.Status) {
	if st == nil || st.IsSuccess() {
		return
	}
	plugin := st.Plugin()
	switch plugin {
	case "", Name, names.NodeResourcesFit:
		return
	case names.DynamicResources:
		// A claim another pod is allocating refuses every node until
		// its PreBind; the node is not to blame.
		if strings.Contains(strings.Join(st.Reasons(), " "), "in the process of being allocated") {
			return
		}
	}
	tree, err := t.groups.TreeOf(root)
	if err != nil {
		return
	}
	infos, err := t.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return
	}
	var members []groups.Member
	var walk func(*groups.Tree)
	walk = func(tr *groups.Tree) {
		members = append(members, tr.Members...)
		for _, ch := range tr.Children {
			walk(ch)
		}
	}
	walk(tree)
	key, base := planinput.ShapeKeys(tree, pod, t.constraints(ctx, root, infos))
	held := 0
	// The Filter judged the pod with its siblings already on the node and
	// those nominated there (the framework adds nominated pods of equal
	// priority): by the plan, or still by a preemption the plan has not
	// overridden yet. So the node holds at most that many of the shape.
	nominatedHere := map[types.UID]bool{}
	for _, pi := range t.handle.NominatedPodsForNode(node) {
		nominatedHere[pi.GetPod().UID] = true
	}
	for _, m := range members {
		if m.Pod.UID == pod.UID || planinput.ShapeKey(m.Pod) != base {
			continue
		}
		onNode := (m.State == groups.Assumed || m.State == groups.Bound) && m.Node == node
		nominated := m.State == groups.Pending && (planned[planinput.PodKey(m.Pod)] == node || nominatedHere[m.Pod.UID])
		if onNode || nominated {
			held++
		}
	}
	reason := fmt.Sprintf("%s: %v", plugin, st.Reasons())
	t.mu.Lock()
	if t.rejected[root] == nil {
		t.rejected[root] = map[string]map[string]rejection{}
	}
	if t.rejected[root][key] == nil {
		t.rejected[root][key] = map[string]rejection{}
	}
	t.rejected[root][key][node] = rejection{Rejection: planinput.Rejection{Cap: held, Reason: reason}, at: time.Now()}
	t.mu.Unlock()
	planRejections.WithLabelValues(plugin).Inc()
	klog.FromContext(ctx).V(2).Info("Planned node refused a member", "group", root, "pod", klog.KObj(pod), "node", node, "plugin", plugin, "reasons", st.Reasons(), "held", held)
	msg := fmt.Sprintf("member %s was refused on its planned node %s by %s (%v); the next plan puts at most %d of the group's pods of its shape there", pod.Name, node, plugin, st.Reasons(), held)
	t.status.Set(tree.Key, groupstatus.Condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonUnschedulable, msg))
}
