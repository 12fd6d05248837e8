package gang

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	schedutil "k8s.io/kubernetes/pkg/scheduler/util"
)

// Bind pacing.
//
// The framework starts one binding goroutine per pod that passes Permit,
// and a gang passes Permit all at once: a thousand members mean a thousand
// concurrent binding requests, on top of every other gang reserved
// meanwhile. The API server then serves all of them slowly together, so
// every gang completes near the end, and the waiting requests hold the
// scheduler's memory. PhalanxGang's Bind holds each binding goroutine
// until one of bindConcurrency slots is free (waiters are served in
// arrival order, so the members of the gang allowed first bind first) and
// then sends the binding request itself. The slot is freed in PostBind, or
// in Unreserve when the bind failed.
//
// The wait for a slot and the request do not use the binding cycle's
// context: a stopping scheduler ends its cycles, and a gang whose first
// members are bound must not lose the rest to that (drain.go). They end
// with the scheduler instance instead, when its graceful stop gives up or
// it is killed.

var (
	_ fwk.BindPlugin     = &Gang{}
	_ fwk.PostBindPlugin = &Gang{}
)

type bindSlots struct {
	slots chan struct{}

	mu   sync.Mutex
	held map[types.UID]bool
}

func newBindSlots(n int) *bindSlots {
	return &bindSlots{slots: make(chan struct{}, n), held: map[types.UID]bool{}}
}

// acquire waits for a slot for uid. Blocked senders on a channel are
// served in the order they arrived.
func (b *bindSlots) acquire(ctx context.Context, uid types.UID) error {
	b.mu.Lock()
	holding := b.held[uid]
	b.mu.Unlock()
	if holding {
		return nil
	}
	start := time.Now()
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	bindSlotWait.Observe(time.Since(start).Seconds())
	bindsInFlight.Inc()
	b.mu.Lock()
	b.held[uid] = true
	b.mu.Unlock()
	return nil
}

func (b *bindSlots) release(uid types.UID) {
	b.mu.Lock()
	holding := b.held[uid]
	delete(b.held, uid)
	b.mu.Unlock()
	if holding {
		bindsInFlight.Dec()
		<-b.slots
	}
}

// Bind takes a bind slot for the pod and binds it.
func (pl *Gang) Bind(ctx context.Context, _ fwk.CycleState, pod *corev1.Pod, node string) *fwk.Status {
	bctx, cancel := pl.shared.bindContext(ctx)
	defer cancel()
	if err := pl.shared.binds.acquire(bctx, pod.UID); err != nil {
		return fwk.AsStatus(err)
	}
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	if cacher := pl.handle.APICacher(); cacher != nil {
		// SchedulerAsyncAPICalls: the dispatcher sends the request, and
		// keeps its own order with the other calls about this pod.
		onFinish, err := cacher.BindPod(binding)
		if err == nil {
			err = cacher.WaitOnFinish(bctx, onFinish)
		}
		return fwk.AsStatus(err)
	}
	klog.FromContext(ctx).V(3).Info("Binding pod", "pod", klog.KObj(pod), "node", klog.KRef("", node))
	return fwk.AsStatus(schedutil.BindPod(bctx, pl.handle.ClientSet(), binding))
}

// bindContext is the context of one bind: the values of the binding
// cycle's (its logger), and the lifetime of the scheduler instance.
func (s *shared) bindContext(cycle context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(cycle))
	stop := context.AfterFunc(s.lifetime, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// PostBind frees the pod's bind slot.
func (pl *Gang) PostBind(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) {
	pl.shared.binds.release(pod.UID)
	pl.shared.drain.finish(pod.UID, true)
}
