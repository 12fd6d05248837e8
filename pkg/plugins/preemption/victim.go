package preemption

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	upstream "k8s.io/kubernetes/pkg/scheduler/framework/preemption"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
)

// Evicting one victim, for both paths.
//
// A victim is chosen from the scheduler's snapshot, and evicted some time
// later. Upstream's PreemptPod names it by namespace and name alone, so a
// pod created under the same name in between (a StatefulSet replacing its
// member, which is just what an eviction elsewhere makes it do) would be
// marked DisruptionTarget and deleted in the victim's place. Phalanx
// replaces the Executor's PreemptPod, which every eviction of both paths
// goes through, with one that touches the victim only by its UID: the
// status patch carries metadata.uid, which the API server refuses to change,
// and the delete carries a UID precondition. A victim that is gone, or
// replaced, is counted as evicted: what the preemptor needed was its room.

// guardEvictions makes exec evict by UID.
func guardEvictions(h fwk.Handle, exec *upstream.Executor) {
	exec.PreemptPod = func(ctx context.Context, c upstream.Candidate, by upstream.ExecutorPreemptor, victim *corev1.Pod, plugin string) (bool, error) {
		return preemptVictim(ctx, h, c.Name(), by, victim, plugin)
	}
}

// preemptVictim evicts victim for by, on node. A victim the scheduler still
// holds (waiting in Permit, or in PreBind) is sent back to the queue in
// memory, and inMemory is true; any other is marked DisruptionTarget, then
// deleted, and is not deleted when the mark cannot be written (a Job would
// count an unmarked eviction as its own failure).
func preemptVictim(ctx context.Context, h fwk.Handle, node string, by upstream.ExecutorPreemptor, victim *corev1.Pod, plugin string) (inMemory bool, err error) {
	logger := klog.FromContext(ctx)
	event := fmt.Sprintf("Preempted by %s %s on node %s", by.Type(), by.UID(), node)
	if rejectedInMemory(h, victim, plugin) {
		logger.V(2).Info("Preempted a victim the scheduler had not yet bound", "preemptor", klog.KObj(by), "preemptorType", by.Type(), "victim", klog.KObj(victim), "node", node)
		h.EventRecorder().WithLogger(logger).Eventf(victim, by.Obj(), corev1.EventTypeNormal, "Preempted", "Preempting", event+" (in kube-scheduler memory).")
		return true, nil
	}

	cs := h.ClientSet()
	if err := markDisruptionTarget(ctx, cs, victim, by); err != nil {
		if apierrors.IsNotFound(err) || uidRefused(err) {
			logVictimGone(logger, by, victim, node, err)
			return false, nil
		}
		logger.Error(err, "Could not mark the victim DisruptionTarget; it is not deleted", "preemptor", klog.KObj(by), "victim", klog.KObj(victim))
		return false, fmt.Errorf("mark victim %s DisruptionTarget: %w", klog.KObj(victim), err)
	}
	uid := victim.UID
	err = cs.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil {
		// With a UID precondition, Conflict means the pod of that name is
		// another one.
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			logVictimGone(logger, by, victim, node, err)
			return false, nil
		}
		logger.Error(err, "Could not delete the victim", "preemptor", klog.KObj(by), "victim", klog.KObj(victim))
		return false, fmt.Errorf("delete victim %s: %w", klog.KObj(victim), err)
	}
	logger.V(2).Info("Preempted a victim", "preemptor", klog.KObj(by), "preemptorType", by.Type(), "victim", klog.KObj(victim), "node", node)
	h.EventRecorder().WithLogger(logger).Eventf(victim, by.Obj(), corev1.EventTypeNormal, "Preempted", "Preempting", event)
	return false, nil
}

// rejectedInMemory sends victim back to the queue if the scheduler still
// holds it, waiting in Permit or in PreBind. A pod in PreBind whose binding
// can no longer be cancelled has reached the API server, and is deleted
// like any other.
func rejectedInMemory(h fwk.Handle, victim *corev1.Pod, plugin string) bool {
	if w := h.GetWaitingPod(victim.UID); w != nil {
		return w.Preempt(plugin, "preempted")
	}
	if b := h.GetPodInPreBind(victim.UID); b != nil {
		return b.CancelPod("preempted by " + plugin)
	}
	return false
}

// markDisruptionTarget adds the DisruptionTarget condition to victim's
// status unless it is already there. The patch names the victim's UID, so
// it fails, as Invalid, on a pod recreated under the victim's name.
func markDisruptionTarget(ctx context.Context, cs kubernetes.Interface, victim *corev1.Pod, by upstream.ExecutorPreemptor) error {
	cond := corev1.PodCondition{
		Type:               corev1.DisruptionTarget,
		Status:             corev1.ConditionTrue,
		ObservedGeneration: podutil.CalculatePodConditionObservedGeneration(&victim.Status, victim.Generation, corev1.DisruptionTarget),
		Reason:             corev1.PodReasonPreemptionByScheduler,
		Message:            fmt.Sprintf("%s: preempted to make room for a higher priority %s", by.SchedulerName(), by.Type()),
		LastTransitionTime: metav1.Now(),
	}
	if _, old := podutil.GetPodCondition(&victim.Status, corev1.DisruptionTarget); old != nil {
		if old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message && old.ObservedGeneration == cond.ObservedGeneration {
			return nil
		}
		if old.Status == cond.Status {
			cond.LastTransitionTime = old.LastTransitionTime
		}
	}
	type meta struct {
		UID types.UID `json:"uid"`
	}
	type status struct {
		Conditions []corev1.PodCondition `json:"conditions"`
	}
	patch, err := json.Marshal(struct {
		Metadata meta   `json:"metadata"`
		Status   status `json:"status"`
	}{meta{victim.UID}, status{[]corev1.PodCondition{cond}}})
	if err != nil {
		return err
	}
	return retry.OnError(retry.DefaultBackoff, schedutil.RetriableWithConflict, func() error {
		_, err := cs.CoreV1().Pods(victim.Namespace).Patch(ctx, victim.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		return err
	})
}

// uidRefused says whether err is the API server refusing a patch for the
// UID it names: the pod of that name is another one.
func uidRefused(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

func logVictimGone(logger klog.Logger, by upstream.ExecutorPreemptor, victim *corev1.Pod, node string, err error) {
	logger.V(2).Info("Victim already gone; a pod of the same name, if any, is another pod and is left alone",
		"preemptor", klog.KObj(by), "victim", klog.KObj(victim), "uid", victim.UID, "node", node, "err", err)
}
