package gang

import (
	"time"

	"github.com/phalanx-sched/phalanx/pkg/groups"
	"github.com/phalanx-sched/phalanx/pkg/plugins/pluginrt"
)

// The diagnostics read the plugin through this interface only.
var _ pluginrt.PermitWaits = &Gang{}

// PermitSince returns when the current round of root's hierarchy started
// waiting in Permit (its first member arrived), false when none waits.
func (pl *Gang) PermitSince(root groups.Key) (time.Time, bool) {
	d := pl.shared.deadlines
	d.mu.Lock()
	defer d.mu.Unlock()
	if g := d.open[root]; g != nil {
		return g.Started, true
	}
	return time.Time{}, false
}
