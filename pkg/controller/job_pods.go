package controller

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// syncPod attaches one pod of a gang Job to the Job's PodGroup and releases
// it to the scheduler: it adds the pod-group label and removes the gang
// scheduling gate in a single patch, so the scheduler never sees the pod
// without its group. It does so only once the PodGroup exists and belongs
// to the Job (through the Job's Workload); until then the gate holds the
// pod back.
func (c *jobController) syncPod(ctx context.Context, key cache.ObjectName) error {
	obj, exists, err := c.pods.GetByKey(key.String())
	if err != nil || !exists {
		return err
	}
	pod := obj.(*corev1.Pod)
	if !podNeedsRelease(pod) {
		return nil
	}
	jobName, _ := jobOfPod(pod)
	job, err := c.jobs.Jobs(pod.Namespace).Get(jobName)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !metav1.IsControlledBy(pod, job) {
		// A pod of an earlier Job of the same name.
		return nil
	}
	gated := hasGate(pod)
	if on, _ := gangRequested(job); !on {
		if gated {
			c.warnOnce(job, EventGatedWithoutGang, fmt.Sprintf(
				"the Job's pods carry the scheduling gate %s, but the Job is not a gang Job, so nothing removes the gate and they stay pending: add the annotation %s: \"true\" or remove the gate from the pod template",
				GangSchedulingGate, v1alpha1.GangAnnotation))
		}
		return nil
	}

	want := JobPodGroupName(job.Name)
	label, labelled := pod.Labels[v1alpha1.PodGroupLabel]
	if labelled && label != want {
		// The Job's pod template names another group; syncJob reports that
		// on the Job. Releasing the pod would put it in the wrong gang.
		return nil
	}
	if !c.podGroupReady(job, want) {
		// The PodGroup's arrival enqueues the Job's pods again.
		return nil
	}

	patch := map[string]interface{}{
		// The uid makes the patch fail rather than touch a pod re-created
		// under the same name.
		"metadata": map[string]interface{}{"uid": pod.UID},
	}
	if !labelled {
		patch["metadata"].(map[string]interface{})["labels"] = map[string]string{v1alpha1.PodGroupLabel: want}
	}
	if gated {
		patch["spec"] = map[string]interface{}{
			"schedulingGates": []map[string]string{{"$patch": "delete", "name": GangSchedulingGate}},
		}
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = c.kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, data,
		metav1.PatchOptions{FieldManager: v1alpha1.ControllerName})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("attach pod %s/%s to PodGroup %s: %w", pod.Namespace, pod.Name, want, err)
	}
	klog.FromContext(ctx).V(4).Info("Attached pod to its Job's PodGroup", "pod", klog.KObj(pod), "podGroup", want, "ungated", gated)
	return nil
}

// podGroupReady reports whether the Job's PodGroup exists and is the one
// made for this Job: controlled by a Workload that the Job controls.
func (c *jobController) podGroupReady(job metav1.Object, name string) bool {
	pg, err := c.podGroups.PodGroups(job.GetNamespace()).Get(name)
	if err != nil {
		return false
	}
	w, err := c.workloads.Workloads(job.GetNamespace()).Get(job.GetName())
	if err != nil {
		return false
	}
	return metav1.IsControlledBy(w, job) && metav1.IsControlledBy(pg, w)
}
