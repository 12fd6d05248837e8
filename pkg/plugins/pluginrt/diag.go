package pluginrt

import (
	"time"

	"github.com/phalanx-sched/phalanx/pkg/groups"
)

// PermitWaits is what the diagnostics read of PhalanxGang, read-only:
// when the current round of a hierarchy (by its root) started waiting in
// Permit, false when none waits. The diagnostics find the plugin through
// Runtime.Plugin and read it through this interface, not the plugin type,
// so they depend on no plugin package's internals.
type PermitWaits interface {
	PermitSince(root groups.Key) (time.Time, bool)
}
