package groups

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
)

// EffectivePriority is the priority and preemption policy a pod under root
// schedules, waits and preempts with: the root's (ResolvePriority), or the
// pod's own when the root takes its priority from its members (label gangs,
// scheduler-plugins PodGroups). Every plugin resolves priority through it,
// so a member, its group and its preemptions never disagree.
func EffectivePriority(pod *corev1.Pod, root Info, classes PriorityClassLister) (int32, corev1.PreemptionPolicy, error) {
	if root.PriorityFromMembers {
		return PodPriority(pod), PodPolicy(pod), nil
	}
	return ResolvePriority(root, classes)
}

// PriorityClassLister is what resolving a priority reads of the cluster's
// PriorityClasses. client-go's lister satisfies it; a lister that also
// keeps the globalDefault class (GlobalDefault, as the informer-fed cache's
// does) spares a list of every class per resolution.
type PriorityClassLister interface {
	Get(name string) (*schedulingv1.PriorityClass, error)
	List(selector labels.Selector) ([]*schedulingv1.PriorityClass, error)
}

// globalDefaults is a PriorityClassLister that keeps the globalDefault
// class from informer events.
type globalDefaults interface {
	GlobalDefault() *schedulingv1.PriorityClass
}

// ResolvePriority returns the priority and preemption policy of a group
// hierarchy from its root: spec.priority if set; else the PriorityClass
// named by priorityClassName; else the globalDefault class; else 0. The
// preemption policy is the root's, else its class's, else
// PreemptLowerPriority. A class that does not exist is an error, not 0, so
// the user learns about the typo instead of running at the wrong priority.
// A nil classes knows no PriorityClass (a cache fed without informers).
func ResolvePriority(root Info, classes PriorityClassLister) (int32, corev1.PreemptionPolicy, error) {
	policy := corev1.PreemptLowerPriority
	var class *schedulingv1.PriorityClass
	switch {
	case classes == nil && root.PriorityClassName != "":
		return 0, policy, fmt.Errorf("PriorityClass %q of %s not found: create it or fix priorityClassName", root.PriorityClassName, root.Key)
	case classes == nil:
	case root.PriorityClassName != "":
		pc, err := classes.Get(root.PriorityClassName)
		if apierrors.IsNotFound(err) {
			return 0, policy, fmt.Errorf("PriorityClass %q of %s not found: create it or fix priorityClassName", root.PriorityClassName, root.Key)
		}
		if err != nil {
			return 0, policy, fmt.Errorf("look up PriorityClass %q of %s: %w", root.PriorityClassName, root.Key, err)
		}
		class = pc
	case root.Priority == nil:
		if d, ok := classes.(globalDefaults); ok {
			class = d.GlobalDefault()
			break
		}
		all, err := classes.List(labels.Everything())
		if err != nil {
			return 0, policy, fmt.Errorf("list PriorityClasses: %w", err)
		}
		for _, pc := range all {
			if pc.GlobalDefault && (class == nil || pc.CreationTimestamp.Before(&class.CreationTimestamp)) {
				class = pc
			}
		}
	}
	var value int32
	if class != nil {
		value = class.Value
		if class.PreemptionPolicy != nil {
			policy = *class.PreemptionPolicy
		}
	}
	if root.Priority != nil {
		value = *root.Priority
	}
	if root.PreemptionPolicy != nil {
		policy = *root.PreemptionPolicy
	}
	return value, policy, nil
}
