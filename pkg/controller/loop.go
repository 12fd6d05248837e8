package controller

import (
	"context"
	"time"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// loop is one reconcile loop: a rate-limited workqueue of object keys and
// the function that reconciles one key. A key is never reconciled by two
// workers at once, and a key added while queued is reconciled once.
type loop struct {
	name  string
	queue workqueue.TypedRateLimitingInterface[cache.ObjectName]
	sync  func(context.Context, cache.ObjectName) error
}

func newLoop(name string, sync func(context.Context, cache.ObjectName) error) loop {
	return loop{
		name: name,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "phalanx_" + name},
		),
		sync: sync,
	}
}

// enqueue adds the key of a namespaced object.
func (l *loop) enqueue(namespace, name string) {
	l.queue.Add(cache.ObjectName{Namespace: namespace, Name: name})
}

// start runs workers until ctx ends, then shuts the queue down.
func (l *loop) start(ctx context.Context, workers int) {
	logger := klog.FromContext(ctx).WithValues("controller", l.name)
	ctx = klog.NewContext(ctx, logger)
	for range workers {
		go wait.UntilWithContext(ctx, l.work, time.Second)
	}
	go func() {
		<-ctx.Done()
		l.queue.ShutDown()
	}()
	logger.V(2).Info("Started controller", "workers", workers)
}

func (l *loop) work(ctx context.Context) {
	for l.processNext(ctx) {
	}
}

// processNext reconciles one key. Errors requeue the key with backoff; the
// key is forgotten (its backoff reset) on success.
func (l *loop) processNext(ctx context.Context) bool {
	key, quit := l.queue.Get()
	if quit {
		return false
	}
	defer l.queue.Done(key)

	start := time.Now()
	err := l.sync(ctx, key)
	observeReconcile(l.name, err, time.Since(start))
	if err == nil {
		l.queue.Forget(key)
		return true
	}
	if ctx.Err() == nil {
		utilruntime.HandleErrorWithContext(ctx, err, "Reconcile failed, will retry", "controller", l.name, "key", key)
	}
	l.queue.AddRateLimited(key)
	return true
}
