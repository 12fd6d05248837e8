package groups

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	xv1alpha1 "sigs.k8s.io/scheduler-plugins/apis/scheduling/v1alpha1"

	v1alpha1 "github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
)

// Attachment is what a pod says about its group.
type Attachment struct {
	Key Key
	// MinAvailable is the label pair's min-available for a LabelKind group.
	MinAvailable int
}

// Attach resolves a pod to its leaf group. Each dialect has its own way to
// name a group:
//   - scheduling.phalanx.dev/pod-group label: a Phalanx PodGroup;
//   - the pod-group.scheduling.sigs.k8s.io/{name,min-available} label pair:
//     a label gang (Phalanx dialect, no object; the PodGroup label wins when
//     a pod has both, as it always has);
//   - scheduling.x-k8s.io/pod-group label: a scheduler-plugins PodGroup;
//   - pod.spec.schedulingGroup.podGroupName: an upstream scheduling.k8s.io
//     PodGroup.
//
// ok is false for a pod in no group. A malformed attachment, or one that
// names groups in two dialects, is an error that names the label or field,
// so the pod is held with a reason instead of scheduled alone or silently
// put in one of the two groups.
func Attach(pod *corev1.Pod) (a Attachment, ok bool, err error) {
	var found []attachSource
	if name, has := pod.Labels[v1alpha1.PodGroupLabel]; has {
		if name == "" {
			return a, true, fmt.Errorf("label %s is empty: set it to the name of a PodGroup in namespace %s", v1alpha1.PodGroupLabel, pod.Namespace)
		}
		found = append(found, attachSource{"label " + v1alpha1.PodGroupLabel, name, Attachment{Key: Key{Kind: PodGroupKind, Namespace: pod.Namespace, Name: name}}})
	} else if name, has := pod.Labels[v1alpha1.LightweightNameLabel]; has {
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
		found = append(found, attachSource{"label " + v1alpha1.LightweightNameLabel, name, Attachment{Key: Key{Kind: LabelKind, Namespace: pod.Namespace, Name: name}, MinAvailable: n}})
	}
	if name, has := pod.Labels[xv1alpha1.PodGroupLabel]; has {
		if name == "" {
			return a, true, fmt.Errorf("label %s is empty: set it to the name of a scheduling.x-k8s.io PodGroup in namespace %s", xv1alpha1.PodGroupLabel, pod.Namespace)
		}
		found = append(found, attachSource{"label " + xv1alpha1.PodGroupLabel, name, Attachment{Key: Key{Dialect: Coscheduling, Kind: PodGroupKind, Namespace: pod.Namespace, Name: name}}})
	}
	if sg := pod.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		// The API server refuses an empty name; an object built elsewhere
		// (a test, a fake client) with one names no group.
		if name := *sg.PodGroupName; name != "" {
			found = append(found, attachSource{"spec.schedulingGroup.podGroupName", name, Attachment{Key: Key{Dialect: Native, Kind: PodGroupKind, Namespace: pod.Namespace, Name: name}}})
		}
	}
	switch len(found) {
	case 0:
		return a, false, nil
	case 1:
		return found[0].a, true, nil
	}
	x, y := found[0], found[1]
	return a, true, fmt.Errorf("%s=%q names a %s and %s=%q a %s: a pod belongs to one group in one API, remove one of them",
		x.where, x.name, x.a.Key.kindName(), y.where, y.name, y.a.Key.kindName())
}

// attachSource is one way a pod names a group.
type attachSource struct {
	where, name string
	a           Attachment
}
