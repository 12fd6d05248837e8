package topology

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/names"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/groupstatus"
	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
	"github.com/phalanx-sched/phalanx/pkg/plugins/probe"
)

// rejection is a planned node the profile's Filter refused a member of a
// shape on.
type rejection struct {
	planinput.Rejection
	at time.Time
	// seen is the node as the refusing filter saw it. It is shared by
	// the copies the map hands out, so a check can move it on.
	seen *nodeSeen
}

// rejectionTTL bounds how long a refusal lasts on a node that did not
// change: its cause may lie off the node (a pod elsewhere in the domain
// of a zone-wide term or a spread, a volume, a claim, a namespace's
// labels), where nothing on the node shows it leaving.
const rejectionTTL = 2 * time.Minute

// nodeSeen is what of a node a refusal may have come from. A refusal lasts
// while none of it changes: planning onto the node again would only repeat
// it. The NodeInfo generation alone would say the same, but it moves with
// every pod bound to the node and every status update of a pod or the
// node, and each move would cost the group one more refused member.
type nodeSeen struct {
	// generation is the NodeInfo's: while it stands, nothing changed.
	generation int64
	node       *corev1.Node
	// pods are the pods on the node, by UID, but for counted.
	pods map[types.UID]*corev1.Pod
	// counted are the members of the refused pod's shape the node held,
	// which the refusal's cap counts: the cap holds whether they stay or
	// go, so their coming and going is no change.
	counted sets.Set[types.UID]
	// anyChange says the refusing filter may accept the pod after any
	// change of the node or its pods, a pod joining it included.
	anyChange bool
}

// joinsCannotLift are the in-tree filters whose refusal of a pod on a node
// no pod joining that node can lift: they count what the pods there take
// (ports, volumes, attachments, devices, a spread's skew) or read the node
// alone. InterPodAffinity (and PhalanxInterPodAffinity, the same filter)
// is not among them, as a pod joining can satisfy a required affinity; a
// filter Phalanx does not know may read anything.
var joinsCannotLift = sets.New(
	names.NodePorts, names.VolumeRestrictions, names.NodeVolumeLimits, names.DynamicResources,
	names.PodTopologySpread, names.NodeUnschedulable, names.NodeName, names.TaintToleration,
	names.NodeAffinity, names.VolumeBinding, names.VolumeZone, names.NodeDeclaredFeatures,
	pluginrt.DynamicResourcesName,
)

func seeNode(ni fwk.NodeInfo, plugin string, counted sets.Set[types.UID]) *nodeSeen {
	pods := ni.GetPods()
	s := &nodeSeen{
		generation: ni.GetGeneration(), node: ni.Node(), counted: counted,
		pods: make(map[types.UID]*corev1.Pod, len(pods)), anyChange: !joinsCannotLift.Has(plugin),
	}
	for _, pi := range pods {
		if p := pi.GetPod(); !counted.Has(p.UID) {
			s.pods[p.UID] = p
		}
	}
	return s
}

// holds reports whether the refusal would repeat on ni, the node as the
// next plan sees it (nil when it is gone): whether nothing the refusing
// filter could have refused for has changed there.
//
// For the filters in joinsCannotLift, the node's properties are compared
// as the scheduler compares them to decide whether a node update can make
// a pod schedulable, and a pod that stays on the node only by its labels:
// its ports, volumes, claims, affinity and namespace are fixed once it is
// bound, and its status is not theirs to read. A pod that joined cannot
// lift their refusal, one that left can. Any other filter sees any new
// object, of the node or of a pod, as a change.
func (s *nodeSeen) holds(ni fwk.NodeInfo) bool {
	if ni == nil || ni.Node() == nil {
		return false
	}
	if ni.GetGeneration() == s.generation {
		return true
	}
	if n := ni.Node(); n != s.node && (s.anyChange || len(framework.NodeSchedulingPropertiesChange(n, s.node)) > 0) {
		return false
	}
	stayed := 0
	for _, pi := range ni.GetPods() {
		p := pi.GetPod()
		if s.counted.Has(p.UID) {
			continue
		}
		was, ok := s.pods[p.UID]
		switch {
		case !ok && s.anyChange:
			return false
		case !ok:
			continue
		case s.anyChange && p != was, !maps.Equal(p.Labels, was.Labels):
			return false
		}
		stayed++
	}
	if stayed < len(s.pods) {
		return false
	}
	// Nothing that matters moved: the next check of the same generation
	// is the quick one.
	s.generation = ni.GetGeneration()
	return true
}

// constraints is the planner's view of what the profile's filters enforce
// for root's next plan.
func (t *Topology) constraints(ctx context.Context, root groups.Key, infos []fwk.NodeInfo) *planinput.Constraints {
	return t.constraintsFor(ctx, t.handle, t.prober, root, infos)
}

// constraintsFor is what root's next plan would be given against infos,
// with the profile's filters run through pr over h. The scheduling cycle
// passes its own handle; diagnostics, which must not touch the cycle's
// snapshot, pass a framework of the same profile over a snapshot of their
// own. The nodes earlier plans of root were refused on are this plugin's.
func (t *Topology) constraintsFor(ctx context.Context, h fwk.Handle, pr *probe.Prober, root groups.Key, infos []fwk.NodeInfo) *planinput.Constraints {
	c := planinput.ClusterConstraints(ctx, h, pr, infos)
	if c.DRA != nil && t.reservesForPodGroups != nil {
		c.DRA.PodGroupReservation = t.reservesForPodGroups()
	}
	c.Unknown = t.unknownFilters()
	c.AntiTerms = t.antiTerms
	c.Rejected = func(shape string) map[string]planinput.Rejection {
		t.mu.Lock()
		defer t.mu.Unlock()
		out := map[string]planinput.Rejection{}
		for node, r := range t.rejected[root][shape] {
			ni, err := h.SnapshotSharedLister().NodeInfos().Get(node)
			if err != nil {
				ni = nil
			}
			if time.Since(r.at) > rejectionTTL || !r.seen.holds(ni) {
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
	case names.DynamicResources, pluginrt.DynamicResourcesName:
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
	// The node as the Filter saw it: PostFilter runs in the same cycle,
	// over the same snapshot.
	ni, err := t.handle.SnapshotSharedLister().NodeInfos().Get(node)
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
	counted := sets.New[types.UID]()
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
		if onNode {
			counted.Insert(m.Pod.UID)
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
	t.rejected[root][key][node] = rejection{Rejection: planinput.Rejection{Cap: held, Reason: reason}, at: time.Now(), seen: seeNode(ni, plugin, counted)}
	t.mu.Unlock()
	planRejections.WithLabelValues(plugin).Inc()
	klog.FromContext(ctx).V(2).Info("Planned node refused a member", "group", root, "pod", klog.KObj(pod), "node", node, "plugin", plugin, "reasons", st.Reasons(), "held", held)
	msg := fmt.Sprintf("member %s was refused on its planned node %s by %s (%v); the next plan puts at most %d of the group's pods of its shape there", pod.Name, node, plugin, st.Reasons(), held)
	t.status.Set(tree.Key, groupstatus.Condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonUnschedulable, msg))
}
