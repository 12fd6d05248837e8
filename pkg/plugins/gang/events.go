package gang

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// Custom resources the plugin reacts to; the scheduler watches them through
// its dynamic informer factory.
const (
	podGroupResource  fwk.EventResource = "podgroups.v1alpha1.scheduling.phalanx.dev"
	compositeResource fwk.EventResource = "compositepodgroups.v1alpha1.scheduling.phalanx.dev"
	priorityResource  fwk.EventResource = "priorityclasses.v1.scheduling.k8s.io"
)

// EventsToRegister lists what can make a held or rejected member
// schedulable, with hints that keep unrelated events from requeueing it.
func (pl *Gang) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	return []fwk.ClusterEventWithHint{
		// A sibling appears, or changes its labels: quorum may be reached.
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Add | fwk.UpdatePodLabel}, QueueingHintFn: pl.siblingChanged},
		// Capacity freed by a bound pod leaving.
		{Event: fwk.ClusterEvent{Resource: fwk.Pod, ActionType: fwk.Delete}, QueueingHintFn: boundPodDeleted},
		// Capacity added.
		{Event: fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add | fwk.UpdateNodeAllocatable | fwk.UpdateNodeLabel | fwk.UpdateNodeTaint}},
		// The group (or its parent, or its PriorityClass) appears or changes.
		{Event: fwk.ClusterEvent{Resource: podGroupResource, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: sameNamespace},
		{Event: fwk.ClusterEvent{Resource: compositeResource, ActionType: fwk.Add | fwk.Update}, QueueingHintFn: sameNamespace},
		{Event: fwk.ClusterEvent{Resource: priorityResource, ActionType: fwk.Add | fwk.Update}},
	}, nil
}

func (pl *Gang) siblingChanged(_ klog.Logger, pod *corev1.Pod, _, newObj interface{}) (fwk.QueueingHint, error) {
	other, ok := newObj.(*corev1.Pod)
	if !ok || other.Namespace != pod.Namespace {
		return fwk.QueueSkip, nil
	}
	a, grouped, err := groups.Attach(pod)
	if !grouped || err != nil {
		// The pod itself was malformed; any change of its own may fix it.
		return queueIf(other.UID == pod.UID), nil
	}
	b, grouped, err := groups.Attach(other)
	if !grouped || err != nil {
		return fwk.QueueSkip, nil
	}
	if a.Key == b.Key {
		return fwk.Queue, nil
	}
	ra, okA := pl.groups.RootOf(a.Key)
	rb, okB := pl.groups.RootOf(b.Key)
	return queueIf(okA && okB && ra == rb), nil
}

func boundPodDeleted(_ klog.Logger, _ *corev1.Pod, oldObj, _ interface{}) (fwk.QueueingHint, error) {
	if p, ok := oldObj.(*corev1.Pod); ok && p.Spec.NodeName == "" {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// sameNamespace queues for group objects added or changed in the pod's
// namespace. A status-only update (the generation did not move) is the
// scheduler's own condition write and can make nothing schedulable.
func sameNamespace(_ klog.Logger, pod *corev1.Pod, oldObj, newObj interface{}) (fwk.QueueingHint, error) {
	u, ok := newObj.(*unstructured.Unstructured)
	if !ok {
		return fwk.Queue, nil
	}
	if o, ok := oldObj.(*unstructured.Unstructured); ok && o.GetGeneration() == u.GetGeneration() && o.GetUID() == u.GetUID() {
		return fwk.QueueSkip, nil
	}
	return queueIf(u.GetNamespace() == pod.Namespace), nil
}

func queueIf(b bool) fwk.QueueingHint {
	if b {
		return fwk.Queue
	}
	return fwk.QueueSkip
}

// summarize counts the filter reasons across nodes, most frequent first,
// e.g. "0/4 nodes fit: 4 Insufficient nvidia.com/gpu". planner is true when
// the group planner rejected the member on every node: it has already
// written a better explanation on the group.
func (pl *Gang) summarize(statuses fwk.NodeToStatusReader) (msg string, planner bool) {
	nodes, err := pl.handle.SnapshotSharedLister().NodeInfos().List()
	if err != nil {
		return "node list unavailable", false
	}
	counts := map[string]int{}
	planner = len(nodes) > 0
	for _, n := range nodes {
		st := statuses.Get(n.Node().Name)
		if st == nil || st.IsSuccess() {
			planner = false
			continue
		}
		planner = planner && st.Plugin() == pluginrt.TopologyName
		for _, r := range st.Reasons() {
			counts[r]++
		}
	}
	reasons := make([]string, 0, len(counts))
	for r := range counts {
		reasons = append(reasons, r)
	}
	sort.Slice(reasons, func(i, j int) bool {
		if counts[reasons[i]] != counts[reasons[j]] {
			return counts[reasons[i]] > counts[reasons[j]]
		}
		return reasons[i] < reasons[j]
	})
	parts := make([]string, 0, len(reasons))
	for i, r := range reasons {
		if i == 3 {
			break
		}
		parts = append(parts, fmt.Sprintf("%d %s", counts[r], r))
	}
	return fmt.Sprintf("0/%d nodes fit: %s", len(nodes), strings.Join(parts, ", ")), planner
}
