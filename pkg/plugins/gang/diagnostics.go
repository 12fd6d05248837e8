package gang

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/placement"
)

// PermitSince returns when the current round of root's hierarchy started
// waiting in Permit (its first member arrived), false when none waits.
func (pl *Gang) PermitSince(root groups.Key) (time.Time, bool) {
	d := pl.shared.deadlines
	d.mu.Lock()
	defer d.mu.Unlock()
	if g := d.open[root]; g != nil {
		return g.started, true
	}
	return time.Time{}, false
}

// ExceedsAllocatable is PreFilter's size check of a leaf gang: why need
// members, with the requests of members, can never fit the allocatable of
// the nodes alloc even if they were empty; "" when they might.
func ExceedsAllocatable(need int, members []*corev1.Pod, alloc []placement.Resources) string {
	return exceedsAllocatable(need, members, alloc)
}
