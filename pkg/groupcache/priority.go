package groupcache

import (
	"sync"

	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"
)

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
