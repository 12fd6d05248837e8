package topology

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"

	"github.com/phalanx-sched/phalanx/pkg/plugins/planinput"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// Nominations: a plan nominates each member's planned node so other pods
// leave the room alone. This file keeps those nominations in step with the
// plans: withdrawing the ones a replacement plan does not repeat, promising
// the nodes of members the queue has not filed yet, and correcting a stale
// nominatedNodeName in a member's status.

// unnominate drops nominations of an old plan that a new plan does not
// repeat.
func (t *Topology) unnominate(old, replacement *plan) {
	for _, m := range old.nominated {
		pod := m.pod()
		if replacement != nil {
			if _, still := replacement.assignments[planinput.PodKey(pod)]; still {
				continue
			}
		}
		t.handle.DeleteNominatedPodIfExists(pod)
		t.promises.Withdraw(pod.UID, pluginrt.PlanPromise)
	}
}

// promise records p's node for each member it nominated that the
// scheduling queue has not filed yet: filing it, the queue drops the
// nomination (it takes the one the pod's status carries), and the room
// would go to the next pod. The gang plugin nominates it again each cycle
// until the queue has filed it. A member keeping a node after a failed
// binding has its promise moved to where this plan puts it.
func (t *Topology) promise(p *plan, nominated []*corev1.Pod) {
	if t.promises == nil {
		return
	}
	for _, pod := range nominated {
		node := p.assignments[planinput.PodKey(pod)]
		if !t.groups.Queued(pod.UID) {
			t.promises.Promise(pod, node, pluginrt.PlanPromise)
		} else {
			t.promises.Move(pod.UID, node)
		}
	}
}

// correctStatusNominations makes the API's nominatedNodeName of members an
// earlier preemption nominated agree with their plan. The queue refiles a
// pod's nomination from its status on every update, so a stale one would
// come back at the member's next failed attempt and hold a node the plan
// gave a sibling, which then fails its Filter, and nothing requeues either.
func (t *Topology) correctStatusNominations(ctx context.Context, stale []planinput.StatusNomination) {
	if ctx == nil {
		ctx = context.Background()
	}
	logger := klog.FromContext(ctx)
	client := t.handle.ClientSet()
	for _, s := range stale {
		status := s.Pod.Status.DeepCopy()
		status.NominatedNodeName = s.Node
		if err := schedutil.PatchPodStatus(ctx, client, s.Pod.Name, s.Pod.Namespace, &s.Pod.Status, status); err != nil && !apierrors.IsNotFound(err) {
			logger.Error(err, "Could not correct a stale nominated node", "pod", klog.KObj(s.Pod), "node", s.Node)
		}
	}
}
