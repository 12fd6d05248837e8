package controller

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/phalanx-sched/phalanx/apis/scheduling/v1alpha1"
	"github.com/phalanx-sched/phalanx/pkg/workloadbuilder"
)

// The Job integration's user interface, besides v1alpha1.GangAnnotation.
const (
	// MinCountAnnotation overrides the gang's minCount (a positive integer).
	// Without it minCount follows the Job's parallelism (capped by what
	// remains to run, see jobPodsStillToRun).
	MinCountAnnotation = "scheduling.phalanx.dev/min-count"
	// TopologyKeyAnnotation asks for every pod of the gang on nodes sharing
	// one value of this node label, e.g. topology.kubernetes.io/zone.
	TopologyKeyAnnotation = "scheduling.phalanx.dev/topology-key"
	// PreferredTopologyAnnotation lists preferred topology levels below the
	// topology key, narrowest first, comma-separated, e.g.
	// "topology.phalanx.dev/rack,topology.phalanx.dev/block": the gang's
	// PodGroup gets them as schedulingConstraints.preferredTopology.
	PreferredTopologyAnnotation = v1alpha1.PreferredTopologyAnnotation
	// GangSchedulingGate belongs in a gang Job's pod template. It keeps each
	// pod away from the scheduler until the controller has attached it to
	// the PodGroup; the controller removes it in the same write.
	GangSchedulingGate = "scheduling.phalanx.dev/gang"
)

// Workload condition types. Each has exactly one writer.
const (
	// ConditionGroupsCreated is written by the Workload controller: True once
	// every group of the Workload exists, False with the reason otherwise.
	ConditionGroupsCreated = "GroupsCreated"
	// ConditionJobConfigValid is written by the Job integration on the
	// Workload of a gang Job: False when the Job's annotations (or pod
	// template) are invalid, naming the field paths.
	ConditionJobConfigValid = "JobConfigValid"
)

// Condition reasons, beyond those of the v1alpha1 package.
const (
	ReasonCreated  = "Created"
	ReasonConflict = "Conflict"
	ReasonValid    = "Valid"
)

var jobKind = schema.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}

// JobPodGroupName is the PodGroup a gang Job's pods join: the Workload is
// named after the Job and has one template, v1alpha1.JobTemplateName. A controller
// that puts the pod-group label in the Job's template itself uses this name.
func JobPodGroupName(jobName string) string {
	return workloadbuilder.GroupName(jobName, v1alpha1.JobTemplateName)
}

// Pod indexes shared by the Job integration and the status controller.
const (
	podsByJobIndex      = "phalanx.dev/job"
	podsByPodGroupIndex = "phalanx.dev/pod-group"
)

// jobOfPod returns the name of the Job that controls pod, if any.
func jobOfPod(pod *corev1.Pod) (string, bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != jobKind.Kind {
		return "", false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != jobKind.Group {
		return "", false
	}
	return ref.Name, true
}

// podGroupOfPod returns the Phalanx PodGroup a pod is attached to, "" for
// none. spec.schedulingGroup names an upstream scheduling.k8s.io PodGroup,
// a different group even with the same name.
func podGroupOfPod(pod *corev1.Pod) string {
	return pod.Labels[v1alpha1.PodGroupLabel]
}

func indexPodsByJob(obj interface{}) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if job, ok := jobOfPod(pod); ok {
		return []string{cache.ObjectName{Namespace: pod.Namespace, Name: job}.String()}, nil
	}
	return nil, nil
}

func indexPodsByPodGroup(obj interface{}) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if pg := podGroupOfPod(pod); pg != "" {
		return []string{cache.ObjectName{Namespace: pod.Namespace, Name: pg}.String()}, nil
	}
	return nil, nil
}

// podFromObj unwraps informer delete tombstones.
func podFromObj(obj interface{}) *corev1.Pod {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	pod, _ := obj.(*corev1.Pod)
	return pod
}

// hasGate reports whether pod still carries the gang scheduling gate.
func hasGate(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name == GangSchedulingGate {
			return true
		}
	}
	return false
}
