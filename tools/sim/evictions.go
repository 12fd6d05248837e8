package sim

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// evictions counts the pods of a namespace that the scheduler marked with a
// DisruptionTarget condition (its victims), per group. A watch sees the
// condition even when the pod is deleted a moment later.
type evictions struct {
	mu      sync.Mutex
	victims map[types.UID]groupRef
	stop    func()
}

func watchEvictions(ctx context.Context, client kubernetes.Interface, ns string) (*evictions, error) {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	e := &evictions{victims: map[types.UID]groupRef{}}
	e.stop = func() {
		cancel()
		factory.Shutdown()
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    e.observe,
		UpdateFunc: func(_, obj interface{}) { e.observe(obj) },
		DeleteFunc: func(obj interface{}) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			e.observe(obj)
		},
	})
	if err != nil {
		e.stop()
		return nil, fmt.Errorf("watch pods of %s: %w", ns, err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		e.stop()
		return nil, fmt.Errorf("watch pods of %s: cache did not sync", ns)
	}
	return e, nil
}

func (e *evictions) observe(obj interface{}) {
	p, ok := obj.(*corev1.Pod)
	if !ok || !isVictim(p) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.victims[p.UID] = groupOf(p)
}

// note records victims seen by a List, in case the watch is behind.
func (e *evictions) note(pods []corev1.Pod) {
	for i := range pods {
		e.observe(&pods[i])
	}
}

// counts is the number of victims per group that o no longer shows
// running: the watch may be ahead of the List behind o, and a frame must
// not show a pod both bound and evicted.
func (e *evictions) counts(o *observation) map[groupRef]int {
	alive := o.alive()
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[groupRef]int{}
	for uid, ref := range e.victims {
		if !alive[uid] {
			out[ref]++
		}
	}
	return out
}

// evicting is true while a victim the watch has seen still runs in o.
func (e *evictions) evicting(o *observation) bool {
	alive := o.alive()
	e.mu.Lock()
	defer e.mu.Unlock()
	for uid := range e.victims {
		if alive[uid] {
			return true
		}
	}
	return false
}

// alive are the pods of o that are not terminating.
func (o *observation) alive() map[types.UID]bool {
	out := make(map[types.UID]bool, len(o.pods))
	for i := range o.pods {
		if o.pods[i].DeletionTimestamp == nil {
			out[o.pods[i].UID] = true
		}
	}
	return out
}

func isVictim(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
