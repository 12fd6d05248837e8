package gang

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
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
// then returns Skip: DefaultBinder, next in the profile's bind list, makes
// the request. The slot is freed in PostBind, or in Unreserve when the
// bind failed.

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

// Bind takes a bind slot for the pod and leaves the binding to the next
// bind plugin.
func (pl *Gang) Bind(ctx context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) *fwk.Status {
	if err := pl.shared.binds.acquire(ctx, pod.UID); err != nil {
		return fwk.AsStatus(err)
	}
	return fwk.NewStatus(fwk.Skip)
}

// PostBind frees the pod's bind slot.
func (pl *Gang) PostBind(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) {
	pl.shared.binds.release(pod.UID)
}
