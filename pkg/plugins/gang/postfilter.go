package gang

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fwk "k8s.io/kube-scheduler/framework"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// PostFilter runs when a member fits nowhere: it releases the waiting
// siblings and explains the failure on the group, unless the group's plan
// left the member out (pluginrt.Surplus). For gangs it stops any
// later pod-level preemption (DefaultPreemption, in a profile that keeps
// it) from evicting victims for one member of a gang that cannot be placed
// as a whole.
func (pl *Gang) PostFilter(ctx context.Context, state fwk.CycleState, pod *corev1.Pod, statuses fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	v := pl.groups.ViewFor(state, pod)
	if !v.Grouped {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	if v.Err != nil {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, v.Err.Error())
	}
	ch, gang := v.Chain, v.Gang
	if gang && pluginrt.Surplus(state) {
		// The plan reaches the gang's minimum without this member: the
		// siblings waiting in Permit are the ones planned, and releasing
		// them would only make the gang start over. The member waits for
		// room (PhalanxPreemption, before this plugin, may make some).
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("the gang's plan reaches its minimum without member %s, which waits for room while the planned members go ahead", pod.Name))
	}
	pl.rejectWaiting(ctx, state, pod, fmt.Sprintf("member %s/%s fits on no node; the gang retries as a unit", pod.Namespace, pod.Name))
	if refusedInPreFilter(statuses, pl.handle) {
		// This plugin's PreFilter refused the member (an invalid or
		// incomplete group, one larger than the cluster, minResources
		// that do not fit) and already said why on the group.
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable)
	}
	if !gang {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	r := pl.read(pod, v, false)
	if pl.validate(pod, v, r) != "" {
		// PreFilter rejected the group and already said why.
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable)
	}
	if r.Err != nil || !r.Quorum {
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable)
	}
	if pl.tooLarge(r) != "" {
		// PreFilter rejected the gang for its size and already said why.
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable)
	}
	// The counts in the message are the cache's now, not the view's.
	leaf := r.Leaf
	if !r.LeafOK {
		leaf = ch.Leaf()
	}
	summary, byPlanner := pl.summarize(statuses)
	msg := fmt.Sprintf("member %s fits on no node (%s); %d/%d members placed", pod.Name, summary, leaf.Placed, leaf.MinCount)
	if wait, ok := pluginrt.Protected(state); ok {
		// PhalanxPreemption knows when the gang may preempt: say so.
		msg += "; " + wait
	}
	if !byPlanner {
		pl.shared.status.Set(leaf.Key, condition(v1alpha1.PodGroupSchedulable, metav1.ConditionFalse, v1alpha1.ReasonUnschedulable, msg))
	}
	// PhalanxPreemption ran before and found nothing to wait for or evict
	// for this member, and this verdict ends the PostFilters: the member
	// gives up any node an earlier preemption nominated it to, as upstream's
	// preemption does for a pod. With no result, the queue would refile the
	// nomination from the member's status at every attempt and hold the
	// node's room against every pod of lower priority for good.
	return &fwk.PostFilterResult{NominatingInfo: &fwk.NominatingInfo{NominatingMode: fwk.ModeOverride}}, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, msg)
}

// refusedInPreFilter reports whether this plugin's PreFilter refused the
// pod: the framework then marks every node with its status.
func refusedInPreFilter(statuses fwk.NodeToStatusReader, h fwk.Handle) bool {
	nodes, err := h.SnapshotSharedLister().NodeInfos().List()
	if err != nil || len(nodes) == 0 {
		return false
	}
	st := statuses.Get(nodes[0].Node().Name)
	return st != nil && st.Plugin() == Name
}
