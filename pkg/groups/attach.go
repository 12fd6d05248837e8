package groups

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// Attachment is what a pod says about its group.
type Attachment struct {
	Key Key
	// MinAvailable is the label pair's min-available for a LabelKind group.
	MinAvailable int
}

// Attach resolves a pod to its leaf group from, in order: the
// scheduling.phalanx.dev/pod-group label; the
// pod-group.scheduling.sigs.k8s.io/{name,min-available} label pair; and
// pod.spec.schedulingGroup.podGroupName. ok is false for a pod in no group.
// A malformed or contradictory attachment is an error that names the label
// or field, so the pod can be held with a reason instead of scheduled alone.
func Attach(pod *corev1.Pod) (a Attachment, ok bool, err error) {
	specName := ""
	if sg := pod.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		specName = *sg.PodGroupName
	}
	if name, has := pod.Labels[v1alpha1.PodGroupLabel]; has {
		if name == "" {
			return a, true, fmt.Errorf("label %s is empty: set it to the name of a PodGroup in namespace %s", v1alpha1.PodGroupLabel, pod.Namespace)
		}
		if specName != "" && specName != name {
			return a, true, fmt.Errorf("label %s=%q and spec.schedulingGroup.podGroupName=%q disagree: a pod belongs to one group", v1alpha1.PodGroupLabel, name, specName)
		}
		return Attachment{Key: Key{Kind: PodGroupKind, Namespace: pod.Namespace, Name: name}}, true, nil
	}
	if name, has := pod.Labels[v1alpha1.LightweightNameLabel]; has {
		if name == "" {
			return a, true, fmt.Errorf("label %s is empty: set it to the gang's name", v1alpha1.LightweightNameLabel)
		}
		raw, hasMin := pod.Labels[v1alpha1.LightweightMinAvailableLabel]
		if !hasMin {
			return a, true, fmt.Errorf("label %s is set but %s is missing: add it with the gang size", v1alpha1.LightweightNameLabel, v1alpha1.LightweightMinAvailableLabel)
		}
		n, convErr := strconv.Atoi(raw)
		if convErr != nil || n < 1 {
			return a, true, fmt.Errorf("label %s=%q is invalid: it must be a positive integer", v1alpha1.LightweightMinAvailableLabel, raw)
		}
		if specName != "" {
			// Even with equal names these are two groups: a label gang has
			// no PodGroup object for the field to name.
			return a, true, fmt.Errorf("label %s=%q forms a label gang and spec.schedulingGroup.podGroupName=%q names a PodGroup: a pod belongs to one group, remove the label pair or the field", v1alpha1.LightweightNameLabel, name, specName)
		}
		return Attachment{Key: Key{Kind: LabelKind, Namespace: pod.Namespace, Name: name}, MinAvailable: n}, true, nil
	}
	if specName != "" {
		return Attachment{Key: Key{Kind: PodGroupKind, Namespace: pod.Namespace, Name: specName}}, true, nil
	}
	return a, false, nil
}
