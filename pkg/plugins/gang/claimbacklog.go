package gang

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Claim backlog.
//
// A pod with ResourceClaims carries the DynamicResources plugin's cycle
// state from PreFilter until its bind ends: a device allocator over every
// node's ResourceSlices and a copy of every allocated device in the
// cluster, about 1 MiB a pod at 5,000 nodes × 8 devices. Phalanx plans and
// reserves whole gangs faster than the API server takes their claim writes
// (PreBind's finalizer and allocation) and binds, so without a limit
// hundreds of reserved pods wait there at once and their states, not the
// devices themselves, make most of the memory DRA costs. The scheduling
// cycle of a pod with claims therefore waits while claimBacklog pods with
// claims (bindConcurrency if lower) are let through Permit and not yet
// bound. Those binds finish on their own (binding cycles do not need the
// scheduling loop), so the wait ends. Members that wait in Permit for
// their gang are not counted: they are let through only when the rest of
// their gang is scheduled, which this wait must not block.

// claimBacklog is how many pods with claims may be binding before the
// next one waits. Each makes three writes (its claim's finalizer, its
// claim's allocation and reservation, the binding): 16 pods keep about 48
// requests before the API server, a few hundred pods a second at the tens
// of milliseconds a write takes, more than the DRA path schedules. A
// larger backlog only lengthens the API server's queue while every pod in
// it holds its cycle state: in the 1,000-node DRA gang case, 16 rather
// than 64 took the scheduler's peak RSS over its twin from 93 to 56 MiB.
const claimBacklog = 16

// claimBacklogMaxWait bounds one wait, so that binds stuck in the API
// server slow the scheduling of pods with claims but never stop it.
const claimBacklogMaxWait = 5 * time.Second

// awaitClaimBacklog blocks while limit or more admitted pods with claims
// have not finished binding, up to max or until ctx ends, and returns how
// long it waited. It does not wait once the scheduler is stopping.
func (d *Drain) awaitClaimBacklog(ctx context.Context, limit int, max time.Duration) time.Duration {
	start := time.Now()
	timer := time.NewTimer(max)
	defer timer.Stop()
	for {
		d.mu.Lock()
		if d.stopping || d.claimBinds < limit {
			d.mu.Unlock()
			return time.Since(start)
		}
		done := d.claimDone
		d.mu.Unlock()
		select {
		case <-done:
		case <-timer.C:
			return time.Since(start)
		case <-ctx.Done():
			return time.Since(start)
		}
	}
}

// holdForClaimBacklog is PreFilter's wait for a pod with claims (see
// above); other pods pass at once.
func (pl *Gang) holdForClaimBacklog(ctx context.Context, pod *corev1.Pod) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return
	}
	if waited := pl.shared.drain.awaitClaimBacklog(ctx, min(claimBacklog, cap(pl.shared.binds.slots)), claimBacklogMaxWait); waited > time.Millisecond {
		claimBacklogWait.Observe(waited.Seconds())
	}
}
