package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// bindWatch records when each pod of a namespace is first seen bound.
type bindWatch struct {
	mu       sync.Mutex
	bound    map[string]time.Time
	last     time.Time
	want     int
	allBound chan struct{}
	stop     context.CancelFunc
}

// watchBinds starts a pod informer on ns and returns once it has synced.
func watchBinds(ctx context.Context, client kubernetes.Interface, ns string, want int) (*bindWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &bindWatch{bound: make(map[string]time.Time, want), want: want, allBound: make(chan struct{}), stop: cancel}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	observe := func(obj interface{}) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			w.record(p.Name, time.Now())
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj interface{}) { observe(obj) },
	}); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("pod informer of namespace %s did not sync", ns)
	}
	return w, nil
}

func (w *bindWatch) record(name string, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, seen := w.bound[name]; seen {
		return
	}
	w.bound[name] = at
	w.last = at
	if len(w.bound) == w.want {
		close(w.allBound)
	}
}

// lastBind is when the latest pod was first seen bound (zero if none).
func (w *bindWatch) lastBind() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// snapshot copies the bind times recorded so far.
func (w *bindWatch) snapshot() map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]time.Time, len(w.bound))
	for k, v := range w.bound {
		out[k] = v
	}
	return out
}
