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

// bindWatch records when each of a set of pods of a namespace is first
// seen bound.
type bindWatch struct {
	names    map[string]bool
	mu       sync.Mutex
	bound    map[string]time.Time
	last     time.Time
	want     int
	allBound chan struct{}
	stop     context.CancelFunc
}

// watchBinds starts a pod informer on ns, watching the named pods, and
// returns once it has synced.
func watchBinds(ctx context.Context, client kubernetes.Interface, ns string, names []string) (*bindWatch, error) {
	return watchBindsAs(ctx, client, ns, names, func(p *corev1.Pod) string { return p.Name })
}

// watchBindsAs is watchBinds for pods whose names are not the case's:
// nameOf maps a pod to its member name (memberName).
func watchBindsAs(ctx context.Context, client kubernetes.Interface, ns string, names []string, nameOf func(*corev1.Pod) string) (*bindWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	want := len(names)
	w := &bindWatch{names: make(map[string]bool, want), bound: make(map[string]time.Time, want), want: want, allBound: make(chan struct{}), stop: cancel}
	for _, n := range names {
		w.names[n] = true
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	observe := func(obj interface{}) {
		if p, ok := obj.(*corev1.Pod); ok && p.Spec.NodeName != "" {
			if name := nameOf(p); w.names[name] {
				w.record(name, time.Now())
			}
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
