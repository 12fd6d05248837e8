package groups

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"
)

// EffectivePriority is the priority and preemption policy a pod under root
// schedules, waits and preempts with: the root's (ResolvePriority), or the
// pod's own when the root takes its priority from its members (label gangs,
// scheduler-plugins PodGroups). Every plugin resolves priority through it,
// so a member, its group and its preemptions never disagree.
func EffectivePriority(pod *corev1.Pod, root Info, classes schedulinglisters.PriorityClassLister) (int32, corev1.PreemptionPolicy, error) {
	if root.PriorityFromMembers {
		return PodPriority(pod), PodPolicy(pod), nil
	}
	return ResolvePriority(root, classes)
}

// PriorityClasses is a PriorityClass lister that also keeps the
// globalDefault classes from informer events (Handler): resolving a group
// without a class name would otherwise list every class, on every
// PreFilter of a member.
type PriorityClasses struct {
	schedulinglisters.PriorityClassLister

	mu       sync.RWMutex
	defaults map[string]*schedulingv1.PriorityClass
}

// NewPriorityClasses wraps l; feed it with Handler.
func NewPriorityClasses(l schedulinglisters.PriorityClassLister) *PriorityClasses {
	return &PriorityClasses{PriorityClassLister: l, defaults: map[string]*schedulingv1.PriorityClass{}}
}

// Handler keeps the globalDefault classes as PriorityClasses come, change
// and go.
func (p *PriorityClasses) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    p.set,
		UpdateFunc: func(_, obj interface{}) { p.set(obj) },
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pc, ok := obj.(*schedulingv1.PriorityClass); ok {
				p.mu.Lock()
				delete(p.defaults, pc.Name)
				p.mu.Unlock()
			}
		},
	}
}

func (p *PriorityClasses) set(obj interface{}) {
	pc, ok := obj.(*schedulingv1.PriorityClass)
	if !ok {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc.GlobalDefault {
		p.defaults[pc.Name] = pc
	} else {
		delete(p.defaults, pc.Name)
	}
}

// GlobalDefault is the globalDefault class pods without a class get, the
// oldest when several claim it; nil when none does.
func (p *PriorityClasses) GlobalDefault() *schedulingv1.PriorityClass {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var class *schedulingv1.PriorityClass
	for _, pc := range p.defaults {
		if class == nil || pc.CreationTimestamp.Before(&class.CreationTimestamp) ||
			(pc.CreationTimestamp.Equal(&class.CreationTimestamp) && pc.Name < class.Name) {
			class = pc
		}
	}
	return class
}

// ResolvePriority returns the priority and preemption policy of a group
// hierarchy from its root: spec.priority if set; else the PriorityClass
// named by priorityClassName; else the globalDefault class; else 0. The
// preemption policy is the root's, else its class's, else
// PreemptLowerPriority. A class that does not exist is an error, not 0, so
// the user learns about the typo instead of running at the wrong priority.
// A nil classes knows no PriorityClass (a cache fed without informers).
func ResolvePriority(root Info, classes schedulinglisters.PriorityClassLister) (int32, corev1.PreemptionPolicy, error) {
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
		if d, ok := classes.(*PriorityClasses); ok {
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
