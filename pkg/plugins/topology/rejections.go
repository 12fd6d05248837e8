package topology

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// constraints is the planner's view of what the profile's filters enforce
// for root's next plan.
func (t *Topology) constraints(ctx context.Context, root groups.Key, infos []fwk.NodeInfo) *Constraints {
	return t.ConstraintsFor(ctx, t.handle, t.prober, root, infos)
}

// ConstraintsFor is what root's next plan would be given against infos,
// with the profile's filters run through pr over h. The scheduling cycle
// passes its own handle; diagnostics, which must not touch the cycle's
// snapshot, pass a framework of the same profile over a snapshot of their
// own. The nodes earlier plans of root were refused on are this plugin's.
func (t *Topology) ConstraintsFor(ctx context.Context, h fwk.Handle, pr *probe.Prober, root groups.Key, infos []fwk.NodeInfo) *Constraints {
	c := ClusterConstraints(ctx, h, pr, infos)
	c.ProbeAll = t.probeAll()
	c.AntiTerms = t.antiTerms
	c.Rejected = func(shape string) map[string]Rejection {
		t.mu.Lock()
		defer t.mu.Unlock()
		out := map[string]Rejection{}
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
	}
	tree, err := t.groups.TreeOf(root)
	if err != nil {
		return
	}
	infos, err := t.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return
	}
	// The shape key is the one the next plan computes for the pod.
	pt := &planTerms{byPod: map[*corev1.Pod]podTerms{}, ports: map[string]bool{}, existing: existingAntiAffinity(infos, t.antiTerms)}
	var members []groups.Member
	var walk func(*groups.Tree)
	walk = func(tr *groups.Tree) {
		for _, m := range tr.Members {
			members = append(members, m)
			if m.State == groups.Pending {
				pt.add(m.Pod)
			}
		}
		for _, ch := range tr.Children {
			walk(ch)
		}
	}
	walk(tree)
	if _, ok := pt.byPod[pod]; !ok {
		pt.add(pod)
	}
	c := t.constraints(ctx, root, infos)
	key := shapeKey(pod) + "#" + pt.signature(c, pod)
	held := 0
	base := shapeKey(pod)
	// The Filter judged the pod with its siblings already on the node and
	// those nominated there by the plan (the framework adds nominated pods
	// of equal priority), so the node holds at most that many of the shape.
	for _, m := range members {
		if m.Pod.UID == pod.UID || shapeKey(m.Pod) != base {
			continue
		}
		onNode := (m.State == groups.Assumed || m.State == groups.Bound) && m.Node == node
		nominated := m.State == groups.Pending && planned[PodKey(m.Pod)] == node
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
	t.rejected[root][key][node] = rejection{Rejection: Rejection{Cap: held, Reason: reason}, at: time.Now()}
	t.mu.Unlock()
	planRejections.WithLabelValues(plugin).Inc()
	klog.FromContext(ctx).V(2).Info("Planned node refused a member", "group", root, "pod", klog.KObj(pod), "node", node, "plugin", plugin, "reasons", st.Reasons(), "held", held)
	msg := fmt.Sprintf("member %s was refused on its planned node %s by %s (%v); the next plan puts at most %d of the group's pods of its shape there", pod.Name, node, plugin, st.Reasons(), held)
	t.status.Set(tree.Key, groupstatus.Condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonUnschedulable, msg))
}

// modelled are the Filter plugins whose verdicts the planner computes
// itself or takes from a probe of the pod shapes that need one. Any other
// Filter plugin in the profile could refuse any pod, so every shape is
// probed then.
var modelled = map[string]bool{
	names.NodeUnschedulable: true, names.NodeName: true, names.TaintToleration: true,
	names.NodeAffinity: true, names.NodePorts: true, names.NodeResourcesFit: true,
	names.VolumeRestrictions: true, names.NodeVolumeLimits: true, names.VolumeBinding: true,
	names.VolumeZone: true, names.PodTopologySpread: true, names.InterPodAffinity: true,
	names.DynamicResources: true, Name: true,
}

// unknownFilters reports whether the profile behind h runs a Filter plugin
// outside modelled.
func unknownFilters(h fwk.Handle) bool {
	lister, ok := h.(interface{ ListPlugins() *config.Plugins })
	if !ok {
		return true
	}
	ps := lister.ListPlugins()
	if ps == nil {
		return false
	}
	for _, p := range ps.Filter.Enabled {
		if !modelled[p.Name] {
			return true
		}
	}
	return false
}
