package gang

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/pkg/gangcore"
	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// heldEventLater emits WaitingForGang on a member held in PreEnqueue if
// it is still held after gangcore.WaitingEventDelay. Members of a gang whose pods are
// being created arrive within milliseconds of each other; an event for each
// early member would be an API write per pod for nothing.
func (pl *Gang) heldEventLater(pod *corev1.Pod) {
	if !pl.shared.events.schedule(pod.UID) {
		return
	}
	time.AfterFunc(gangcore.WaitingEventDelay, func() {
		pl.shared.events.scheduled(pod.UID)
		ok, short, err := pl.groups.Quorum(pod, groups.ByExisting)
		if ok || err != nil {
			return
		}
		leaf, tracked := pl.groups.GroupOf(pod.UID)
		if !tracked {
			return // deleted meanwhile
		}
		msg := fmt.Sprintf("%s (%s)", gangcore.WaitingMessage(short), short.Key)
		if short.Key != leaf {
			// The member's own group is complete and waits for another
			// group of its hierarchy, whose object carries the condition.
			// Say so where kubectl get pods and tools watching pod
			// conditions look.
			pl.markPodWaiting(pod, msg)
		}
		// A 1,000-pod gang being created would otherwise get an event
		// per early member. A group object's own condition has the
		// current count, so one member per interval tells the story;
		// label gangs have no object, and each member gets its event.
		if short.Key.Kind != groups.LabelKind && !pl.shared.events.groupTurn(short.Key, heldEventInterval) {
			return
		}
		pl.podEvent(pod, "WaitingForGang", msg)
	})
}

// markPodWaiting writes PodScheduled=False (reason Unschedulable) with msg
// on a member held in PreEnqueue, once per message. The framework writes
// pod conditions only for pods it tried, and a held member is never tried.
func (pl *Gang) markPodWaiting(pod *corev1.Pod, msg string) {
	if !pl.shared.events.firstCondition(pod.UID, msg) {
		return
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{{
		Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		Message: msg, LastTransitionTime: metav1.Now(),
	}}}})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pl.handle.ClientSet().CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		klog.V(3).InfoS("Could not mark a held gang member as waiting", "pod", klog.KObj(pod), "err", err)
	}
}

// heldEventInterval spaces the WaitingForGang events of one held group.
const heldEventInterval = 10 * time.Second

// eventIfStillWaiting emits WaitingForGang on pod if it still waits in
// Permit after gangcore.WaitingEventDelay (a tenth of the Permit timeout if that is
// shorter), with the shortfall at that moment. own is the wait the pod's
// groups ask for (scheduleTimeoutSeconds), 0 for the profile's.
func (pl *Gang) eventIfStillWaiting(pod *corev1.Pod, own time.Duration) {
	delay, bounds := gangcore.WaitingEvent(pl.args.permitTimeout(), pl.args.permitLimit(), own)
	time.AfterFunc(delay, func() {
		if pl.handle.GetWaitingPod(pod.UID) == nil {
			return
		}
		ok, short, err := pl.groups.Quorum(pod, groups.ByPlaced)
		if ok || err != nil {
			return
		}
		pl.podEvent(pod, "WaitingForGang", fmt.Sprintf("reserved a node; waiting in Permit for the gang while its members keep arriving (%s): %s", bounds, gangcore.WaitingMessage(short)))
	})
}

type eventDedup struct {
	mu   sync.Mutex
	last map[types.UID]string
	// conds is last for the PodScheduled conditions of held members.
	conds map[types.UID]string
	// pending holds pods with a delayed event scheduled, so a member that
	// PreEnqueue sees many times gets one timer.
	pending map[types.UID]bool
	// groupLast is when a group last had a held-member event.
	groupLast map[groups.Key]time.Time
}

// groupTurn reports whether group k may have another event now, at most
// one per interval, and records it.
func (d *eventDedup) groupTurn(k groups.Key, interval time.Duration) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	if last, ok := d.groupLast[k]; ok && now.Sub(last) < interval {
		return false
	}
	d.groupLast[k] = now // until the group is gone (forgetGroup)
	return true
}

func (d *eventDedup) forgetGroup(k groups.Key) {
	d.mu.Lock()
	delete(d.groupLast, k)
	d.mu.Unlock()
}

func newEventDedup() *eventDedup {
	return &eventDedup{last: map[types.UID]string{}, conds: map[types.UID]string{}, pending: map[types.UID]bool{}, groupLast: map[groups.Key]time.Time{}}
}

// firstCondition is first for the pod conditions markPodWaiting writes.
func (d *eventDedup) firstCondition(uid types.UID, msg string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conds[uid] == msg {
		return false
	}
	if len(d.conds) > 100000 {
		d.conds = map[types.UID]string{}
	}
	d.conds[uid] = msg
	return true
}

// schedule reports whether a delayed event may be scheduled for uid now.
func (d *eventDedup) schedule(uid types.UID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pending[uid] {
		return false
	}
	d.pending[uid] = true
	return true
}

// scheduled clears uid's pending delayed event.
func (d *eventDedup) scheduled(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.pending, uid)
}

func (d *eventDedup) first(uid types.UID, msg string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last[uid] == msg {
		return false
	}
	// Bounded memory: forgetting old pods only risks a repeated event.
	if len(d.last) > 100000 {
		d.last = map[types.UID]string{}
	}
	d.last[uid] = msg
	return true
}
